import Foundation
import Histogram
import SyncEngine
import SyncEventStore
import SyncModels
import Synchronization

/// Everything a load run measures, shared by all devices: HdrHistograms of push latency and of
/// write-to-visible latency, counters of events, bytes, errors and faults, and a one-second window for the
/// live progress line.
final class LoadMetrics: Sendable {
    /// Latency distributions in milliseconds (1 ms to 1 hour, 3 significant digits).
    typealias Latencies = Histogram<UInt64>

    struct Totals: Sendable {
        var edits = 0
        var localErrors: [String: Int] = [:]
        var pushed = 0
        var accepted = 0
        var rejected = 0
        var pulled = 0
        /// Round trips of sync cycles (`POST /v1/sync`), and long-poll pages or batches of live frames applied
        /// without one.
        var rounds = 0
        var polledPages = 0
        var traffic = Traffic()
        var errors: [String: Int] = [:]
        var faults: [String: Int] = [:]
        var offlineSpells = 0
        var crashes = 0
        var corruptions = 0
        /// New tokens devices asked for after the server refused theirs (`--token-lifetime`).
        var tokensRenewed = 0
        var push = LoadMetrics.histogram()
        var writeToVisible = LoadMetrics.histogram()
        var catchUp = LoadMetrics.histogram()
    }

    private struct State {
        var totals = Totals()
        /// Since the last progress line.
        var window = Totals()
        /// Offline spells by replica: (start, end) in milliseconds since 1970; end nil while offline.
        var offline: [ReplicaID: [(start: UInt64, end: UInt64?)]] = [:]
        /// Grows with every answered request, accepted event, applied round, received event and edit: the
        /// watchdog's sign that the run moves.
        var progress = 0
    }
    private let state = Mutex(State())

    static func histogram() -> Latencies {
        Latencies(lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: .three)
    }

    static func nowMilliseconds() -> UInt64 { UInt64(Date().timeIntervalSince1970 * 1000) }

    func edited() {
        state.withLock {
            $0.totals.edits += 1; $0.window.edits += 1; $0.progress += 1
        }
    }

    /// How much the run has moved (see `State.progress`).
    var progress: Int { state.withLock { $0.progress } }

    func localError(_ error: any Error) {
        let code = (error as? EventStoreError)?.code ?? "\(type(of: error))"
        state.withLock { $0.totals.localErrors[code, default: 0] += 1 }
    }

    func injected(_ fault: Fault) {
        state.withLock { $0.totals.faults[fault.rawValue, default: 0] += 1 }
    }

    /// A failure the server or the network gave (not an injected one), by its code.
    func failed(_ failure: SyncFailure) {
        let code: String
        switch failure {
        case .retryable(let reason, _):
            code = reason.hasPrefix("network") ? "network" : String(reason.prefix(40))
        case .authentication(let c, _), .permanent(let c, _): code = c
        case .resetRequired: code = "reset.required"
        }
        state.withLock {
            $0.totals.errors[code, default: 0] += 1
            $0.window.errors[code, default: 0] += 1
        }
    }

    /// The bytes of one answered request, sync or long-poll (`HTTPClientTransport`'s `onTraffic`).
    func moved(_ traffic: Traffic) {
        state.withLock {
            $0.totals.traffic += traffic
            $0.progress += 1
        }
    }

    func crashed() { state.withLock { $0.totals.crashes += 1 } }

    func renewedToken() { state.withLock { $0.totals.tokensRenewed += 1 } }

    func corrupted() { state.withLock { $0.totals.corruptions += 1 } }

    func wentOffline(_ replica: ReplicaID) {
        let now = Self.nowMilliseconds()
        state.withLock {
            $0.totals.offlineSpells += 1
            $0.offline[replica, default: []].append((now, nil))
        }
    }

    /// A device opened for the first time: what was written before it existed reaches it as catch-up, not
    /// as write-to-visible.
    func joined(_ replica: ReplicaID) {
        let now = Self.nowMilliseconds()
        state.withLock { $0.offline[replica, default: []].insert((0, now), at: 0) }
    }

    func cameOnline(_ replica: ReplicaID) {
        let now = Self.nowMilliseconds()
        state.withLock { state in
            guard let last = state.offline[replica]?.indices.last else { return }
            state.offline[replica]![last].end = now
        }
    }

    /// One applied round of device `replica`: pushes and their latency, and for each event another
    /// replica wrote, the time from its write (its HLC's physical time: every device of the run shares this
    /// process's clock) to now. Write-to-visible counts only events whose writer and reader stayed online
    /// from the write to now; the others (an edit made offline, or seen after an offline spell) go to
    /// catch-up latency.
    func applied(_ round: SyncRound, by replica: ReplicaID) {
        if round.pushed > 0 {
            pushed(round.pushed, acknowledged: round.acknowledged, rejected: round.rejected, roundTrip: round.roundTrip)
        }
        received(round.events, new: round.inserted, by: replica, page: round.traffic.sentWire == 0)
    }

    /// One answered push of `count` events (a replica's round, or a thin device's `POST /v1/push`).
    func pushed(_ count: Int, acknowledged: Int, rejected: Int, roundTrip: Duration) {
        let milliseconds = UInt64(max(1, roundTrip.milliseconds))
        state.withLock { state in
            _ = state.totals.push.record(milliseconds)
            _ = state.window.push.record(milliseconds)
            for totals in [\State.totals, \State.window] {
                state[keyPath: totals].pushed += count
                state[keyPath: totals].accepted += acknowledged
                state[keyPath: totals].rejected += rejected
            }
            state.progress += 1
        }
    }

    /// Events that reached device `replica` (`new` of them new to it), by a round trip or, with `page`, a
    /// long-poll page or a batch of live frames: for each event another replica wrote, the time from its
    /// write (its HLC's physical time: every device of the run shares this process's clock) to now.
    /// Write-to-visible counts only events whose writer and reader stayed online from the write to now; the
    /// others (an edit made offline, or seen after an offline spell) go to catch-up latency.
    func received(_ events: [Event], new: Int, by replica: ReplicaID, page: Bool) {
        let now = Self.nowMilliseconds()
        state.withLock { state in
            state.totals.pulled += new
            state.window.pulled += new
            state.progress += 1
            if page { state.totals.polledPages += 1 } else { state.totals.rounds += 1 }
            for event in events where event.dot.replica != replica {
                let written = event.hlc.physical
                let latency = now > written ? now - written : 1
                let online =
                    Self.online(state.offline[event.dot.replica], from: written)
                    && Self.online(state.offline[replica], from: written)
                if online {
                    _ = state.totals.writeToVisible.record(max(1, latency))
                    _ = state.window.writeToVisible.record(max(1, latency))
                } else {
                    _ = state.totals.catchUp.record(max(1, latency))
                }
            }
        }
    }

    private static func online(_ spells: [(start: UInt64, end: UInt64?)]?, from time: UInt64) -> Bool {
        guard let spells else { return true }
        return !spells.contains { ($0.end ?? .max) >= time }
    }

    var totals: Totals { state.withLock { $0.totals } }

    /// The totals since the last call, and starts a new window.
    func takeWindow() -> Totals {
        state.withLock { state in
            defer { state.window = Totals() }
            return state.window
        }
    }
}

extension Duration {
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    var secondsValue: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// Percentiles of a latency histogram, for reports.
struct LatencySummary: Codable, Sendable {
    var count: UInt64
    var p50: UInt64
    var p90: UInt64
    var p99: UInt64
    var p999: UInt64
    var max: UInt64

    init(_ histogram: LoadMetrics.Latencies) {
        count = histogram.totalCount
        p50 = count == 0 ? 0 : histogram.valueAtPercentile(50)
        p90 = count == 0 ? 0 : histogram.valueAtPercentile(90)
        p99 = count == 0 ? 0 : histogram.valueAtPercentile(99)
        p999 = count == 0 ? 0 : histogram.valueAtPercentile(99.9)
        max = count == 0 ? 0 : histogram.max
    }
}
