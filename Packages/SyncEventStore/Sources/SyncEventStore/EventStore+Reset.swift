import Foundation
import GRDB
import SyncModels

/// The domain's half of re-basing (docs/ARCHITECTURE.md, "Compaction and retention"): whether a pending event made
/// before a reset still applies to the state the store holds after the bootstrap, and what redoes it when it does not.
///
/// After 410 `reset.required` the store drops everything the server had sent and pulls the server's folded
/// history from the start. Pending events were made against the old state; an operation that refers to an
/// element the server has since purged (text typed after a character someone else deleted, then compacted
/// away) would be placed by nobody. Such an event is marked superseded and its intent is re-issued as new
/// events made against the new state.
public protocol EventRebaser: Sendable {
    /// Whether `event` (pending, made before the reset) can be pushed as it is: everything its operations
    /// refer to is in the state the store now holds (the bootstrapped history and the pending events before
    /// it, as the projections show it).
    func stillApplies(_ event: StoredEvent, in db: Database) throws -> Bool
    /// Drafts that redo `event`'s intent against the state the store holds now, which no longer includes
    /// `event` (the store rolled it back first). Empty when nothing is left to redo (it deleted what is gone).
    func reissue(_ event: StoredEvent, in db: Database) throws -> [EventDraft]
}

/// The re-base of a domain whose events never refer to elements that compaction can purge: every pending
/// event is pushed as it is.
public struct KeepPendingRebaser: EventRebaser {
    public init() {}
    public func stillApplies(_ event: StoredEvent, in db: Database) throws -> Bool { true }
    public func reissue(_ event: StoredEvent, in db: Database) throws -> [EventDraft] { [] }
}

/// What `EventStore.resetForBootstrap()` did.
public struct ResetReport: Sendable, Hashable, Codable {
    /// Confirmed events dropped (the server's history, to be pulled again in its folded form).
    public var confirmedDropped: Int
    /// Pending events kept, to be re-based once the bootstrap has pulled up to the head.
    public var pendingKept: Int
}

/// What `EventStore.rebase(with:)` did.
public struct RebaseReport: Sendable, Hashable, Codable {
    /// Pending events pushed as they are.
    public var kept: Int
    /// Pending events marked superseded (status rejected, code `rebase.superseded`), kept for the user.
    public var superseded: Int
    /// New events that redo them.
    public var reissued: Int
}

extension EventStore {
    /// `store_meta` key present from a reset until the re-base that follows the bootstrap.
    static let bootstrappingKey = "bootstrapping"

    /// The rejection code of a pending event re-issued after a reset.
    public static let supersededCode = "rebase.superseded"

    /// Whether the store was reset and its pending events wait for `rebase(with:)`: until then they must not
    /// be pushed. Survives restarts.
    public func isBootstrapping() async throws -> Bool {
        try await database.read { db in try Self.meta(Self.bootstrappingKey, db) != nil }
    }

    /// Makes the confirmed events of `scope` above `head` pending again, in one transaction: what a device
    /// does when the server's history of the scope ends below what the device has confirmed (it was restored
    /// from a backup, say), so that the device's copies of the events the server lost go back to it with the
    /// next push instead of being dropped by the reset that follows. They keep their places in the log, so
    /// they are pushed in the order this device learnt of them, before its own later edits; the server keeps
    /// one copy of each (it answers those it still holds, or was given again by another device, by id). The
    /// scope's sums count them again once they are confirmed. Events already pruned from the log cannot be
    /// sent again.
    /// - Returns: how many events became pending.
    @discardableResult
    public func repend(scope: String, above head: Int64) async throws -> Int {
        let count = try await database.writer.write { db -> Int in
            try db.execute(
                sql:
                    "UPDATE events SET status = 'pending', seq = NULL WHERE status = 'confirmed' AND scope = ? AND seq > ?",
                arguments: [scope, head])
            let count = db.changesCount
            if count > 0 { try Self.recountHeld(scope: scope, db) }
            return count
        }
        if count > 0 { publish(.rebuilt, []) }
        return count
    }

    /// Forgets what the server sent, after 410 `reset.required`, in one transaction: deletes every confirmed
    /// event, discards every projection's snapshot, forgets the cursor and the outbox marks, and rebuilds
    /// the projections from what is left (the user's pending events, and rejected ones kept for the user).
    /// The store is then bootstrapping (`isBootstrapping()`) until `rebase(with:)`.
    @discardableResult
    public func resetForBootstrap() async throws -> ResetReport {
        let report = try await database.writer.write { db -> ResetReport in
            try self.settleProjections(db)
            let confirmed = try Int.fetchOne(db, sql: "SELECT n FROM event_counts WHERE status = 'confirmed'") ?? 0
            let pending = try Int.fetchOne(db, sql: "SELECT n FROM event_counts WHERE status = 'pending'") ?? 0
            try db.execute(sql: "DELETE FROM events WHERE status = 'confirmed'")
            // Nothing the server sent is held any more: nothing of it was applied.
            try db.execute(sql: "DELETE FROM scope_checksums")
            try Self.removeMeta(Self.foldedChecksumsKey, db)
            try Self.removeMeta(Self.purgedChecksumsKey, db)
            try db.execute(sql: "DELETE FROM store_meta WHERE key = 'cursor'")
            // What was folded on arrival goes with the rest of what the server sent.
            try Self.removeMeta(Self.foldedCursorKey, db)
            try Self.removeMeta(Self.foldedScopesKey, db)
            try db.execute(sql: "DELETE FROM outbox_marks")
            try self.dropDeferredVersions(db)
            try db.execute(sql: "DELETE FROM streams")
            try db.execute(
                sql:
                    """
                    INSERT INTO streams (stream, version, scope)
                    SELECT stream, max(stream_version), CASE WHEN min(scope) = max(scope) THEN min(scope) ELSE '' END
                    FROM events GROUP BY stream
                    """
            )
            try Self.setMeta(Self.bootstrappingKey, "1", db)
            for projection in self.projections {
                try projection.discardSnapshot(in: db)
                try self.rebuild(projection, db)
            }
            return ResetReport(confirmedDropped: confirmed, pendingKept: pending)
        }
        publish(.rebuilt, [])
        return report
    }

    /// Re-bases the pending events made before a reset onto the state the bootstrap pulled, oldest first, in
    /// one transaction: each that `rebaser` says still applies is kept; each other is marked superseded
    /// (rejected with code `rebase.superseded`, rolled back, kept for the user) and its intent appended anew.
    /// Then every pending event counts as made against the current cursor, and the store stops
    /// bootstrapping.
    @discardableResult
    public func rebase(with rebaser: any EventRebaser) async throws -> RebaseReport {
        let (report, superseded, appended) = try await database.writer.write {
            db -> (RebaseReport, [StoredEvent], [StoredEvent]) in
            var report = RebaseReport(kept: 0, superseded: 0, reissued: 0)
            var superseded: [StoredEvent] = []
            var appended: [StoredEvent] = []
            try self.settleProjections(db)
            let pending = try Row.fetchAll(
                db,
                sql: "SELECT \(StoredEvent.columns) FROM events WHERE status = 'pending' ORDER BY position"
            ).map(StoredEvent.init(row:))
            for event in pending {
                if try rebaser.stillApplies(event, in: db) {
                    report.kept += 1
                    continue
                }
                let rejection = StoredEvent.Rejection(
                    code: Self.supersededCode,
                    message: "made before a reset against history the server no longer has; its change was made again")
                superseded += try self.markRejected([event.event.id: rejection], db)
                let drafts = try rebaser.reissue(event, in: db)
                appended += try self.append(drafts, in: db)
                report.superseded += 1
                report.reissued += drafts.count
            }
            try db.execute(sql: "DELETE FROM outbox_marks")
            if let oldest = try Self.oldestPending(db) { try Self.markOutbox(from: oldest, db) }
            try Self.removeMeta(Self.bootstrappingKey, db)
            return (report, superseded, appended)
        }
        if !superseded.isEmpty { publish(.rejected, superseded) }
        if !appended.isEmpty { publish(.appended, appended) }
        return report
    }
}
