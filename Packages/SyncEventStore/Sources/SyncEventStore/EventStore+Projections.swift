import Foundation
import GRDB
import GRDBSQLite
import SyncModels

extension EventStore {
    /// Events are read and applied in batches of this many, to bound memory during rebuilds.
    static let batchSize = 5000

    /// Applies freshly inserted events (positions after `positionBefore`) to every projection. A projection
    /// whose checkpoint is behind (it missed writes, e.g. it was added later) catches up from the log first.
    ///
    /// With `deferSaves`, a `BufferingProjection` keeps the events' effect in memory and its checkpoint where
    /// it was (see `flushProjections`). Without it, one that holds buffered state still takes the events into
    /// memory (its tables are behind), then writes the records these events touch, so a local write is read
    /// back at once.
    func applyToProjections(
        _ events: [StoredEvent], after positionBefore: Int64, _ db: Database, deferSaves: Bool = false
    ) throws {
        guard let last = events.last?.position else { return }
        let live = events.filter { $0.status != .rejected }
        for projection in projections {
            let checkpoint = try Self.checkpoint(projection.name, db)
            if let buffering = projection as? any BufferingProjection, let checkpoint,
                deferSaves || buffering.bufferedThrough != nil,
                try buffering.buffer(
                    live, after: positionBefore, through: last, checkpoint: checkpoint.position, in: db)
            {
                if !deferSaves, buffering.bufferedThrough != nil {
                    let streams = Set(live.map(\.event.stream))
                    if let held = try buffering.flush(streams: streams, limit: .max, in: db).heldThrough {
                        try Self.setCheckpoint(projection, position: held, db)
                    }
                } else if buffering.bufferedThrough == nil {
                    try Self.setCheckpoint(projection, position: last, db)
                }
                continue
            }
            if checkpoint?.position == positionBefore {
                try projection.apply(live, in: db)
            } else {
                try catchUp(projection, from: checkpoint?.position ?? 0, db)
            }
            try Self.setCheckpoint(projection, position: last, db)
        }
    }

    /// Writes up to `limit` records that projections hold in memory (`BufferingProjection`), in one
    /// transaction; once a projection has written its last one, its checkpoint moves to what it held. The
    /// streams' versions deferred with them are written by `flushDeferredVersions(limit:)`.
    /// - Returns: true when nothing is buffered any more and every projection's tables hold the whole log.
    @discardableResult
    public func flushProjections(limit: Int = .max) async throws -> Bool {
        for projection in projections { (projection as? any BufferingProjection)?.prepareFlush() }
        let (done, streams) = try await database.writer.write { db in try self.flushProjections(limit: limit, db) }
        if !streams.isEmpty {
            broadcaster.publish(
                StoreChange(kind: .projected, streams: streams, projections: Set(projections.map(\.name))))
        }
        return done
    }

    /// Whether some projection's memory is nearly full of buffered records (`BufferingProjection.needsFlush`):
    /// time to write them, before the next page finds no room.
    public func hasFullProjectionBuffers() -> Bool {
        projections.contains { ($0 as? any BufferingProjection)?.needsFlush == true }
    }

    /// Whether some projection holds events in memory that its tables do not show yet (buffered or folded).
    public func hasBufferedProjections() -> Bool {
        projections.contains { Self.holdsWrites($0) }
    }

    /// Whether `projection` holds events in memory that its tables do not show yet.
    static func holdsWrites(_ projection: any Projection) -> Bool {
        (projection as? any BufferingProjection)?.bufferedThrough != nil
            || (projection as? any ArrivalFoldingProjection)?.holdsFolded == true
    }

    /// Whether a flush has anything to write: buffered projection records (`flushProjections(limit:)`), or the
    /// streams' versions of pages applied with deferred saves (`flushDeferredVersions(limit:)`).
    public func hasDeferredWrites() -> Bool {
        hasBufferedProjections() || hasDeferredVersions
    }

    /// `flushProjections(limit:)` inside the caller's transaction; returns whether it is done and the streams
    /// of the records it wrote.
    func flushProjections(limit: Int, _ db: Database) throws -> (done: Bool, streams: Set<String>) {
        var done = true
        var streams: Set<String> = []
        // Folded events lost from memory: the cursor goes back to before them (the next page sees it).
        try rewindIfFoldedLost(db)
        for projection in projections {
            guard let buffering = projection as? any BufferingProjection else { continue }
            if Self.holdsWrites(projection) {
                let flush = try buffering.flush(streams: nil, limit: limit, in: db)
                streams.formUnion(flush.streams)
                if let held = flush.heldThrough { try Self.setCheckpoint(projection, position: held, db) }
                if Self.holdsWrites(projection) { done = false }
            }
            let last = try Self.lastPosition(db)
            if buffering.bufferedThrough == nil, let checkpoint = try Self.checkpoint(projection.name, db),
                checkpoint.position < last
            {
                // Buffered state was dropped (see `BufferingProjection`): the tables catch up from the log.
                try catchUp(projection, from: checkpoint.position, db)
                try Self.setCheckpoint(projection, position: last, db)
            }
        }
        try settleFoldedCursor(db)
        return (done, streams)
    }

    /// Writes every buffered record before an operation that reads or restores projection tables directly.
    func settleProjections(_ db: Database) throws {
        try writeBuffered(streams: nil, db)
    }

    /// Writes the buffered records of `streams`, inside the caller's transaction: a command that reads a
    /// record's current state from a projection's table before appending (`append(building:)`) calls this
    /// first.
    public func writeBufferedProjections(streams: Set<String>, in db: Database) throws {
        try writeBuffered(streams: streams, db)
    }

    /// Writes the buffered records of `streams` (all when nil) of every buffering projection, moving the
    /// checkpoint of each that has nothing left buffered.
    private func writeBuffered(streams: Set<String>?, _ db: Database) throws {
        for projection in projections {
            guard let buffering = projection as? any BufferingProjection, Self.holdsWrites(projection) else {
                continue
            }
            if let held = try buffering.flush(streams: streams, limit: .max, in: db).heldThrough {
                try Self.setCheckpoint(projection, position: held, db)
            }
        }
        try settleFoldedCursor(db)
    }

    /// On open: rebuild projections never built or whose version changed; catch up the rest (unless
    /// `catchingUp` is false: another store has the file open, and a checkpoint behind the log may be its
    /// records held in memory, which it writes; this store's own writes catch the table up, see
    /// `applyToProjections`).
    func catchUpProjections(_ db: Database, catchingUp: Bool = true) throws {
        let last = try Self.lastPosition(db)
        for projection in projections {
            let checkpoint = try Self.checkpoint(projection.name, db)
            if checkpoint == nil || checkpoint?.version != projection.version {
                try rebuild(projection, db)
            } else if catchingUp, let checkpoint, checkpoint.position < last {
                try catchUp(projection, from: checkpoint.position, db)
                try Self.setCheckpoint(projection, position: last, db)
            }
        }
    }

    /// Whether some projection was never built or has another version than its checkpoint's.
    func hasProjectionsToBuild(_ db: Database) throws -> Bool {
        for projection in projections {
            guard let checkpoint = try Self.checkpoint(projection.name, db), checkpoint.version == projection.version
            else { return true }
        }
        return false
    }

    /// Applies every non-rejected event after `position`, in log order.
    func catchUp(_ projection: any Projection, from position: Int64, _ db: Database) throws {
        // A replay starts from the tables: folded events held in memory are written first.
        if holdsFolded { try settleProjections(db) }
        try feed(projection, db, ["WHERE position > ? AND status != 'rejected' ORDER BY position"], [position])
    }

    /// Rebuilds a projection inside the current transaction: back to its snapshot, then every non-rejected
    /// event of the log in the projection's `replayOrder`, in batches.
    func rebuild(_ projection: any Projection, _ db: Database) throws {
        // Folded events in memory are in no log to replay: written first, they are in the snapshot.
        if holdsFolded { try settleProjections(db) }
        try projection.restoreSnapshot(streams: nil, in: db)
        switch projection.replayOrder {
        case .canonical: try feed(projection, db, Self.canonicalReplay)
        case .arrival: try feed(projection, db, Self.arrivalReplay)
        }
        try Self.setCheckpoint(projection, position: Self.lastPosition(db), db)
    }

    /// Every non-rejected event in canonical order, as two queries that walk an index instead of sorting the
    /// whole log: confirmed events by `(scope, seq)` through `events_scope_seq`, then pending events (few)
    /// by scope and position. Together they give exactly `ORDER BY canonicalOrder`.
    static let canonicalReplay = [
        "WHERE seq IS NOT NULL ORDER BY scope, seq",
        "WHERE status = 'pending' ORDER BY scope, position",
    ]

    /// Every non-rejected event in log order: a scan of the table in rowid order.
    static let arrivalReplay = ["WHERE status != 'rejected' ORDER BY position"]

    /// Feeds a projection the events that `filters` select (each a `WHERE … ORDER BY …` clause, run in turn):
    /// as rows to a `RowReplayingProjection`, as batches of decoded events to any other.
    func feed(
        _ projection: any Projection, _ db: Database, _ filters: [String], _ arguments: StatementArguments = []
    ) throws {
        if let projection = projection as? any RowReplayingProjection {
            try projection.replay(
                { consume in
                    for filter in filters {
                        try forEachRow(
                            db, sql: "SELECT \(Self.replayColumns) FROM events \(filter)", arguments, consume)
                    }
                }, in: db)
        } else {
            try projection.applyStream(
                { consume in
                    for filter in filters {
                        try forEachBatch(
                            db, sql: "SELECT \(StoredEvent.columns) FROM events \(filter)", arguments: arguments,
                            consume)
                    }
                }, in: db)
        }
    }

    /// The columns `forEachRow` reads, in its order.
    static let replayColumns = "position, scope, stream, type, hlc, dot_replica, dot_counter, payload"

    /// Calls `body` with each row of a query selecting `replayColumns`, decoded in place: GRDB steps the
    /// statement, the columns are read with SQLite's own accessors (no `Row` values, no `Data` wrappers, no
    /// strings), since a rebuild reads every row of the log.
    func forEachRow(
        _ db: Database, sql: String, _ arguments: StatementArguments, _ body: (ReplayedEvent) throws -> Void
    ) throws {
        let statement = try db.cachedStatement(sql: sql)
        let rows = try Row.fetchCursor(statement, arguments: arguments)
        let handle = statement.sqliteStatement
        func column(_ index: Int32, blob: Bool = false) -> UnsafeRawBufferPointer {
            let start = blob ? sqlite3_column_blob(handle, index) : UnsafeRawPointer(sqlite3_column_text(handle, index))
            return UnsafeRawBufferPointer(
                start: start, count: start == nil ? 0 : Int(sqlite3_column_bytes(handle, index)))
        }
        while try rows.next() != nil {
            let position = sqlite3_column_int64(handle, 0)
            do {
                let hlc = try HLCTimestamp(utf8: column(4))
                let replica = try ReplicaID(utf8: column(5))
                try body(
                    ReplayedEvent(
                        position: position, hlc: hlc,
                        dot: Dot(replica: replica, counter: UInt64(bitPattern: sqlite3_column_int64(handle, 6))),
                        scopeBytes: column(1), streamBytes: column(2), typeBytes: column(3),
                        payload: column(7, blob: true)))
            } catch let error as SyncModelsError {
                throw EventStoreError(code: "store.corrupt", message: "event row \(position): \(error.message)")
            }
        }
    }

    /// Re-derives `streams` in every projection: back to their snapshot state, then their remaining
    /// non-rejected events in canonical order. Used when events are rejected (rollback). Reading the streams'
    /// events scans the log once per 500 streams (there is no index by stream, see `EventStoreSchema`).
    func replay(streams: Set<String>, _ db: Database) throws {
        guard !streams.isEmpty else { return }
        try settleProjections(db)
        let list = Array(streams)
        for projection in projections {
            try projection.restoreSnapshot(streams: streams, in: db)
            for chunk in stride(from: 0, to: list.count, by: 500) {
                let slice = Array(list[chunk..<min(chunk + 500, list.count)])
                let marks = databaseQuestionMarks(count: slice.count)
                try stream(
                    projection, db,
                    sql: """
                        SELECT \(StoredEvent.columns) FROM events
                        WHERE stream IN (\(marks)) AND status != 'rejected' ORDER BY \(Self.canonicalOrder)
                        """, arguments: StatementArguments(slice))
            }
        }
    }

    /// Rebuilds one projection from the log and returns how long it took. Runs as one write transaction:
    /// readers of every projection, this one included, keep reading the previous state until it commits.
    @discardableResult
    public func rebuild(projection name: String) async throws -> Duration {
        guard let projection = projections.first(where: { $0.name == name }) else {
            throw EventStoreError(code: "projection.unknown", message: "no projection named \(name)")
        }
        let start = ContinuousClock.now
        try await database.writer.write { db in try self.rebuild(projection, db) }
        let elapsed = ContinuousClock.now - start
        publish(.rebuilt, [], projections: [name])
        return elapsed
    }

    /// Rebuilds every projection in one transaction.
    @discardableResult
    public func rebuildAll() async throws -> Duration {
        let start = ContinuousClock.now
        try await database.writer.write { db in
            for projection in self.projections { try self.rebuild(projection, db) }
        }
        let elapsed = ContinuousClock.now - start
        publish(.rebuilt, [])
        return elapsed
    }

    /// Rebuilds every projection that can digest its rows (`Projection.rowDigests`), in one transaction, and
    /// returns the names of those whose rows the rebuild changed: rows damaged or lost behind the store's
    /// back, now what the log and the snapshots make them. What projections held in memory is written first,
    /// so that it does not count as damage. With `repair` false the rebuild is rolled back: it only finds.
    public func rebuildDamaged(repair: Bool = true) async throws -> [String] {
        struct Found: Error { var damaged: [String] }
        while try await !flushProjections() {}
        do {
            let damaged = try await database.writer.write { db -> [String] in
                var damaged: [String] = []
                for projection in self.projections {
                    guard let before = try projection.rowDigests(in: db) else { continue }
                    try self.rebuild(projection, db)
                    if let after = try projection.rowDigests(in: db), after != before {
                        damaged.append(projection.name)
                    }
                }
                // Thrown to roll the rebuild back.
                if !repair { throw Found(damaged: damaged) }
                return damaged
            }
            if !damaged.isEmpty { publish(.rebuilt, [], projections: Set(damaged)) }
            return damaged
        } catch let found as Found {
            return found.damaged
        }
    }

    /// Feeds the events a query returns to a projection as one replay (`Projection.applyStream`).
    func stream(_ projection: any Projection, _ db: Database, sql: String, arguments: StatementArguments = []) throws {
        try projection.applyStream(
            { consume in try forEachBatch(db, sql: sql, arguments: arguments, consume) }, in: db)
    }

    func forEachBatch(
        _ db: Database, sql: String, arguments: StatementArguments = [], _ body: ([StoredEvent]) throws -> Void
    ) throws {
        var batch: [StoredEvent] = []
        batch.reserveCapacity(Self.batchSize)
        let rows = try Row.fetchCursor(db, sql: sql, arguments: arguments)
        while let row = try rows.next() {
            batch.append(try StoredEvent(row: row))
            if batch.count == Self.batchSize {
                try body(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty { try body(batch) }
    }

    struct Checkpoint {
        var position: Int64
        var version: Int
    }

    static func checkpoint(_ name: String, _ db: Database) throws -> Checkpoint? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT position, version FROM projection_checkpoint WHERE name = ?"),
            arguments: [name]
        )
        .map { Checkpoint(position: $0[0], version: $0[1]) }
    }

    static func setCheckpoint(_ projection: any Projection, position: Int64, _ db: Database) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO projection_checkpoint (name, position, version) VALUES (?, ?, ?)
                ON CONFLICT (name) DO UPDATE SET position = excluded.position, version = excluded.version
                """
        ).execute(arguments: [projection.name, position, projection.version])
    }
}
