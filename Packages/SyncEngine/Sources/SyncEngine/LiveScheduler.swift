/// The pure decision logic of the live stream (`GET /v1/live`): when the engine subscribes, when it catches
/// up by a cycle first, how long it waits after the stream ends, and when it long-polls instead. It performs
/// no I/O and reads no clock; the driver (`SyncEngine.run()`) feeds it what happened with the current
/// instant and carries out the returned actions.
///
/// Rules:
/// - The stream is held only while open (`setOpen(true)`: the app is in the foreground) and only from a
///   store at the head: opening asks for a cycle (`catchUp`) and subscribes once one has reached the head
///   (`caughtUp`). Closing drops the connection at once.
/// - A stream that ends (a server restart, a broken connection, three heartbeats of silence) or cannot
///   be opened subscribes again from the stored cursor after `BackoffPolicy.delay` (full jitter, at least
///   Retry-After), with the attempt growing while connections fail or end before `healthyAfter`.
/// - `behind`, a gap between a frame and the store, and `reset.required` ask for a cycle, then subscribe
///   again once it has reached the head (after a backoff delay when they come in a row).
/// - `auth.expired` (or any authentication failure) pauses sync as a cycle failing with it would; the
///   stream comes back after the cycle that follows `tokenRefreshed`.
/// - A transport or server without the stream (`SyncFailure.transportUnsupported`), or a stream configured
///   off, long-polls instead (`longPolls`) until the next `setOpen(true)`, which tries the stream again.
public struct LiveScheduler<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    public enum Phase: Sendable, Hashable {
        /// Closed (the app is in the background): the engine syncs on its other triggers only.
        case closed
        /// Open, waiting for a cycle to reach the head; then subscribes, not before `notBefore`.
        case awaitingHead(notBefore: Instant?)
        /// The subscription request is out.
        case connecting
        /// Subscribed since this instant: frames flow.
        case connected(since: Instant)
        /// Waiting after the stream ended or failed; subscribes again at `until`.
        case backingOff(until: Instant)
        /// No stream (the transport or the server has none, or it is configured off): long-poll instead.
        case polling
    }

    /// How a stream ended (reported once the driver has closed it).
    public enum End: Sendable, Hashable {
        /// The server closed it, or the connection broke: subscribe again from the cursor.
        case ended
        /// The server dropped this subscriber back to catch-up (`behind`).
        case behind
        /// A frame did not continue the store (or could not be applied): the store lacks events before it.
        case gap
        /// The subscription was refused, or the stream failed with this.
        case failed(SyncFailure)
    }

    public enum Action: Sendable, Hashable {
        /// Subscribe now, from the stored cursor.
        case connect
        /// Close the stream now.
        case disconnect
        /// Run a cycle; the stream subscribes again once one reaches the head (`caughtUp`).
        case catchUp
        /// Pause sync until a new token, as a cycle failing with this would (`SyncScheduler.pause`).
        case pause(SyncFailure)
        /// Call `tick` at this instant.
        case wake(at: Instant)
        case none
    }

    public private(set) var phase: Phase = .closed
    /// Connections in a row that failed or ended before `healthyAfter`.
    public private(set) var consecutiveFailures = 0
    /// Whether the engine holds the stream when open; false: it long-polls.
    public let stream: Bool
    public let backoff: BackoffPolicy
    /// How long a connection must have lasted for its end not to count as a failure in a row.
    public let healthyAfter: Duration

    public init(stream: Bool = true, backoff: BackoffPolicy = BackoffPolicy(), healthyAfter: Duration = .seconds(10)) {
        self.stream = stream
        self.backoff = backoff
        self.healthyAfter = healthyAfter
    }

    /// Whether the engine long-polls now (the stream is open but unavailable).
    public var longPolls: Bool { phase == .polling }

    /// Whether the stream is connected (subscribed).
    public var isConnected: Bool {
        if case .connected = phase { return true }
        return false
    }

    /// Whether a connection is open or being opened (what `disconnect` closes).
    public var isConnecting: Bool { phase == .connecting || isConnected }

    /// The app came to the foreground (`true`) or went to the background (`false`).
    public mutating func setOpen(_ open: Bool, now: Instant) -> Action {
        guard open else {
            let wasConnecting = isConnecting
            phase = .closed
            return wasConnecting ? .disconnect : .none
        }
        switch phase {
        case .closed, .polling:
            guard stream else {
                phase = .polling
                return .none
            }
            consecutiveFailures = 0
            phase = .awaitingHead(notBefore: nil)
            return .catchUp
        default:
            return .none
        }
    }

    /// A cycle reached the head.
    public mutating func caughtUp(now: Instant) -> Action {
        switch phase {
        case .awaitingHead(let notBefore):
            if let notBefore, notBefore > now {
                phase = .backingOff(until: notBefore)
                return .wake(at: notBefore)
            }
            phase = .connecting
            return .connect
        case .backingOff(let until):
            return .wake(at: until)
        default:
            return .none
        }
    }

    /// The stream's first message arrived: subscribed.
    public mutating func subscribed(now: Instant) -> Action {
        if phase == .connecting { phase = .connected(since: now) }
        return .none
    }

    /// The stream ended with `end` (the driver has closed it). Ignored unless a connection was open.
    public mutating func ended<R: RandomNumberGenerator>(_ end: End, now: Instant, random: inout R) -> Action {
        switch phase {
        case .connecting: break
        case .connected(let since): if since.duration(to: now) >= healthyAfter { consecutiveFailures = 0 }
        default: return .none
        }
        switch end {
        case .failed(.permanent(let code, _)) where code == SyncFailure.transportUnsupported:
            phase = .polling
            return .none
        case .failed(.authentication(let code, let message)):
            phase = .awaitingHead(notBefore: nil)
            return .pause(.authentication(code: code, message: message))
        case .behind, .gap, .failed(.resetRequired):
            let notBefore =
                consecutiveFailures == 0
                ? nil : now.advanced(by: backoff.delay(attempt: consecutiveFailures - 1, using: &random))
            consecutiveFailures += 1
            phase = .awaitingHead(notBefore: notBefore)
            return .catchUp
        case .ended, .failed:
            var retryAfter: Duration? = nil
            if case .failed(.retryable(_, let after)) = end { retryAfter = after }
            let until = now.advanced(
                by: backoff.delay(attempt: consecutiveFailures, retryAfter: retryAfter, using: &random))
            consecutiveFailures += 1
            phase = .backingOff(until: until)
            return .wake(at: until)
        }
    }

    /// Time passed: subscribes again when a backoff is over.
    public mutating func tick(now: Instant) -> Action {
        guard case .backingOff(let until) = phase else { return .none }
        guard until <= now else { return .wake(at: until) }
        phase = .connecting
        return .connect
    }
}
