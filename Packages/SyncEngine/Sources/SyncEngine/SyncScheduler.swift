/// The pure decision logic of the sync engine: when to start a sync cycle, given triggers, results and
/// time. It performs no I/O and reads no clock; the driver feeds it events with the current instant and
/// carries out the returned actions, so every decision is testable with a manual clock.
///
/// Rules:
/// - At most one cycle runs at a time; triggers during a cycle make one more cycle right after it: writes made
///   while a push is in flight go together in the next one.
/// - A local write is latency-first: it starts a cycle at once when none runs, unless the rate bound says
///   wait, or `debounce` is set (then after it, unless one is due sooner). The rate bound lets `pushBurst`
///   cycles start back to back and then one per `minPushInterval` (a generic cell rate algorithm: over any
///   span `T`, at most `pushBurst + T / minPushInterval` cycles start), so a device that writes now and then
///   never waits, and one typing fast pushes at most once per interval, each push carrying what was typed
///   since the last. Explicit, connectivity, token, remote-change and interval triggers start one now (and
///   count against the bound).
/// - A retryable failure waits `BackoffPolicy.delay(attempt:)` (full jitter, capped, at least Retry-After),
///   with `attempt` growing until a cycle succeeds. Explicit and connectivity triggers skip the wait.
/// - An authentication failure pauses: nothing starts until `tokenRefreshed`.
/// - A permanent failure is surfaced and nothing is retried until the next trigger.
public struct SyncScheduler<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    public enum Phase: Sendable, Hashable {
        case idle
        /// A cycle is due at this instant.
        case scheduled(at: Instant)
        case running
        /// Waiting after a retryable failure.
        case backingOff(until: Instant, attempt: Int)
        /// Waiting for a new token.
        case paused
    }

    public enum Action: Sendable, Hashable {
        /// Start a sync cycle now.
        case startCycle
        /// Call `tick` at this instant.
        case wake(at: Instant)
        case none
    }

    public private(set) var phase: Phase = .idle
    /// Failures in a row since the last success.
    public private(set) var consecutiveFailures = 0
    public private(set) var lastFailure: SyncFailure?
    /// When the last cycle started.
    public private(set) var lastStart: Instant?
    /// The rate bound's clock: when the next cycle would start if every cycle were `minPushInterval` apart
    /// (the "theoretical arrival time" of the generic cell rate algorithm); nil before the first cycle.
    private var rateClock: Instant?
    private var pendingAfterRun = false
    private var pendingTrigger: SyncTrigger?
    /// An authentication failure came from outside the running cycle (`pause`): pause once it ends.
    private var pauseAfterRun = false

    /// How long a local write waits before its cycle when none runs; zero (the default) starts it at once.
    public let debounce: Duration
    /// The sustained bound on cycles that local writes start: one per this interval.
    public let minPushInterval: Duration
    /// How many cycles local writes may start back to back before `minPushInterval` applies (at least 1:
    /// then every two starts are at least the interval apart).
    public let pushBurst: Int
    public let backoff: BackoffPolicy

    public init(
        debounce: Duration = .zero, minPushInterval: Duration = .milliseconds(50), pushBurst: Int = 4,
        backoff: BackoffPolicy = BackoffPolicy()
    ) {
        self.debounce = debounce
        self.minPushInterval = minPushInterval
        self.pushBurst = max(1, pushBurst)
        self.backoff = backoff
    }

    /// The earliest a local write may start a cycle under the rate bound.
    private var earliestByRate: Instant? {
        rateClock.map { $0.advanced(by: minPushInterval * -(pushBurst - 1)) }
    }

    /// Something asks for a sync.
    public mutating func trigger(_ trigger: SyncTrigger, now: Instant) -> Action {
        switch phase {
        case .running:
            pendingAfterRun = true
            // A local write after a trigger that starts at once does not hold that one back.
            if pendingTrigger == nil || pendingTrigger == .localWrite { pendingTrigger = trigger }
            return .none
        case .paused:
            guard trigger == .tokenRefreshed else { return .none }
            return start(now: now)
        case .backingOff(let until, _):
            if trigger == .explicit || trigger == .connectivity || trigger == .tokenRefreshed { return start(now: now) }
            return .wake(at: until)
        case .idle, .scheduled:
            switch trigger {
            case .explicit, .connectivity, .tokenRefreshed, .interval, .remoteChange:
                return start(now: now)
            case .localWrite:
                var due = now.advanced(by: debounce)
                if let earliest = earliestByRate { due = max(due, earliest) }
                if case .scheduled(let at) = phase, at <= due { return at <= now ? start(now: now) : .wake(at: at) }
                if due <= now { return start(now: now) }
                phase = .scheduled(at: due)
                return .wake(at: due)
            }
        }
    }

    /// An authentication failure outside a cycle (the live stream ended with `auth.expired`): pauses as a
    /// cycle failing with it would, at once or when the running cycle ends. Nothing starts until
    /// `tokenRefreshed`.
    public mutating func pause(failure: SyncFailure) {
        lastFailure = failure
        consecutiveFailures += 1
        pendingAfterRun = false
        pendingTrigger = nil
        if phase == .running {
            pauseAfterRun = true
        } else {
            phase = .paused
        }
    }

    /// Time passed; starts a due cycle.
    public mutating func tick(now: Instant) -> Action {
        switch phase {
        case .scheduled(let at) where at <= now: return start(now: now)
        case .backingOff(let until, _) where until <= now: return start(now: now)
        case .scheduled(let at): return .wake(at: at)
        case .backingOff(let until, _): return .wake(at: until)
        default: return .none
        }
    }

    /// The running cycle finished. `failure` is nil on success.
    public mutating func cycleFinished<R: RandomNumberGenerator>(
        failure: SyncFailure?, now: Instant, random: inout R
    ) -> Action {
        precondition(phase == .running, "cycleFinished without a running cycle")
        lastFailure = failure
        if pauseAfterRun {
            pauseAfterRun = false
            if failure != nil { consecutiveFailures += 1 }
            pendingAfterRun = false
            phase = .paused
            return .none
        }
        switch failure {
        case nil:
            consecutiveFailures = 0
            return afterRun(now: now)
        case .retryable(_, let retryAfter)?:
            let delay = backoff.delay(attempt: consecutiveFailures, retryAfter: retryAfter, using: &random)
            consecutiveFailures += 1
            let until = now.advanced(by: delay)
            phase = .backingOff(until: until, attempt: consecutiveFailures)
            pendingAfterRun = false
            return .wake(at: until)
        case .authentication?:
            consecutiveFailures += 1
            phase = .paused
            pendingAfterRun = false
            return .none
        case .resetRequired?:
            // The driver re-bootstraps inside the next cycle; start it at once.
            consecutiveFailures += 1
            return start(now: now)
        case .permanent?:
            consecutiveFailures += 1
            pendingAfterRun = false
            phase = .idle
            return .none
        }
    }

    private mutating func afterRun(now: Instant) -> Action {
        if pendingAfterRun {
            pendingAfterRun = false
            let trigger = pendingTrigger ?? .explicit
            pendingTrigger = nil
            phase = .idle
            return self.trigger(trigger, now: now)
        }
        phase = .idle
        return .none
    }

    private mutating func start(now: Instant) -> Action {
        lastStart = now
        rateClock = max(rateClock ?? now, now).advanced(by: minPushInterval)
        phase = .running
        pendingAfterRun = false
        pendingTrigger = nil
        return .startCycle
    }
}
