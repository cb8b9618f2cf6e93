import Foundation
import SyncEngine
import SyncModels
import SyncProtocol
import Synchronization

/// A transport to an `InMemorySyncServer` with injected faults, for deterministic tests of what a real
/// network does to a sync: requests lost, responses lost after the server committed, requests delivered
/// twice, delays, reordered concurrent deliveries, 5xx and 429 answers, expired tokens. It has the live
/// stream too (`live`: frames as the server commits), with its own faults: a server without it, refused
/// subscriptions, lost frames, streams ended by `behind`, an error or a restart.
public final class InMemoryTransport: SyncTransport {
    public enum Fault: Sendable, Hashable {
        /// The request never reaches the server.
        case dropRequest
        /// The server handles the request, the answer is lost (the client sees a network error).
        case dropResponse
        /// The request reaches the server twice; the client gets the second answer.
        case duplicate
        /// The answer arrives after a delay.
        case delay(Duration)
        /// The request is held back (the client sees it lost) and reaches the server later, just before the
        /// next request: a delayed retransmission arriving after newer traffic.
        case reorder
        /// HTTP 500.
        case serverError
        /// HTTP 429 with `Retry-After`.
        case rateLimited(retryAfter: Duration)
        /// HTTP 401 `auth.expired`.
        case tokenExpired
        /// HTTP 410 `reset.required`, before the server handles the request (it purged history this replica
        /// had not seen).
        case resetRequired
    }

    public let server: InMemorySyncServer
    private let faults: Mutex<[Fault]>
    private let delivered = Mutex(0)
    private let heldBack = Mutex<[SyncRequest]>([])
    private let liveState = Mutex(LiveState())
    private struct LiveState {
        var supported = true
        var refusals: [SyncFailure] = []
        var framesToDrop = 0
        var requests: [PullRequest] = []
        var nextID = 0
        var open: [Int: (continuation: LiveMessages.Continuation, forward: Task<Void, Never>)] = [:]
    }

    /// - Parameters:
    ///   - server: the server requests reach.
    ///   - faults: applied to the next requests, one per request, in order.
    public init(server: InMemorySyncServer, faults: [Fault] = []) {
        self.server = server
        self.faults = Mutex(faults)
    }

    /// Queues faults for the next requests.
    public func inject(_ more: [Fault]) {
        faults.withLock { $0 += more }
    }

    /// Requests that reached the server through this transport.
    public var deliveredCount: Int { delivered.withLock { $0 } }

    public func sync(_ request: SyncRequest) async throws(SyncFailure) -> TransportExchange {
        let fault = faults.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        for late in heldBack.withLock({ held in
            defer { held.removeAll() }; return held
        }) {
            delivered.withLock { $0 += 1 }
            _ = try? await server.handle(late)
        }
        switch fault {
        case .reorder?:
            heldBack.withLock { $0.append(request) }
            throw .retryable(reason: "network: request delayed", retryAfter: nil)
        case .dropRequest?:
            throw .retryable(reason: "network: request lost", retryAfter: nil)
        case .serverError?:
            throw SyncFailure.from(status: 500, code: "server.internal", message: "injected")
        case .rateLimited(let retryAfter)?:
            throw SyncFailure.from(status: 429, code: "rate.limited", message: "injected", retryAfter: retryAfter)
        case .tokenExpired?:
            throw SyncFailure.from(status: 401, code: "auth.expired", message: "the token has expired")
        case .resetRequired?:
            throw SyncFailure.from(status: 410, code: "reset.required", message: "injected")
        case .delay(let duration)?:
            try? await Task.sleep(for: duration)
        case .dropResponse?, .duplicate?, nil:
            break
        }
        let size = (try? WireCodec().encode(request).count) ?? 0
        if fault == .duplicate {
            delivered.withLock { $0 += 1 }
            _ = try await server.handle(request)
        }
        delivered.withLock { $0 += 1 }
        let response = try await server.handle(request)
        if fault == .dropResponse {
            throw .retryable(reason: "network: response lost", retryAfter: nil)
        }
        let received = (try? WireCodec().encode(response).count) ?? 0
        return TransportExchange(
            response: response,
            traffic: Traffic(sentRaw: size, sentWire: size, receivedRaw: received, receivedWire: received))
    }

    /// Reads the server's log; a long-poll (`wait` above 0) reads again every 10 ms until something is new or
    /// the wait is over. Faults are for `sync` only.
    public func pull(_ request: PullRequest) async throws(SyncFailure) -> PullResponse {
        let deadline = ContinuousClock.now + .seconds(request.wait)
        while true {
            let page = await server.pull(request)
            if !page.events.isEmpty || ContinuousClock.now >= deadline || Task.isCancelled { return page }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    // MARK: - The live stream

    /// Subscribes at the server (`InMemorySyncServer.subscribe`): `subscribed` (heartbeat 15 s), then its
    /// frames as it commits, until the stream is ended (`endLiveStreams`) or the caller stops reading.
    /// The faults of `sync` do not apply; the live ones below do.
    public func live(_ request: PullRequest) async throws(SyncFailure) -> LiveMessages {
        let refusal = liveState.withLock { state -> SyncFailure? in
            state.requests.append(request)
            guard state.supported else {
                return .permanent(code: SyncFailure.transportUnsupported, message: "HTTP 404 route.notFound")
            }
            return state.refusals.isEmpty ? nil : state.refusals.removeFirst()
        }
        if let refusal { throw refusal }
        let frames = await server.subscribe(request)
        let (stream, continuation) = LiveMessages.makeStream()
        continuation.yield(.subscribed(heartbeatSeconds: 15))
        let forward = Task { [weak self] in
            for await frame in frames {
                let lost = self?.liveState.withLock { state in
                    defer { state.framesToDrop = max(0, state.framesToDrop - 1) }
                    return state.framesToDrop > 0
                }
                if lost != true { continuation.yield(.frame(frame)) }
            }
            // Cancelled: whoever cancelled ends the stream (`endLiveStreams` after its message).
            if !Task.isCancelled { continuation.finish() }
        }
        let id = liveState.withLock { state in
            state.nextID += 1
            state.open[state.nextID] = (continuation, forward)
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in
            forward.cancel()
            _ = self?.liveState.withLock { $0.open.removeValue(forKey: id) }
        }
        return stream
    }

    /// Whether `live` subscribes; false answers as a server without the stream does (404, which the engine
    /// sees as `SyncFailure.transportUnsupported`).
    public func setLiveSupported(_ supported: Bool) {
        liveState.withLock { $0.supported = supported }
    }

    /// Refuses the next subscriptions with these failures, one per request, in order.
    public func refuseLive(_ failures: [SyncFailure]) {
        liveState.withLock { $0.refusals += failures }
    }

    /// Loses the next `count` frames on their way to the open streams: the subscriber sees a gap.
    public func dropLiveFrames(_ count: Int) {
        liveState.withLock { $0.framesToDrop += count }
    }

    /// Ends every open stream after `message` (`.behind`, `.error(…)`), or without one (nil: a server restart).
    public func endLiveStreams(with message: LiveMessage? = nil) {
        let open = liveState.withLock { state in
            defer { state.open.removeAll() }
            return Array(state.open.values)
        }
        for (continuation, forward) in open {
            forward.cancel()
            if let message { continuation.yield(message) }
            continuation.finish()
        }
    }

    /// The live requests made so far, oldest first (refused ones included).
    public var liveRequests: [PullRequest] { liveState.withLock { $0.requests } }

    /// The streams open now.
    public var openLiveStreams: Int { liveState.withLock { $0.open.count } }
}
