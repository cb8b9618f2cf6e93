import Foundation
import Synchronization

/// What the admin API says about the requests a server answered (`GET /v1/admin/status`): counts and latency
/// by route, errors by code, and a series of one entry per second over the last five minutes. Kept in memory
/// and fed by `ServerMetrics` on every request, push and pull: a lock and a few additions each.
final class AdminStats: Sendable {
    /// How many seconds the series keeps.
    static let seriesSeconds = 300
    /// The window of the status's push and pull latency.
    static let latencyWindowSeconds = 60

    let startedAt: Date
    private let state = Mutex(State())

    init(startedAt: Date = Date()) {
        self.startedAt = startedAt
    }

    struct RouteKey: Hashable, Sendable {
        var method: String
        var route: String
    }

    struct RouteTotals: Sendable {
        var count = 0
        var errors = 0
        var latency = LatencyHistogram()

        mutating func record(status: Int, nanoseconds: Int64) {
            count += 1
            if status >= 400 { errors += 1 }
            latency.record(nanoseconds: nanoseconds)
        }
    }

    struct ErrorKey: Hashable, Sendable {
        var code: String
        var status: Int
    }

    /// One second of the series.
    struct Second: Sendable {
        var time: Int64
        var requests = 0
        var errors = 0
        var accepted = 0
        var pulled = 0
        var push = LatencyHistogram()
        var pull = LatencyHistogram()
    }

    /// What a request's latency counts as in the status: a push, a pull that did not ask to wait (a long-poll's
    /// time is mostly its wait), or neither.
    enum LatencyKind: Sendable {
        case push, pull, other
    }

    struct State: Sendable {
        var routes: [RouteKey: RouteTotals] = [:]
        var errors: [ErrorKey: Int] = [:]
        var total = 0
        var accepted = 0
        var duplicate = 0
        var rejected = 0
        var pulled = 0
        /// Oldest first; seconds without a request are absent.
        var seconds: [Second] = []

        mutating func current(_ now: Int64) -> Int {
            if let last = seconds.indices.last, seconds[last].time == now { return last }
            seconds.append(Second(time: now))
            let excess = seconds.count - AdminStats.seriesSeconds
            if excess > 0 { seconds.removeFirst(excess) }
            return seconds.count - 1
        }
    }

    func recordRequest(
        method: String, route: String, status: Int, nanoseconds: Int64, kind: LatencyKind, now: Date = Date()
    ) {
        let second = Int64(now.timeIntervalSince1970)
        state.withLock { state in
            state.total += 1
            // Modified in place: the key is hashed once per request.
            state.routes[RouteKey(method: method, route: route), default: RouteTotals()]
                .record(status: status, nanoseconds: nanoseconds)
            let index = state.current(second)
            state.seconds[index].requests += 1
            if status >= 400 { state.seconds[index].errors += 1 }
            guard status < 400 else { return }
            switch kind {
            case .push: state.seconds[index].push.record(nanoseconds: nanoseconds)
            case .pull: state.seconds[index].pull.record(nanoseconds: nanoseconds)
            case .other: break
            }
        }
    }

    func recordError(code: String, status: Int) {
        state.withLock { $0.errors[ErrorKey(code: code, status: status), default: 0] += 1 }
    }

    func recordEvents(accepted: Int, duplicate: Int, rejected: Int, now: Date = Date()) {
        let second = Int64(now.timeIntervalSince1970)
        state.withLock { state in
            state.accepted += accepted
            state.duplicate += duplicate
            state.rejected += rejected
            state.seconds[state.current(second)].accepted += accepted
        }
    }

    func recordPulled(_ count: Int, now: Date = Date()) {
        let second = Int64(now.timeIntervalSince1970)
        state.withLock { state in
            state.pulled += count
            state.seconds[state.current(second)].pulled += count
        }
    }

    /// A copy of everything, to build an answer from outside the lock.
    var snapshot: State { state.withLock { $0 } }
}
