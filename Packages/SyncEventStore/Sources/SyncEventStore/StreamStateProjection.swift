import Foundation
import GRDB
import SyncStorage

/// A projection of one row per stream, each holding the stream's state as a `StreamStateModel` folds it:
/// what a domain of CRDT records (notes, tasks, documents) needs, with every optimisation of the store's
/// long pulls. A domain writes its state, its events and its columns; this gives it:
/// - a **working set**: a batch of events loads each touched stream once, applies its events in memory and
///   writes its row once;
/// - a **cache** of decoded states between transactions (`cachedStreams`), so that consecutive pages do not
///   decode the same states again;
/// - **write-behind** (`BufferingProjection`): during a long pull the rows are written once per flush rather
///   than once per page;
/// - **folding on arrival** (`ArrivalFoldingProjection`): history every replica has seen goes into the
///   state and its snapshot without being logged;
/// - **copy-on-write snapshots** (`StreamSnapshotProjection`): a row unchanged since the last snapshot is its
///   own snapshot; the first write to it copies it into `<table>_snapshot`, so the projection is held about
///   once, not twice, and a prune folds only the streams it deletes events of;
/// - **stable purges**: once every replica has seen a stream's history, its state drops what no later event
///   needs (`StreamStateModel.compactStable`) and retired streams go (`StreamStateModel.isRetired`).
///
/// The table: `stream TEXT PRIMARY KEY, scope TEXT, retired INTEGER, state BLOB`, the model's columns, and
/// `changed` (whether the row differs from its snapshot).
public struct StreamStateProjection<Model: StreamStateModel>: ArrivalFoldingProjection {
    public let model: Model
    let cache: StreamStateCache<Model.State>

    public var name: String { model.name }
    public var version: Int { model.version }
    /// States reach the same value in any order (the model's rule): log order is the cheapest to read.
    public var replayOrder: ReplayOrder { .arrival }

    /// - Parameter cachedStreams: decoded states kept between writes (0 turns the cache, and with it
    ///   write-behind and folding in memory, off).
    public init(_ model: Model, cachedStreams: Int = 20_000) {
        self.model = model
        self.cache = StreamStateCache(capacity: cachedStreams)
    }

    var table: String { model.table }
    var snapshotTable: String { model.table + "_snapshot" }
    /// The columns of a row (in the table and its snapshot copy), in table order.
    var columns: [String] { ["stream", "scope", "retired", "state"] + model.columns.map(\.name) }
    var columnList: String { columns.joined(separator: ", ") }

    public func registerMigrations(into migrations: inout SchemaMigrations) {
        let table = table
        let snapshot = snapshotTable
        let definitions = model.columns.map { ",\n    \($0.name) \($0.definition)" }.joined()
        let columnList = columnList
        let old = columns.map { "OLD." + $0 }.joined(separator: ", ")
        migrations.register("\(name).v1", derivedTables: [table, snapshot]) { db in
            for (name, extra) in [(table, ",\n    changed INTEGER NOT NULL DEFAULT 1"), (snapshot, "")] {
                try db.execute(
                    sql: """
                        CREATE TABLE \(name) (
                            stream TEXT PRIMARY KEY,
                            scope TEXT NOT NULL,
                            retired INTEGER NOT NULL DEFAULT 0,
                            state BLOB NOT NULL\(definitions)\(extra)
                        )
                        """)
            }
            try db.execute(
                sql: """
                    CREATE INDEX \(table)_by_scope ON \(table) (scope, changed);
                    CREATE TRIGGER \(table)_copy_on_update BEFORE UPDATE ON \(table)
                    WHEN OLD.changed = 0 AND NEW.changed = 1 BEGIN
                        INSERT OR REPLACE INTO \(snapshot) (\(columnList)) VALUES (\(old));
                    END;
                    CREATE TRIGGER \(table)_copy_on_delete BEFORE DELETE ON \(table) WHEN OLD.changed = 0 BEGIN
                        INSERT OR REPLACE INTO \(snapshot) (\(columnList)) VALUES (\(old));
                    END;
                    """)
        }
    }

    public func apply(_ events: [StoredEvent], in db: Database) throws {
        try cache.begin(db)
        var set = WorkingSet()
        try set.load(for: events, self, db, cache: cache)
        try writeFolded(among: set, db)
        set.apply(events, model)
        try set.save(self, db)
        cache.store(set.entries)
    }

    /// Writes, as their own snapshot, the streams of `set` that hold folded events in memory: before an event
    /// the log holds is applied to one, so that the snapshot its row's trigger copies holds them.
    func writeFolded(among set: WorkingSet, _ db: Database) throws {
        guard cache.holdsFolded else { return }
        var folded = WorkingSet()
        for entry in set.entries where cache.isFolded(entry.stream) { folded.add(entry) }
        guard !folded.entries.isEmpty else { return }
        try folded.save(self, db, asSnapshot: true)
        cache.markFoldedWritten(folded.entries)
    }

    // MARK: - Folding on arrival

    /// Streams whose row is their own snapshot (`changed = 0`) or that have none, and that hold no buffered
    /// event the log holds; streams that are not the model's have nothing here.
    public func foldable(_ streams: Set<String>, in db: Database) throws -> Set<String> {
        try cache.begin(db)
        var foldable: Set<String> = []
        var unknown: [String] = []
        for stream in streams {
            guard model.handles(stream: stream) else {
                foldable.insert(stream)
                continue
            }
            switch cache.rowState(stream) {
            case .buffered, .changed: continue
            case .snapshot: foldable.insert(stream)
            case .unknown: unknown.append(stream)
            }
        }
        for slice in unknown.chunked(500) {
            var changed: Set<String> = []
            let rows = try String.fetchCursor(
                db,
                sql:
                    "SELECT stream FROM \(table) WHERE changed = 1 AND stream IN (\(databaseQuestionMarks(count: slice.count)))",
                arguments: StatementArguments(slice))
            while let stream = try rows.next() { changed.insert(stream) }
            for stream in slice where !changed.contains(stream) { foldable.insert(stream) }
        }
        return foldable
    }

    /// Applies folded events to the streams' state, which stays their snapshot: held in memory when
    /// `deferSaves` and the cache has room, written at once (`changed = 0`) otherwise.
    public func applyFolded(_ events: [StoredEvent], deferSaves: Bool, in db: Database) throws -> Bool {
        try cache.begin(db)
        var set = WorkingSet()
        try set.load(for: events, self, db, cache: cache)
        set.apply(events, model)
        if deferSaves, cache.markFolded(set.entries) { return true }
        try set.save(self, db, asSnapshot: true)
        cache.markFoldedWritten(set.entries)
        return false
    }

    public var holdsFolded: Bool { cache.holdsFolded }

    public var foldedLoss: Bool { cache.foldedLoss }

    public func clearFoldedLoss() { cache.clearFoldedLoss() }

    public func snapshotStreams(scope: String, in db: Database) throws -> [String] {
        try String.fetchAll(db, sql: "SELECT stream FROM \(table) WHERE scope = ? AND changed = 0", arguments: [scope])
    }

    // MARK: - Write-behind

    /// Applies a page to the cached states and marks them to be written later. Past `cachedStreams`
    /// buffered states, the page's states are written at once instead.
    public func buffer(
        _ events: [StoredEvent], after position: Int64, through last: Int64, checkpoint: Int64, in db: Database
    ) throws -> Bool {
        guard cache.capacity > 0 else { return false }
        try cache.begin(db)
        guard cache.holds(position: position, checkpoint: checkpoint) else {
            cache.clear()
            return false
        }
        var set = WorkingSet()
        try set.load(for: events, self, db, cache: cache)
        try writeFolded(among: set, db)
        set.apply(events, model)
        if !cache.markDirty(set.entries, through: last) {
            try set.save(self, db)
            cache.markClean(set.entries, through: last)
        }
        return true
    }

    public var bufferedThrough: Int64? { cache.bufferedThrough }

    /// Buffered states first, then states holding folded events (written as their own snapshot), `limit` in
    /// all.
    public func flush(streams: Set<String>?, limit: Int, in db: Database) throws -> ProjectionFlush {
        try cache.begin(db)
        var dirty = WorkingSet()
        for entry in cache.dirtyEntries(among: streams, limit: limit) { dirty.add(entry) }
        try dirty.save(self, db)
        let held = cache.markClean(dirty.entries, through: nil)
        var folded = WorkingSet()
        for entry in cache.foldedEntries(among: streams, limit: limit - dirty.entries.count) { folded.add(entry) }
        try folded.save(self, db, asSnapshot: true)
        cache.markFoldedWritten(folded.entries)
        return ProjectionFlush(
            streams: Set(dirty.entries.map(\.stream) + folded.entries.map(\.stream)), heldThrough: held)
    }

    /// Keeps every touched state in memory for the whole replay and saves each once at the end.
    public func applyStream(
        _ batches: (_ consume: ([StoredEvent]) throws -> Void) throws -> Void, in db: Database
    ) throws {
        cache.clear()
        var set = WorkingSet()
        try batches { events in
            try set.load(for: events, self, db)
            set.apply(events, model)
        }
        try set.save(self, db)
    }

    // MARK: - Snapshots

    /// Rows changed since the snapshot go; the copies of their snapshot state come back (a stream absent from
    /// the snapshot has none, and stays gone); unchanged rows are their own snapshot and stay.
    public func restoreSnapshot(streams: Set<String>?, in db: Database) throws {
        cache.clear()
        let slices: [[String]?] = streams.map { Array($0).chunked(500).map(Optional.some) } ?? [nil]
        for slice in slices {
            var filter = ""
            var arguments = StatementArguments()
            if let slice {
                guard !slice.isEmpty else { continue }
                filter = " AND stream IN (\(databaseQuestionMarks(count: slice.count)))"
                arguments = StatementArguments(slice)
            }
            try db.execute(sql: "DELETE FROM \(table) WHERE changed = 1\(filter)", arguments: arguments)
            try db.execute(
                sql: """
                    INSERT INTO \(table) (\(columnList), changed) SELECT \(columnList), 0 FROM \(snapshotTable)
                    WHERE 1\(filter)
                    """, arguments: arguments)
            try db.execute(sql: "DELETE FROM \(snapshotTable) WHERE 1\(filter)", arguments: arguments)
        }
    }

    /// Every row becomes its own snapshot: nothing is copied until a row changes again.
    public func saveSnapshot(in db: Database) throws {
        try db.execute(sql: "DELETE FROM \(snapshotTable)")
        try db.execute(sql: "UPDATE \(table) SET changed = 0 WHERE changed = 1")
    }

    /// A stable fold purges: retired streams go, and every other state is compacted
    /// (`StreamStateModel.compactStable`); what the rows show does not change.
    public func saveSnapshot(in db: Database, stable: Bool) throws {
        if stable {
            cache.clear()
            try purgeStable(filter: "", [], db)
        }
        try saveSnapshot(in: db)
    }

    /// The rows of `streams` become their own snapshot (their copies go); a stable fold first purges them as
    /// `saveSnapshot(in:stable:)` does. Other streams' snapshots stay as they were.
    public func saveSnapshot(streams: Set<String>, stable: Bool, in db: Database) throws {
        cache.clear()
        for slice in streams.filter(model.handles(stream:)).sorted().chunked(500) {
            let filter = " AND stream IN (\(databaseQuestionMarks(count: slice.count)))"
            let arguments = StatementArguments(slice)
            if stable { try purgeStable(filter: filter, arguments, db) }
            try db.execute(sql: "DELETE FROM \(snapshotTable) WHERE 1\(filter)", arguments: arguments)
            try db.execute(sql: "UPDATE \(table) SET changed = 0 WHERE changed = 1\(filter)", arguments: arguments)
        }
    }

    /// The snapshot state of each stream of `streams` (its copy, or its row when unchanged since the
    /// snapshot, or none) takes `events`; the row is marked changed, so that it keeps its current state and
    /// a restore returns to the new copy. A stable fold compacts the copy, and drops it when the stream is
    /// retired.
    public func foldIntoSnapshot(_ events: [StoredEvent], streams: Set<String>, stable: Bool, in db: Database) throws {
        let streams = streams.filter(model.handles(stream:)).sorted()
        guard !streams.isEmpty else { return }
        cache.clear()
        let copy = try db.cachedStatement(sql: "SELECT scope, state FROM \(snapshotTable) WHERE stream = ?")
        let row = try db.cachedStatement(sql: "SELECT scope, state FROM \(table) WHERE stream = ? AND changed = 0")
        let markChanged = try db.cachedStatement(
            sql: "UPDATE \(table) SET changed = 1 WHERE stream = ? AND changed = 0")
        let dropCopy = try db.cachedStatement(sql: "DELETE FROM \(snapshotTable) WHERE stream = ?")
        var set = WorkingSet()
        for stream in streams {
            let entry = StreamStateEntry(stream: stream, scope: nil, state: model.initialState())
            if let stored = try Row.fetchOne(copy, arguments: [stream]) ?? Row.fetchOne(row, arguments: [stream]) {
                entry.scope = stored[0]
                entry.state = try model.decode(stored[1])
            }
            set.add(entry)
        }
        set.apply(events, model)
        let insert = try db.cachedStatement(
            sql: "INSERT OR REPLACE INTO \(snapshotTable) (\(columnList)) VALUES (\(placeholders))")
        for entry in set.entries {
            // The row's copy-on-write trigger copies the old snapshot state first; the new one replaces it.
            try markChanged.execute(arguments: [entry.stream])
            if stable {
                _ = model.compactStable(&entry.state)
                if model.isRetired(entry.state) {
                    try dropCopy.execute(arguments: [entry.stream])
                    continue
                }
            }
            guard let scope = entry.scope else {
                // No event of the stream folded: nothing to keep.
                try dropCopy.execute(arguments: [entry.stream])
                continue
            }
            try insert.execute(arguments: StatementArguments(rowValues(of: entry, scope: scope)))
        }
    }

    /// Deletes the retired streams among those `filter` selects (` AND …`), and compacts the others' states
    /// (`StreamStateModel.compactStable`).
    func purgeStable(filter: String, _ arguments: StatementArguments, _ db: Database) throws {
        try db.execute(sql: "DELETE FROM \(table) WHERE retired = 1\(filter)", arguments: arguments)
        let rows = try Row.fetchCursor(
            db, sql: "SELECT stream, scope, state, changed FROM \(table) WHERE 1\(filter)", arguments: arguments)
        var compacted: [StreamStateEntry<Model.State>] = []
        while let row = try rows.next() {
            var state = try model.decode(row[2])
            if model.compactStable(&state) {
                compacted.append(StreamStateEntry(stream: row[0], scope: row[1], state: state))
            }
        }
        // Written in place, `changed` as it was: a row that is its own snapshot stays one (its trigger fires
        // only when `changed` goes from 0 to 1), compacted alike.
        let assignments = columns.dropFirst().map { "\($0) = ?" }.joined(separator: ", ")
        let update = try db.cachedStatement(sql: "UPDATE \(table) SET \(assignments) WHERE stream = ?")
        for entry in compacted {
            let values = rowValues(of: entry, scope: entry.scope ?? "").dropFirst()
            try update.execute(arguments: StatementArguments(Array(values) + [entry.stream.databaseValue]))
        }
    }

    /// Retired streams: a stable fold purges them, and no event can follow an end every replica has seen.
    public func retiredStreams(in db: Database) throws -> Set<String> {
        Set(try String.fetchAll(db, sql: "SELECT stream FROM \(table) WHERE retired = 1"))
    }

    /// The retired streams among `streams`, each looked up by its key.
    public func retiredStreams(among streams: Set<String>, in db: Database) throws -> Set<String> {
        let retired = try db.cachedStatement(sql: "SELECT retired FROM \(table) WHERE stream = ?")
        var found: Set<String> = []
        for stream in streams where model.handles(stream: stream) {
            if try Bool.fetchOne(retired, arguments: [stream]) == true { found.insert(stream) }
        }
        return found
    }

    public func discardSnapshot(in db: Database) throws {
        cache.clear()
        // Marking rows changed copies them into the snapshot table first (the trigger); then none is kept.
        try db.execute(sql: "UPDATE \(table) SET changed = 1 WHERE changed = 0")
        try db.execute(sql: "DELETE FROM \(snapshotTable)")
    }

    // MARK: - Reading

    /// The state of `stream`, or nil when no event of it was applied.
    public func state(of stream: String, in db: Database) throws -> Model.State? {
        guard let data = try Data.fetchOne(db, sql: "SELECT state FROM \(table) WHERE stream = ?", arguments: [stream])
        else { return nil }
        return try model.decode(data)
    }

    // MARK: - Rows

    var placeholders: String { databaseQuestionMarks(count: columns.count) }

    /// A row's values, in `columns` order.
    func rowValues(of entry: StreamStateEntry<Model.State>, scope: String) -> [DatabaseValue] {
        [
            entry.stream.databaseValue, scope.databaseValue, model.isRetired(entry.state).databaseValue,
            model.encode(entry.state).databaseValue,
        ] + model.values(of: entry.state)
    }

    /// The streams a batch of events touches, loaded once and saved once.
    struct WorkingSet {
        typealias Entry = StreamStateEntry<Model.State>

        var entries: [Entry] = []
        var slots: [String: Int] = [:]

        mutating func add(_ entry: Entry) {
            slots[entry.stream] = entries.count
            entries.append(entry)
        }

        /// Loads, in a few queries, the stored state of the streams `events` touch that are not loaded yet
        /// (from `cache` when it holds them).
        mutating func load(
            for events: [StoredEvent], _ projection: StreamStateProjection, _ db: Database,
            cache: StreamStateCache<Model.State>? = nil
        ) throws {
            var missing: [String] = []
            var seen: Set<String> = []
            for stored in events {
                let stream = stored.event.stream
                guard slots[stream] == nil, !seen.contains(stream), projection.model.handles(stream: stream)
                else { continue }
                if let cached = cache?.entry(stream) {
                    add(cached)
                } else {
                    seen.insert(stream)
                    missing.append(stream)
                }
            }
            var loaded: [String: (scope: String, state: Model.State, changed: Bool)] = [:]
            for slice in missing.chunked(500) {
                let rows = try Row.fetchCursor(
                    db,
                    sql: """
                        SELECT stream, scope, state, changed FROM \(projection.table)
                        WHERE stream IN (\(databaseQuestionMarks(count: slice.count)))
                        """,
                    arguments: StatementArguments(slice))
                while let row = try rows.next() {
                    loaded[row[0]] = (row[1], try projection.model.decode(row[2]), row[3])
                }
            }
            for stream in missing {
                let found = loaded[stream]
                add(
                    Entry(
                        stream: stream, scope: found?.scope, state: found?.state ?? projection.model.initialState(),
                        rowIsSnapshot: !(found?.changed ?? false)))
            }
        }

        /// Applies events whose streams `load` loaded.
        func apply(_ events: [StoredEvent], _ model: Model) {
            for stored in events {
                guard let slot = slots[stored.event.stream] else { continue }
                let entry = entries[slot]
                if entry.scope == nil { entry.scope = stored.event.scope.name }
                model.apply(stored, to: &entry.state)
            }
        }

        /// Writes every row of the working set, in stream order. With `asSnapshot`, the rows stay their own
        /// snapshot (`changed = 0`): for streams holding only folded events since their snapshot.
        func save(_ projection: StreamStateProjection, _ db: Database, asSnapshot: Bool = false) throws {
            guard !entries.isEmpty else { return }
            let changed = asSnapshot ? 0 : 1
            let updates = projection.columns.dropFirst().map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
            let upsert = try db.cachedStatement(
                sql: """
                    INSERT INTO \(projection.table) (\(projection.columnList), changed)
                    VALUES (\(projection.placeholders), \(changed))
                    ON CONFLICT (stream) DO UPDATE SET \(updates), changed = \(changed)
                    """)
            for entry in entries.sorted(by: { $0.stream < $1.stream }) {
                entry.rowIsSnapshot = asSnapshot
                guard let scope = entry.scope else { continue }
                try upsert.execute(arguments: StatementArguments(projection.rowValues(of: entry, scope: scope)))
            }
        }
    }
}

extension Array {
    /// The array in consecutive slices of at most `size` elements.
    func chunked(_ size: Int) -> [[Element]] {
        stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}
