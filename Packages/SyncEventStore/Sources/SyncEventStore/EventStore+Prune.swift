import Foundation
import GRDB
import SyncModels

/// What `EventStore.prune` did.
public struct EventPruneReport: Sendable, Hashable {
    /// Confirmed events folded into the projections' snapshots and deleted from the log.
    public var foldedEvents: Int
    /// Pages the incremental vacuum gave back to the file system.
    public var pagesFreed: Int
}

extension EventStore {
    /// Bounds the log: folds old confirmed events into every projection's snapshot, deletes them, then runs
    /// `incremental_vacuum`.
    ///
    /// **The rule.** A confirmed event is pruned when its `seq` is at or below its scope's stable point
    /// (every replica has seen it, DESIGN §8) or the server received it before `olderThan`. Pending events
    /// (the outbox) and rejected events (kept for the user) are never pruned. Before deleting, the store
    /// folds exactly those events into each projection's snapshot — restore the previous snapshot, apply the
    /// folded events in canonical order, save — so that from then on "restore the snapshot, replay the
    /// remaining log" (what `rebuild`, rejection rollback and time travel do) gives the state it gave before.
    /// A stable prune (no `olderThan`) also forgets the versions of the streams the projections retire
    /// (`Projection.retiredStreams`) and the log no longer holds events of.
    /// All of it is one transaction: a crash leaves the log and the snapshots as they were.
    public func prune(stablePoints: [Scope: Int64] = [:], olderThan cutoff: Date? = nil) async throws
        -> EventPruneReport
    {
        var conditions: [String] = []
        var arguments: StatementArguments = []
        for (scope, seq) in stablePoints.sorted(by: { $0.key < $1.key }) {
            conditions.append("(scope = ? AND seq <= ?)")
            arguments += [scope.name, seq]
        }
        if let cutoff {
            conditions.append("received_at < ?")
            arguments += [RFC3339.string(from: cutoff)]
        }
        guard !conditions.isEmpty else { return EventPruneReport(foldedEvents: 0, pagesFreed: 0) }
        let filterArguments = arguments
        let foldable = "status = 'confirmed' AND (\(conditions.joined(separator: " OR ")))"

        let folded = try await database.writer.write { db -> Int in
            let count =
                try Int.fetchOne(db, sql: "SELECT count(*) FROM events WHERE \(foldable)", arguments: filterArguments)
                ?? 0
            guard count > 0 else { return 0 }
            let stable = cutoff == nil
            var retired: Set<String> = []
            for projection in self.projections {
                try projection.restoreSnapshot(streams: nil, in: db)
                try self.stream(
                    projection, db,
                    sql: "SELECT \(StoredEvent.columns) FROM events WHERE \(foldable) ORDER BY \(Self.canonicalOrder)",
                    arguments: filterArguments)
                if stable { retired.formUnion(try projection.retiredStreams(in: db)) }
                try projection.saveSnapshot(in: db, stable: stable)
            }
            try db.execute(sql: "DELETE FROM events WHERE \(foldable)", arguments: filterArguments)
            try Self.forgetVersions(of: retired, db)
            for projection in self.projections { try self.rebuild(projection, db) }
            return count
        }
        let pages = try database.maintenance.incrementalVacuum()
        if folded > 0 { publish(.pruned, []) }
        return EventPruneReport(foldedEvents: folded, pagesFreed: pages)
    }

    /// Deletes the `streams` rows of `retired` streams the log holds no event of (one scan of what is left
    /// of the log, after the prune deleted the folded events).
    static func forgetVersions(of retired: Set<String>, _ db: Database) throws {
        guard !retired.isEmpty else { return }
        var forget = retired
        let remaining = try String.fetchCursor(db, sql: "SELECT DISTINCT stream FROM events")
        while let stream = try remaining.next() { forget.remove(stream) }
        let delete = try db.makeStatement(sql: "DELETE FROM streams WHERE stream = ?")
        for stream in forget { try delete.execute(arguments: [stream]) }
    }
}
