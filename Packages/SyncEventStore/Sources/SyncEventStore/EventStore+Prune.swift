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
    /// Confirmed events a stable prune folds per transaction (`prune(stablePoints:)`): local writes wait for
    /// one step at most, not for the whole prune.
    public static let stablePruneStep = 2_000

    /// Pages one step of a prune's `incremental_vacuum` gives back; each step is its own transaction.
    static let vacuumStep = 2_000

    /// Bounds the log: folds old confirmed events into every projection's snapshot, deletes them, then runs
    /// `incremental_vacuum`.
    ///
    /// **The rule.** A confirmed event is pruned when its `seq` is at or below its scope's stable point
    /// (every replica has seen it, docs/ARCHITECTURE.md, "Compaction and retention") or the server received it before
    /// `olderThan`. Pending events (the outbox) and rejected events (kept for the user) are never pruned. Before
    /// deleting, the store folds exactly those events into each projection's snapshot — restore the previous snapshot,
    /// apply the folded events in canonical order, save — so that from then on "restore the snapshot, replay the
    /// remaining log" (what `rebuild`, rejection rollback and time travel do) gives the state it gave before.
    /// A stable prune (no `olderThan`) also forgets the versions of the streams the projections retire
    /// (`Projection.retiredStreams`) and the log no longer holds events of.
    ///
    /// **Steps.** When every projection is a `StreamSnapshotProjection`, a stable prune goes scope by scope,
    /// about `eventsPerStep` events per transaction (whole streams per step), and touches only the streams a
    /// step folds: a stream none of whose other live events remain takes its current state as its snapshot;
    /// one that still has some (pending, later in the scope, or in another scope) gets the step's events
    /// folded into its snapshot, and its current state stays as it is. A crash between steps leaves the log
    /// and the snapshots consistent, with the later steps not done. Otherwise (a projection without
    /// per-stream snapshots, or `olderThan`) the prune is one transaction that restores, folds, saves and
    /// rebuilds whole projections. The vacuum then runs in steps of `vacuumStep` pages.
    /// - Parameters:
    ///   - stablePoints: each scope's stable point (`seq`): confirmed events at or below it are pruned.
    ///   - cutoff: with `olderThan:`, confirmed events the server received before it are pruned too.
    ///   - eventsPerStep: the events a stable prune folds per transaction.
    public func prune(
        stablePoints: [Scope: Int64] = [:], olderThan cutoff: Date? = nil, eventsPerStep: Int = stablePruneStep
    ) async throws -> EventPruneReport {
        let folded: Int
        if cutoff == nil, !stablePoints.isEmpty, projections.allSatisfy({ $0 is any StreamSnapshotProjection }) {
            folded = try await pruneStable(stablePoints, step: eventsPerStep)
        } else {
            folded = try await pruneWhole(stablePoints: stablePoints, olderThan: cutoff)
        }
        var pages = 0
        while true {
            let freed = try database.maintenance.incrementalVacuum(pages: Self.vacuumStep)
            pages += freed
            if freed < Self.vacuumStep { break }
        }
        if folded > 0 { publish(.pruned, []) }
        return EventPruneReport(foldedEvents: folded, pagesFreed: pages)
    }

    /// Test hook for crash tests: when set, a stepped stable prune calls it with the number of steps
    /// committed so far, after each one; an error it throws stops the prune there, as a crash between two
    /// steps would. Never set it in an app.
    @TaskLocal public static var pruneStepFault: (@Sendable (Int) throws -> Void)?

    /// A stable prune in steps (see `prune`); returns the events folded.
    func pruneStable(_ points: [Scope: Int64], step: Int) async throws -> Int {
        let fault = Self.pruneStepFault
        var committed = 0
        var folded = 0
        for (scope, stable) in points.sorted(by: { $0.key < $1.key }) {
            var (steps, live) = try await database.read { db in
                try Self.foldSteps(scope: scope.name, through: stable, step: max(1, step), db)
            }
            for positions in steps {
                let held = live
                let (count, seen) = try await database.writer.write { db in
                    try self.fold(positions, scope: scope.name, through: stable, live: held, db)
                }
                folded += count
                live = seen
                committed += 1
                try fault?(committed)
            }
        }
        return folded
    }

    /// The streams whose events the log keeps after a stable prune of one scope (pending ones, the scope's
    /// events above its stable point, and every event written since `through`), as seen so far.
    struct LiveStreams: Sendable {
        var streams: Set<String>
        /// The log position through which `streams` has seen every event.
        var through: Int64
    }

    /// The positions of `scope`'s confirmed events at or below `stable`, in steps of about `step` events that
    /// each hold whole streams (a stream with more events than `step` is a step of its own), so that a step
    /// leaves none of its streams' foldable events for a later one; and the streams that have live events
    /// besides (pending, or above the stable point), found through the indexes.
    static func foldSteps(scope: String, through stable: Int64, step: Int, _ db: Database) throws -> (
        [[Int64]], LiveStreams
    ) {
        var byStream: [String: [Int64]] = [:]
        let rows = try Row.fetchCursor(
            db.cachedStatement(sql: "SELECT position, stream FROM events WHERE scope = ? AND seq <= ?"),
            arguments: [scope, stable])
        while let row = try rows.next() { byStream[row[1], default: []].append(row[0]) }
        var steps: [[Int64]] = []
        var current: [Int64] = []
        for positions in byStream.values.sorted(by: { $0[0] < $1[0] }) {
            if !current.isEmpty, current.count + positions.count > step {
                steps.append(current)
                current = []
            }
            current += positions
        }
        if !current.isEmpty { steps.append(current) }
        var live = LiveStreams(streams: [], through: try lastPosition(db))
        let queries: [(String, StatementArguments)] = [
            ("SELECT stream FROM events WHERE scope = ? AND seq > ?", [scope, stable]),
            ("SELECT stream FROM events WHERE status = 'pending'", []),
        ]
        for (sql, arguments) in queries {
            let rows = try String.fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
            while let stream = try rows.next() {
                if byStream[stream] != nil { live.streams.insert(stream) }
            }
        }
        return (steps, live)
    }

    /// Folds and deletes the events at `positions` that are still `scope`'s confirmed events at or below
    /// `stable`, inside the caller's transaction; returns how many it folded, and `live` updated with the
    /// events written since it was seen.
    func fold(_ positions: [Int64], scope: String, through stable: Int64, live: LiveStreams, _ db: Database) throws
        -> (Int, LiveStreams)
    {
        var live = live
        let written = try String.fetchCursor(
            db.cachedStatement(sql: "SELECT stream FROM events WHERE position > ?"), arguments: [live.through])
        while let stream = try written.next() { live.streams.insert(stream) }
        live.through = try Self.lastPosition(db)

        // By rowid: the `+` keeps SQLite from walking the scope's whole `(scope, seq)` range for each chunk
        // instead (which it chose, and which made a step cost what is left of the scope's log).
        let filter = "AND +scope = ? AND +seq <= ?"
        var folded: Set<String> = []
        var count = 0
        try Self.forEachChunk(of: positions) { marks, arguments in
            let streams = try String.fetchCursor(
                db, sql: "SELECT stream FROM events WHERE position IN (\(marks)) \(filter)",
                arguments: arguments + [scope, stable])
            while let stream = try streams.next() {
                folded.insert(stream)
                count += 1
            }
        }
        guard count > 0 else { return (0, live) }
        // The projections' tables hold the whole log before any is touched (buffered state written), and
        // `streams` every version before any is forgotten.
        _ = try flushProjections(limit: .max, db)
        _ = try flushDeferredVersions(limit: .max, db)

        // Folded streams the log keeps live events of, and those not known to be of this scope alone (which
        // may have events anywhere): their tables hold more than the fold.
        var mixed = folded.intersection(live.streams)
        let scopeOf = try db.cachedStatement(sql: "SELECT scope FROM streams WHERE stream = ?")
        for stream in folded where try String.fetchOne(scopeOf, arguments: [stream]) != scope {
            mixed.insert(stream)
        }
        let clean = folded.subtracting(mixed)

        // This step's events of the mixed streams, in canonical order (by seq: one scope).
        var foldedOfMixed: [StoredEvent] = []
        if !mixed.isEmpty {
            try Self.forEachChunk(of: positions) { marks, arguments in
                let rows = try Row.fetchCursor(
                    db, sql: "SELECT \(StoredEvent.columns) FROM events WHERE position IN (\(marks)) \(filter)",
                    arguments: arguments + [scope, stable])
                while let row = try rows.next() {
                    let event = try StoredEvent(row: row)
                    if mixed.contains(event.event.stream) { foldedOfMixed.append(event) }
                }
            }
            foldedOfMixed.sort { ($0.event.seq ?? 0) < ($1.event.seq ?? 0) }
        }
        var retired: Set<String> = []
        for projection in projections {
            guard let projection = projection as? any StreamSnapshotProjection else {
                preconditionFailure("a stepped prune needs every projection to snapshot by stream")
            }
            // The clean streams' tables hold exactly their fold: it becomes their snapshot.
            retired.formUnion(try projection.retiredStreams(among: clean, in: db))
            try projection.saveSnapshot(streams: clean, stable: true, in: db)
            // The mixed ones' snapshot takes this step's events; their tables stay as they are.
            try projection.foldIntoSnapshot(foldedOfMixed, streams: mixed, stable: true, in: db)
        }
        try Self.forEachChunk(of: positions) { marks, arguments in
            try Self.notePruned(
                where: "position IN (\(marks)) \(filter)", arguments: arguments + [scope, stable], db)
            try db.execute(
                sql: "DELETE FROM events WHERE position IN (\(marks)) \(filter)",
                arguments: arguments + [scope, stable])
        }
        // A retired stream has no live event left in the log; forgotten (one still holding rejected events
        // too: those never apply).
        try Self.forget(retired, db)
        return (count, live)
    }

    /// Calls `body` with the placeholders and arguments of `positions`, 500 at a time.
    static func forEachChunk(
        of positions: [Int64], _ body: (_ marks: String, _ arguments: StatementArguments) throws -> Void
    ) throws {
        for start in stride(from: 0, to: positions.count, by: 500) {
            let slice = positions[start..<min(start + 500, positions.count)]
            try body(databaseQuestionMarks(count: slice.count), StatementArguments(Array(slice)))
        }
    }

    /// Deletes the `streams` rows of `streams`.
    static func forget(_ streams: Set<String>, _ db: Database) throws {
        guard !streams.isEmpty else { return }
        let delete = try db.cachedStatement(sql: "DELETE FROM streams WHERE stream = ?")
        for stream in streams { try delete.execute(arguments: [stream]) }
    }

    /// A prune as one transaction over whole projections (see `prune`); returns the events folded.
    func pruneWhole(stablePoints: [Scope: Int64], olderThan cutoff: Date?) async throws -> Int {
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
        guard !conditions.isEmpty else { return 0 }
        let filterArguments = arguments
        let foldable = "status = 'confirmed' AND (\(conditions.joined(separator: " OR ")))"

        return try await database.writer.write { db -> Int in
            // Folded events in memory written (the restore below starts from the tables), and `streams`
            // complete before versions are forgotten.
            if self.holdsFolded { try self.settleProjections(db) }
            _ = try self.flushDeferredVersions(limit: .max, db)
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
            try Self.notePruned(where: foldable, arguments: filterArguments, db)
            try db.execute(sql: "DELETE FROM events WHERE \(foldable)", arguments: filterArguments)
            try Self.forgetVersions(of: retired, db)
            for projection in self.projections { try self.rebuild(projection, db) }
            return count
        }
    }

    /// Deletes the `streams` rows of `retired` streams the log holds no event of (one scan of what is left
    /// of the log, after the prune deleted the folded events).
    static func forgetVersions(of retired: Set<String>, _ db: Database) throws {
        guard !retired.isEmpty else { return }
        var forget = retired
        let remaining = try String.fetchCursor(db, sql: "SELECT DISTINCT stream FROM events")
        while let stream = try remaining.next() { forget.remove(stream) }
        try Self.forget(forget, db)
    }
}
