import Foundation
import GRDB
import SyncModels

/// What `EventStore.purgeFolded()` did.
public struct FoldedPurgeReport: Sendable, Hashable {
    /// Streams whose state was purged as a stable fold purges it (tombstones dropped, deleted records gone).
    public var streams: Int
    /// Of those, streams a stable fold ends (deleted records), whose versions the store forgot.
    public var retired: Int
    /// Pages the incremental vacuum gave back to the file system.
    public var pagesFreed: Int
}

/// Folding on arrival (docs/ARCHITECTURE.md, "Compaction and retention"): a pulled event that every other replica has
/// acknowledged (at or below the answer's `othersStable`), of a stream this replica has nothing of its own pending in,
/// goes into the projections' state and snapshot alike (`ArrivalFoldingProjection`) instead of the log. A stable prune
/// right after the pull would leave the same; a new device pulling a long history that the server has not
/// folded then writes its state, not a log it would delete at once.
///
/// **Crash safety.** Folded events held in memory (write-behind, as buffered ones are) cannot be read back
/// from the log. While some are, `folded_cursor` holds the cursor stored before the first of them: opening
/// the store after a crash, or finding them lost (`ArrivalFoldingProjection.foldedLoss`, or the deferred
/// versions lost), moves the cursor back there, so the next pull brings them again (applying one twice
/// changes nothing). The key goes once the projections and the streams' versions hold everything. The
/// acknowledged position the replica reports goes no further than that cursor meanwhile.
///
/// **Purge.** Folding applies no purge: an event still to come may have been made before its maker saw one
/// folded now. `folded_scopes` lists the scopes with folded streams; once the pull has reached the head
/// (every event at or below the stable points it folded at has arrived), `purgeFolded()` purges their
/// streams as a stable prune does.
extension EventStore {
    static let foldedCursorKey = "folded_cursor"
    static let foldedScopesKey = "folded_scopes"

    /// The projections as folding ones, when every projection folds on arrival (and there is one); nil
    /// otherwise, and then nothing is folded on arrival.
    var foldingProjections: [any ArrivalFoldingProjection]? {
        let folding = projections.compactMap { $0 as? any ArrivalFoldingProjection }
        return !folding.isEmpty && folding.count == projections.count ? folding : nil
    }

    /// The indices of `page`'s events to fold on arrival: those made by another replica, at or below their
    /// scope's `foldThrough`, of streams every projection finds foldable.
    func foldableIndices(of page: [Event], through foldThrough: [Scope: Int64], _ db: Database) throws -> Set<Int> {
        guard !foldThrough.isEmpty, let folding = foldingProjections else { return [] }
        var candidates: [Int] = []
        for (index, event) in page.enumerated() where event.dot.replica != replica {
            // This replica's own events (pending here, or confirmed by a push) go the usual way.
            if let seq = event.seq, let through = foldThrough[event.scope], seq <= through { candidates.append(index) }
        }
        guard !candidates.isEmpty else { return [] }
        var streams = Set(candidates.map { page[$0].stream })
        for projection in folding where !streams.isEmpty { streams = try projection.foldable(streams, in: db) }
        return Set(candidates.filter { streams.contains(page[$0].stream) })
    }

    /// Applies folded events to every projection, inside the caller's transaction, before the page's logged
    /// events; records the cursor to go back to when some are held in memory, and their scopes for the purge.
    func applyFolded(_ events: [StoredEvent], deferSaves: Bool, cursorBefore: String?, _ db: Database) throws {
        guard !events.isEmpty, let folding = foldingProjections else { return }
        var held = false
        for projection in folding where try projection.applyFolded(events, deferSaves: deferSaves, in: db) {
            held = true
        }
        if held || deferSaves, try Self.meta(Self.foldedCursorKey, db) == nil {
            try Self.setMeta(Self.foldedCursorKey, "\(try Self.lastPosition(db)) \(cursorBefore ?? "")", db)
        }
        var scopes = try Self.foldedScopes(db)
        let before = scopes.count
        for event in events { scopes.insert(event.event.scope.name) }
        if scopes.count != before { try Self.setMeta(Self.foldedScopesKey, scopes.sorted().joined(separator: " "), db) }
    }

    /// The cursor stored before the first folded event held in memory, and the log position then.
    static func foldedCursor(_ db: Database) throws -> (position: Int64, cursor: String)? {
        guard let value = try meta(foldedCursorKey, db) else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
        return (Int64(parts[0]) ?? 0, parts.count > 1 ? String(parts[1]) : "")
    }

    static func foldedScopes(_ db: Database) throws -> Set<String> {
        Set((try meta(foldedScopesKey, db) ?? "").split(separator: " ").map(String.init))
    }

    /// Whether some projection holds folded events in memory.
    var holdsFolded: Bool { foldingProjections?.contains { $0.holdsFolded } ?? false }

    /// Removes `folded_cursor` once nothing folded is held in memory any more: the projections wrote their
    /// folded events and `streams` has every version (inside the caller's transaction).
    func settleFoldedCursor(_ db: Database) throws {
        guard try Self.meta(Self.foldedCursorKey, db) != nil, !holdsFolded,
            try Self.meta(Self.deferredVersionsKey, db) == nil
        else { return }
        try Self.removeMeta(Self.foldedCursorKey, db)
        try Self.removeMeta(Self.foldedChecksumsKey, db)
    }

    /// When folded events held in memory were lost, moves the cursor back to before them and returns true
    /// (inside the caller's transaction): the next pull brings them again.
    @discardableResult
    func rewindIfFoldedLost(_ db: Database) throws -> Bool {
        guard let folding = foldingProjections else { return false }
        guard let marker = try Self.foldedCursor(db) else {
            // A loss with nothing to go back for (the transaction that folded them rolled back).
            for projection in folding where projection.foldedLoss { projection.clearFoldedLoss() }
            return false
        }
        let versionsLost = deferredVersions.withLock { $0.marked && !$0.complete }
        guard versionsLost || folding.contains(where: \.foldedLoss) else { return false }
        try rewindFolded(to: marker.cursor, db)
        return true
    }

    /// Moves the cursor back to `cursor` (none when empty) and forgets the folded cursor. The streams' versions
    /// waiting in memory are written from the log (those of the folded events come again with them).
    func rewindFolded(to cursor: String, _ db: Database) throws {
        // The folded events come again: what they added to the sums goes with them.
        try Self.unapplySums(of: Self.foldedChecksumsKey, db)
        if cursor.isEmpty {
            // From the start again: the first answer says what was purged again.
            try Self.unapplySums(of: Self.purgedChecksumsKey, db)
            try Self.removeMeta("cursor", db)
        } else {
            try Self.setMeta("cursor", cursor, db)
        }
        try Self.removeMeta(Self.foldedCursorKey, db)
        if let marker = try Self.meta(Self.deferredVersionsKey, db).flatMap(Int64.init) {
            try Self.raiseVersions(fromLogAfter: marker, db)
            try Self.removeMeta(Self.deferredVersionsKey, db)
            db.afterNextTransaction(
                onCommit: { [self] _ in deferredVersions.withLock { $0.clear() } }, onRollback: { _ in })
        }
        let folding = foldingProjections ?? []
        db.afterNextTransaction(
            onCommit: { _ in for projection in folding { projection.clearFoldedLoss() } }, onRollback: { _ in })
    }

    /// On open: a process that ended with folded events in memory lost them; the cursor goes back to before
    /// them. By the first opener only (`EventStore.openedFirst`): a store still open elsewhere may hold them.
    func rewindFoldedAtOpen(_ db: Database) throws {
        guard let marker = try Self.foldedCursor(db) else { return }
        try rewindFolded(to: marker.cursor, db)
    }

    /// Whether streams folded on arrival wait for `purgeFolded()`.
    public func hasFoldedToPurge() async throws -> Bool {
        try await database.read { db in try !Self.foldedScopes(db).isEmpty }
    }

    /// Purges the streams folded on arrival as a stable prune purges (`saveSnapshot(streams:stable: true)`:
    /// tombstones dropped, deleted records gone, their streams' versions forgotten), scope by scope, `step`
    /// streams per transaction, then runs `incremental_vacuum`. Call it once the pull has reached the head:
    /// every event at or below the stable points the streams were folded at has arrived then. A stream that
    /// took an event the log holds meanwhile (a local edit) is left to the next stable prune.
    @discardableResult
    public func purgeFolded(step: Int = stablePruneStep) async throws -> FoldedPurgeReport {
        var report = FoldedPurgeReport(streams: 0, retired: 0, pagesFreed: 0)
        guard let folding = foldingProjections else { return report }
        let scopes = try await database.writer.write { db -> [String] in
            // Everything in memory written first: the purge reads the tables.
            try self.settleProjections(db)
            _ = try self.flushDeferredVersions(limit: .max, db)
            try self.settleFoldedCursor(db)
            return try Self.foldedScopes(db).sorted()
        }
        for scope in scopes {
            let streams = try await database.read { db in
                var streams: Set<String> = []
                for projection in folding { streams.formUnion(try projection.snapshotStreams(scope: scope, in: db)) }
                return streams.sorted()
            }
            for start in stride(from: 0, to: streams.count, by: max(1, step)) {
                let chunk = Set(streams[start..<min(start + max(1, step), streams.count)])
                let (purged, retired) = try await database.writer.write { db -> (Int, Int) in
                    try self.writeBufferedProjections(streams: chunk, in: db)
                    _ = try self.flushDeferredVersions(limit: .max, db)
                    var clean = chunk
                    for projection in folding where !clean.isEmpty { clean = try projection.foldable(clean, in: db) }
                    var retired: Set<String> = []
                    for projection in folding {
                        retired.formUnion(try projection.retiredStreams(among: clean, in: db))
                        try projection.saveSnapshot(streams: clean, stable: true, in: db)
                    }
                    try Self.forget(retired, db)
                    return (clean.count, retired.count)
                }
                report.streams += purged
                report.retired += retired
            }
            try await database.writer.write { db in
                var left = try Self.foldedScopes(db)
                left.remove(scope)
                if left.isEmpty {
                    try Self.removeMeta(Self.foldedScopesKey, db)
                } else {
                    try Self.setMeta(Self.foldedScopesKey, left.sorted().joined(separator: " "), db)
                }
            }
        }
        while true {
            let freed = try database.maintenance.incrementalVacuum(pages: Self.vacuumStep)
            report.pagesFreed += freed
            if freed < Self.vacuumStep { break }
        }
        if report.streams > 0 { publish(.pruned, []) }
        return report
    }
}
