import Logging
import PostgresNIO
import ServiceLifecycle

/// When compaction runs by itself (`SYNC_COMPACTION_*`).
public struct CompactionPolicy: Sendable, Hashable {
    /// Seconds between checks; 0 turns the service off (`sync-server compact` still works).
    public var intervalSeconds: Int = 60
    /// A scope is folded only when at least this many events lie between its last fold and its stable point.
    public var minEvents: Int64 = 1000
    /// …and at least `ratio` foldable events per stream already folded: with 10,000 notes and ratio 1, a
    /// scope is folded about every 10,000 events, so its log stays within about twice its live streams
    /// plus what replicas have not acknowledged yet.
    public var ratio: Double = 1.0
    /// Events per transaction (`Compactor.batchEvents`).
    public var batchEvents: Int = 2000
    /// Milliseconds between two windows (`Compactor.pauseMilliseconds`).
    public var pauseMilliseconds: Int = 0

    public init() {}

    /// Whether folding `candidate` up to `stable` pays under this policy.
    public func pays(_ candidate: Compactor.Candidate, stable: Int64) -> Bool {
        let foldable = stable - candidate.compactedThrough
        return foldable >= minEvents && Double(foldable) >= ratio * Double(max(candidate.foldedStreams, 1))
    }
}

/// Compaction as a service of the server's `ServiceGroup`: every `intervalSeconds`, each scope where
/// folding pays (`CompactionPolicy.pays`) is compacted up to its stable point. Errors are logged and the
/// next round tries again; a graceful shutdown stops it between windows. After a round that folded
/// something, bloated indexes are rebuilt (`IndexReclaimer`).
struct CompactionService: Service {
    let compactor: Compactor
    let reclaimer: IndexReclaimer
    let policy: CompactionPolicy
    let metrics: ServerMetrics
    let logger: Logger

    func run() async throws {
        // A graceful shutdown cancels the sleep or the round in flight (between two windows' transactions).
        try? await cancelWhenGracefulShutdown { [self] in
            while true {
                try await Task.sleep(for: .seconds(policy.intervalSeconds))
                do {
                    _ = try await runOnce()
                } catch let error where !(error is CancellationError) && !Task.isCancelled {
                    logger.warning("compaction round failed; retrying next round", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// One round over every scope where folding pays.
    func runOnce() async throws -> [Compactor.ScopeReport] {
        var reports: [Compactor.ScopeReport] = []
        for candidate in try await compactor.candidates()
        where candidate.head - candidate.compactedThrough >= policy.minEvents {
            try Task.checkCancellation()
            let stable = try await compactor.stablePoint(of: candidate.scope)
            guard policy.pays(candidate, stable: stable) else { continue }
            let report = try await compactor.compact(scope: candidate.scope, upTo: stable)
            metrics.compactedEvents.increment(by: Int64(report.foldedEvents))
            metrics.compactionSnapshots.increment(by: Int64(report.snapshots))
            reports.append(report)
        }
        if reports.contains(where: { $0.foldedEvents > 0 }) {
            try Task.checkCancellation()
            try await reclaimer.reclaim()
        }
        return reports
    }
}
