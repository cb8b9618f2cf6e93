import Dispatch
import Foundation
import GRDB
import SyncModels
import SyncStorage

/// A projection of one row per record, each holding the record's state as a `StreamStateModel` folds it
/// from the record's stream: what a domain of CRDT records (notes, tasks, documents) needs, with every
/// optimisation of the store's long pulls. A domain writes its state, its events and its columns; this gives
/// it:
/// - a **working set**: a batch of events loads each touched record once, applies its events in memory and
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
/// - **stable purges**: once every replica has seen a record's history, its state drops what no later event
///   needs (`StreamStateModel.compactStable`) and retired records go (`StreamStateModel.retiredColumn`);
/// - **parallel replays** for models that replay from the log's rows (`StreamStateReplayModel`).
///
/// The table: the key column (primary key), `scope`, `state` (the encoded state), the model's columns, and
/// `changed` (whether the row differs from its snapshot).
public struct StreamStateProjection<Model: StreamStateModel>: ArrivalFoldingProjection {
    public typealias Entry = StreamStateEntry<Model.Key, Model.State>

    public let model: Model
    /// Threads long replays and large writes use; records are independent, so they are split by record.
    public let workers: Int
    @usableFromInline let cache: StreamStateCache<Model.Key, Model.State>
    @usableFromInline let table: StreamStateTable

    public var name: String { model.name }
    public var version: Int { model.version }
    /// States reach the same value in any order (the model's rule): log order is the cheapest to read, and
    /// leaves a rebuilt record exactly as incremental application left it.
    public var replayOrder: ReplayOrder { .arrival }

    /// - Parameters:
    ///   - model: what the domain gives: its records' state, stored form and columns.
    ///   - workers: threads for long replays and large writes; by default one per active processor, at
    ///     most 8.
    ///   - cachedStreams: decoded states kept between writes (0 turns the cache, and with it write-behind
    ///     and folding in memory, off).
    public init(
        _ model: Model, workers: Int = ProcessInfo.processInfo.activeProcessorCount, cachedStreams: Int = 20_000
    ) {
        self.model = model
        self.workers = max(1, min(workers, 8))
        self.cache = StreamStateCache(capacity: cachedStreams)
        self.table = StreamStateTable(model)
    }

    public func registerMigrations(into migrations: inout SchemaMigrations) {
        model.registerMigrations(table, into: &migrations)
    }

    public func apply(_ events: [StoredEvent], in db: Database) throws {
        try model.applyPage(events, projection: self, in: db)
    }

    /// Writes `entries` in key order, as changed rows or, `asSnapshot`, as rows that stay their own snapshot
    /// (records holding only folded events since their snapshot); on `workers` threads when there are many.
    @inlinable
    func save(_ entries: [Entry], _ db: Database, asSnapshot: Bool = false, workers: Int = 1) throws {
        guard !entries.isEmpty else { return }
        for entry in entries { entry.rowIsSnapshot = asSnapshot }
        try model.writeRows(
            entries.sorted { $0.key < $1.key }, to: .table(changed: !asSnapshot), table: table,
            workers: entries.count > 256 ? workers : 1, in: db)
    }

    /// Writes, as their own snapshot, the records of `set` that hold folded events in memory: before an event
    /// the log holds is applied to one, so that the snapshot its row's trigger copies holds them.
    @usableFromInline
    func writeFolded(among set: WorkingSet, _ db: Database) throws {
        guard cache.holdsFolded else { return }
        let folded = set.entries.filter { cache.isFolded($0.key) }
        guard !folded.isEmpty else { return }
        try save(folded, db, asSnapshot: true)
        cache.markFoldedWritten(folded)
    }

    // MARK: - Folding on arrival

    /// Records whose row is their own snapshot (`changed = 0`) or that have none, and that hold no buffered
    /// event the log holds; streams that are not the model's have nothing here.
    public func foldable(_ streams: Set<String>, in db: Database) throws -> Set<String> {
        try cache.begin(db)
        var foldable: Set<String> = []
        var unknown: [String: String] = [:]
        for stream in streams {
            guard let key = model.key(ofStream: stream) else {
                foldable.insert(stream)
                continue
            }
            switch cache.rowState(key) {
            case .buffered, .changed: continue
            case .snapshot: foldable.insert(stream)
            case .unknown: unknown[key.description] = stream
            }
        }
        for slice in Array(unknown.keys).chunked(512) {
            var changed: Set<String> = []
            let rows = try String.fetchCursor(
                table.lookup(
                    "SELECT \(table.keyColumn) FROM \(table.name) WHERE changed = 1 AND \(table.keyColumn) IN", slice,
                    db),
                arguments: StatementArguments(StreamStateTable.padded(slice)))
            while let key = try rows.next() { changed.insert(key) }
            for key in slice where !changed.contains(key) { foldable.insert(unknown[key]!) }
        }
        return foldable
    }

    /// Applies folded events to the records' state, which stays their snapshot: held in memory when
    /// `deferSaves` and the cache has room, written at once (`changed = 0`) otherwise.
    public func applyFolded(_ events: [StoredEvent], deferSaves: Bool, in db: Database) throws -> Bool {
        try model.foldPage(events, deferSaves: deferSaves, projection: self, in: db)
    }

    public var holdsFolded: Bool { cache.holdsFolded }

    public var foldedLoss: Bool { cache.foldedLoss }

    public func clearFoldedLoss() { cache.clearFoldedLoss() }

    public func snapshotStreams(scope: String, in db: Database) throws -> [String] {
        var streams: [String] = []
        let keys = try String.fetchCursor(
            db, sql: "SELECT \(table.keyColumn) FROM \(table.name) WHERE scope = ? AND changed = 0",
            arguments: [scope])
        while let text = try keys.next() {
            if let key = Model.Key(text) { streams.append(model.stream(of: key)) }
        }
        return streams
    }

    // MARK: - Write-behind

    /// Applies a page to the cached states and marks them to be written later: a long pull then encodes and
    /// writes each record once per flush instead of once per page. Past `cachedStreams` buffered states, the
    /// page's records are written at once instead.
    public func buffer(
        _ events: [StoredEvent], after position: Int64, through last: Int64, checkpoint: Int64, in db: Database
    ) throws -> Bool {
        try model.bufferPage(
            events, after: position, through: last, checkpoint: checkpoint, projection: self, in: db)
    }

    public var bufferedThrough: Int64? { cache.bufferedThrough }

    /// Three quarters of `cachedStreams` hold buffered or folded records.
    public var needsFlush: Bool { cache.isNearlyFull }

    /// Sorts the buffered records of the flush's next pass, when one is due.
    public func prepareFlush() { cache.prepareFlush() }

    /// Buffered records first, then records holding folded events (written as their own snapshot), `limit`
    /// in all.
    public func flush(streams: Set<String>?, limit: Int, in db: Database) throws -> ProjectionFlush {
        try model.flushPage(streams: streams, limit: limit, projection: self, in: db)
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
        try save(set.entries, db, workers: workers)
    }

    // MARK: - Snapshots

    /// Rows changed since the snapshot go; the copies of their snapshot state come back (a record absent from
    /// the snapshot has none, and stays gone); unchanged rows are their own snapshot and stay.
    public func restoreSnapshot(streams: Set<String>?, in db: Database) throws {
        cache.clear()
        let key = table.keyColumn
        var slices: [[String]?] = [nil]
        if let streams {
            slices = streams.compactMap { model.key(ofStream: $0)?.description }.chunked(500).map(Optional.some)
        }
        for slice in slices {
            var filter = ""
            var arguments = StatementArguments()
            if let slice {
                filter = " AND \(key) IN (\(databaseQuestionMarks(count: slice.count)))"
                arguments = StatementArguments(slice)
            }
            try db.execute(sql: "DELETE FROM \(table.name) WHERE changed = 1\(filter)", arguments: arguments)
            try db.execute(
                sql: """
                    INSERT INTO \(table.name) (\(table.columnList), changed)
                    SELECT \(table.columnList), 0 FROM \(table.snapshot) WHERE 1\(filter)
                    """, arguments: arguments)
            try db.execute(sql: "DELETE FROM \(table.snapshot) WHERE 1\(filter)", arguments: arguments)
        }
    }

    /// Every row becomes its own snapshot: nothing is copied until a row changes again.
    public func saveSnapshot(in db: Database) throws {
        try db.execute(sql: "DELETE FROM \(table.snapshot)")
        try db.execute(sql: "UPDATE \(table.name) SET changed = 0 WHERE changed = 1")
    }

    /// A stable fold purges: retired records go, and every other state is compacted
    /// (`StreamStateModel.compactStable`); what the rows show does not change.
    public func saveSnapshot(in db: Database, stable: Bool) throws {
        if stable {
            cache.clear()
            try purgeStable(filter: "", [], db)
        }
        try saveSnapshot(in: db)
    }

    /// The rows of `streams` become their own snapshot (their copies go); a stable fold first purges them as
    /// `saveSnapshot(in:stable:)` does. Other records' snapshots stay as they were.
    public func saveSnapshot(streams: Set<String>, stable: Bool, in db: Database) throws {
        cache.clear()
        for slice in streams.compactMap({ model.key(ofStream: $0)?.description }).chunked(500) {
            let filter = " AND \(table.keyColumn) IN (\(databaseQuestionMarks(count: slice.count)))"
            let arguments = StatementArguments(slice)
            if stable { try purgeStable(filter: filter, arguments, db) }
            try db.execute(sql: "DELETE FROM \(table.snapshot) WHERE 1\(filter)", arguments: arguments)
            try db.execute(
                sql: "UPDATE \(table.name) SET changed = 0 WHERE changed = 1\(filter)", arguments: arguments)
        }
    }

    /// The snapshot state of each record of `streams` (its copy, or its row when unchanged since the
    /// snapshot, or none) takes `events`; the row is marked changed, so that it keeps its current state and
    /// a restore returns to the new copy. A stable fold compacts the copy (a retired record has none), and
    /// the row of what the folded history no longer needs (`compactStable(_:through:)`).
    public func foldIntoSnapshot(_ events: [StoredEvent], streams: Set<String>, stable: Bool, in db: Database) throws {
        let keys = streams.compactMap(model.key(ofStream:)).sorted()
        guard !keys.isEmpty else { return }
        let key = table.keyColumn
        let copy = try db.cachedStatement(sql: "SELECT scope, state FROM \(table.snapshot) WHERE \(key) = ?")
        let row = try db.cachedStatement(
            sql: "SELECT scope, state FROM \(table.name) WHERE \(key) = ? AND changed = 0")
        let markChanged = try db.cachedStatement(
            sql: "UPDATE \(table.name) SET changed = 1 WHERE \(key) = ? AND changed = 0")
        let dropCopy = try db.cachedStatement(sql: "DELETE FROM \(table.snapshot) WHERE \(key) = ?")
        var set = WorkingSet()
        for recordKey in keys {
            let entry = Entry(key: recordKey, scope: nil, state: model.initialState())
            let text = recordKey.description
            if let stored = try Row.fetchOne(copy, arguments: [text]) ?? Row.fetchOne(row, arguments: [text]) {
                entry.scope = stored[0]
                entry.state = try decode(stored, 1)
            }
            set.add(entry)
        }
        set.apply(events, model)
        let current = try db.cachedStatement(sql: "SELECT state FROM \(table.name) WHERE \(key) = ?")
        let compact = try db.cachedStatement(sql: "UPDATE \(table.name) SET state = ? WHERE \(key) = ?")
        for entry in set.entries {
            let text = entry.key.description
            // The row's copy-on-write trigger copies the old snapshot state first; the new one replaces it.
            try markChanged.execute(arguments: [text])
            if stable {
                // The row drops what the fold drops too, keeping what its later events need: what it shows
                // does not change.
                if let stored = try Row.fetchOne(current, arguments: [text]) {
                    var state = try decode(stored, 0)
                    if model.compactStable(&state, through: entry.state) {
                        try compact.execute(arguments: [model.encode(state), text])
                        cache.clear()
                    }
                }
                _ = model.compactStable(&entry.state)
                if model.isRetired(entry.state) {
                    try dropCopy.execute(arguments: [text])
                    continue
                }
            }
            guard entry.scope != nil else {
                // No event of the record folded (none is the model's): nothing to keep.
                try dropCopy.execute(arguments: [text])
                continue
            }
            try model.writeRows([entry], to: .snapshot, table: table, workers: 1, in: db)
        }
    }

    /// Deletes the retired records among those `filter` selects (` AND …`), and compacts the others' states
    /// (`StreamStateModel.compactStable`).
    func purgeStable(filter: String, _ arguments: StatementArguments, _ db: Database) throws {
        if let retired = model.retiredColumn {
            try db.execute(sql: "DELETE FROM \(table.name) WHERE \(retired) = 1\(filter)", arguments: arguments)
        }
        let rows = try Row.fetchCursor(
            db, sql: "SELECT \(table.keyColumn), state FROM \(table.name) WHERE 1\(filter)", arguments: arguments)
        var compacted: [(String, Data)] = []
        while let row = try rows.next() {
            var state = try decode(row, 1)
            if model.compactStable(&state) { compacted.append((row[0], model.encode(state))) }
        }
        // Each compacted row moves to the end of the table (deleted, then inserted again with a new rowid)
        // instead of shrinking in place: shrunk rows left a third of the pages they were on unused, while the
        // pages a move empties go back to the file at the next incremental vacuum.
        let all = table.columnList + ", changed"
        let read = try db.cachedStatement(sql: "SELECT \(all) FROM \(table.name) WHERE \(table.keyColumn) = ?")
        let delete = try db.cachedStatement(sql: "DELETE FROM \(table.name) WHERE \(table.keyColumn) = ?")
        let insert = try db.cachedStatement(
            sql: "INSERT INTO \(table.name) (\(all)) VALUES (\(databaseQuestionMarks(count: table.columns.count + 1)))")
        for (key, state) in compacted {
            guard let row = try Row.fetchOne(read, arguments: [key]) else { continue }
            var values = Array(row.databaseValues)
            values[2] = state.databaseValue
            try delete.execute(arguments: [key])
            try insert.execute(arguments: StatementArguments(values))
        }
    }

    /// Retired records: a stable fold purges them, and no event can follow an end every replica has seen.
    public func retiredStreams(in db: Database) throws -> Set<String> {
        guard let retired = model.retiredColumn else { return [] }
        var streams: Set<String> = []
        let keys = try String.fetchCursor(
            db, sql: "SELECT \(table.keyColumn) FROM \(table.name) WHERE \(retired) = 1")
        while let text = try keys.next() {
            if let key = Model.Key(text) { streams.insert(model.stream(of: key)) }
        }
        return streams
    }

    /// The records whose `StreamStateModel.conflictColumn` is set, retired ones left out.
    public func streamsInConflict(in db: Database) throws -> Set<String> {
        guard let conflict = model.conflictColumn else { return [] }
        let live = model.retiredColumn.map { " AND \($0) = 0" } ?? ""
        var streams: Set<String> = []
        let keys = try String.fetchCursor(
            db,
            sql: """
                SELECT \(table.keyColumn) FROM \(table.name)
                WHERE \(conflict) IS NOT NULL AND \(conflict) IS NOT 0\(live)
                """)
        while let text = try keys.next() {
            if let key = Model.Key(text) { streams.insert(model.stream(of: key)) }
        }
        return streams
    }

    /// What the table shows, by key: each shown row's scope and read columns (`shownCondition`), hashed
    /// value by value (not its encoded state, whose bytes may differ between equal states, nor its
    /// bookkeeping).
    public func rowDigests(in db: Database) throws -> [String: Int]? {
        let shown = ([table.keyColumn, "scope"] + model.columns.map(\.name)).joined(separator: ", ")
        let condition = model.shownCondition.map { " WHERE \($0)" } ?? ""
        let rows = try Row.fetchCursor(db, sql: "SELECT \(shown) FROM \(table.name)\(condition)")
        var digests: [String: Int] = [:]
        while let row = try rows.next() {
            var hasher = Hasher()
            for value in row.databaseValues { hasher.combine(value) }
            digests[row[0] as String? ?? ""] = hasher.finalize()
        }
        return digests
    }

    /// The retired records among `streams`, each looked up by its key.
    public func retiredStreams(among streams: Set<String>, in db: Database) throws -> Set<String> {
        guard let retired = model.retiredColumn else { return [] }
        let lookup = try db.cachedStatement(
            sql: "SELECT \(retired) FROM \(table.name) WHERE \(table.keyColumn) = ?")
        var found: Set<String> = []
        for stream in streams {
            guard let key = model.key(ofStream: stream) else { continue }
            if try Bool.fetchOne(lookup, arguments: [key.description]) == true { found.insert(stream) }
        }
        return found
    }

    public func discardSnapshot(in db: Database) throws {
        cache.clear()
        // Marking rows changed copies them into the snapshot table first (the trigger); then none is kept.
        try db.execute(sql: "UPDATE \(table.name) SET changed = 1 WHERE changed = 0")
        try db.execute(sql: "DELETE FROM \(table.snapshot)")
    }

    // MARK: - Reading

    /// The state of the record `key`, or nil when no event of it was applied.
    public func state(of key: Model.Key, in db: Database) throws -> Model.State? {
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT state FROM \(table.name) WHERE \(table.keyColumn) = ?", arguments: [key.description])
        else { return nil }
        return try decode(row, 0)
    }

    /// The state in column `index` of `row`, decoded from SQLite's bytes in place.
    @inlinable
    func decode(_ row: Row, _ index: Int) throws -> Model.State {
        try row.withUnsafeData(atIndex: index) { data in try model.decode(data ?? Data()) }
    }

    // MARK: - The working set

    /// The records a batch of events touches, loaded once and saved once.
    @usableFromInline
    struct WorkingSet {
        @usableFromInline var entries: [Entry] = []
        @usableFromInline var slots: [Model.Key: Int] = [:]
        /// Whether the table held no row when first asked (a rebuild without snapshot): then no record needs
        /// loading. Rows this working set saves come only at the end.
        @usableFromInline var tableEmpty: Bool?

        @inlinable
        init() {}

        @inlinable @discardableResult
        mutating func add(_ entry: Entry) -> Int {
            slots[entry.key] = entries.count
            entries.append(entry)
            return entries.count - 1
        }

        /// Loads, in a few queries, the stored state of the records `events` touch that are not loaded yet
        /// (from `cache` when it holds them).
        @inlinable
        mutating func load(
            for events: [StoredEvent], _ projection: StreamStateProjection, _ db: Database,
            cache: StreamStateCache<Model.Key, Model.State>? = nil
        ) throws {
            let model = projection.model
            var missing: [String: Model.Key] = [:]
            for stored in events where model.accepts(type: stored.event.type) {
                guard let key = model.key(ofStream: stored.event.stream), slots[key] == nil else { continue }
                let text = key.description
                guard missing[text] == nil else { continue }
                if let cached = cache?.entry(key) {
                    add(cached)
                } else {
                    missing[text] = key
                }
            }
            guard !missing.isEmpty else { return }
            let table = projection.table
            var loaded: [String: (scope: String, state: Model.State, changed: Bool)] = [:]
            for slice in Array(missing.keys).chunked(512) {
                let rows = try Row.fetchCursor(
                    table.lookup(
                        "SELECT \(table.keyColumn), scope, state, changed FROM \(table.name) WHERE \(table.keyColumn) IN",
                        slice, db),
                    arguments: StatementArguments(StreamStateTable.padded(slice)))
                while let row = try rows.next() {
                    loaded[row[0]] = (row[1], try projection.decode(row, 2), row[3])
                }
            }
            for (text, key) in missing {
                let found = loaded[text]
                add(
                    Entry(
                        key: key, scope: found?.scope, state: found?.state ?? model.initialState(),
                        rowIsSnapshot: !(found?.changed ?? false)))
            }
        }

        /// The slot of a replayed event's record, loading its stored state on first sight; nil for streams
        /// that are not the model's.
        @inlinable
        mutating func slot(of event: ReplayedEvent, _ projection: StreamStateProjection, _ db: Database) throws
            -> Int?
        {
            guard let key = projection.model.key(ofStreamBytes: event.streamBytes) else { return nil }
            if let slot = slots[key] { return slot }
            let entry = Entry(key: key, scope: event.scope, state: projection.model.initialState())
            let table = projection.table
            if tableEmpty == nil {
                tableEmpty = try !(Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM \(table.name))") ?? false)
            }
            if tableEmpty == false,
                let row = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT scope, state FROM \(table.name) WHERE \(table.keyColumn) = ?"),
                    arguments: [key.description])
            {
                entry.scope = row[0] as String? ?? entry.scope
                entry.state = try projection.decode(row, 1)
            }
            return add(entry)
        }

        /// Applies events whose records `load` loaded.
        @inlinable
        func apply(_ events: [StoredEvent], _ model: Model) {
            for stored in events where model.accepts(type: stored.event.type) {
                guard let key = model.key(ofStream: stored.event.stream), let slot = slots[key] else { continue }
                let entry = entries[slot]
                if entry.scope == nil { entry.scope = stored.event.scope.name }
                model.apply(stored, to: &entry.state)
            }
        }
    }
}

extension StreamStateProjection: RowReplayingProjection where Model: StreamStateReplayModel {
    /// Rebuilds and catch-up: the model's `replay(_:projection:in:)`, which its own module compiles for its
    /// own types (the default is inlinable): a replay's loop runs once per event of the log.
    public func replay(
        _ rows: (_ consume: (ReplayedEvent) throws -> Void) throws -> Void, in db: Database
    ) throws {
        try model.replay(rows, projection: self, in: db)
    }
}

extension StreamStateModel {
    /// `StreamStateProjection.apply`: the page's records loaded (from the cache when it holds them), the
    /// events applied in memory, each record written once.
    @inlinable
    public func applyPage(_ events: [StoredEvent], projection: StreamStateProjection<Self>, in db: Database) throws {
        try projection.cache.begin(db)
        var set = StreamStateProjection<Self>.WorkingSet()
        try set.load(for: events, projection, db, cache: projection.cache)
        try projection.writeFolded(among: set, db)
        set.apply(events, self)
        try projection.save(set.entries, db)
        projection.cache.store(set.entries)
    }

    /// `StreamStateProjection.buffer`: the page applied to the cached states, which are marked to be written
    /// later; past the cache's capacity, written with the page.
    @inlinable
    public func bufferPage(
        _ events: [StoredEvent], after position: Int64, through last: Int64, checkpoint: Int64,
        projection: StreamStateProjection<Self>, in db: Database
    ) throws -> Bool {
        let cache = projection.cache
        guard cache.capacity > 0 else { return false }
        try cache.begin(db)
        guard cache.holds(position: position, checkpoint: checkpoint) else {
            cache.clear()
            return false
        }
        var set = StreamStateProjection<Self>.WorkingSet()
        try set.load(for: events, projection, db, cache: cache)
        try projection.writeFolded(among: set, db)
        set.apply(events, self)
        if !cache.markDirty(set.entries, through: last) {
            try projection.save(set.entries, db)
            cache.markClean(set.entries, through: last)
        }
        return true
    }

    /// `StreamStateProjection.applyFolded`: folded events applied to the records' state, which stays their
    /// snapshot, held in memory or written at once.
    @inlinable
    public func foldPage(
        _ events: [StoredEvent], deferSaves: Bool, projection: StreamStateProjection<Self>, in db: Database
    ) throws -> Bool {
        let cache = projection.cache
        try cache.begin(db)
        var set = StreamStateProjection<Self>.WorkingSet()
        try set.load(for: events, projection, db, cache: cache)
        set.apply(events, self)
        if deferSaves, cache.markFolded(set.entries) { return true }
        try projection.save(set.entries, db, asSnapshot: true, workers: projection.workers)
        cache.markFoldedWritten(set.entries)
        return false
    }
}

extension StreamStateModel {
    /// `StreamStateProjection.flush`: buffered records first, then records holding folded events (written as
    /// their own snapshot), `limit` in all, each kind in key order.
    @inlinable
    public func flushPage(streams: Set<String>?, limit: Int, projection: StreamStateProjection<Self>, in db: Database)
        throws -> ProjectionFlush
    {
        let cache = projection.cache
        try cache.begin(db)
        let keys = streams.map { Set($0.compactMap(key(ofStream:))) }
        let dirty =
            if let keys {
                Array(cache.dirtyEntries(among: keys).sorted { $0.key < $1.key }.prefix(max(0, limit)))
            } else {
                cache.nextDirty(limit)
            }
        try projection.save(dirty, db, workers: projection.workers)
        let held = cache.markClean(dirty, through: nil)
        let rest = max(0, limit - dirty.count)
        let folded =
            if let keys {
                Array(cache.foldedEntries(among: keys).sorted { $0.key < $1.key }.prefix(rest))
            } else {
                cache.nextFolded(rest)
            }
        try projection.save(folded, db, asSnapshot: true, workers: projection.workers)
        cache.markFoldedWritten(folded)
        return ProjectionFlush(streams: Set((dirty + folded).map { stream(of: $0.key) }), heldThrough: held)
    }
}

extension StreamStateReplayModel {
    /// Every row's payload read from its bytes, each record loaded on first sight and saved once at the end.
    /// Rows are gathered in batches that `workers` threads apply, split by record, while this thread reads
    /// the next batch (`StreamStateReplayPipeline`).
    @inlinable
    public func replay(
        _ rows: (_ consume: (ReplayedEvent) throws -> Void) throws -> Void, projection: StreamStateProjection<Self>,
        in db: Database
    ) throws {
        projection.cache.clear()
        var set = StreamStateProjection<Self>.WorkingSet()
        let pipeline = StreamStateReplayPipeline<Self>(model: self, workers: projection.workers)
        defer {
            // Batches refer to the entries without owning them: the working set must outlive every batch.
            pipeline.finish()
            withExtendedLifetime(set) {}
        }
        var batch = pipeline.firstBatch()
        try rows { event in
            guard let kind = kind(ofType: event.typeBytes), let slot = try set.slot(of: event, projection, db)
            else { return }
            batch.append(set.entries[slot], slot: slot, kind: kind, event)
            if batch.isFull { batch = pipeline.submit(batch) }
        }
        _ = pipeline.submit(batch, last: true)
        pipeline.finish()
        try projection.save(set.entries, db, workers: projection.workers)
        // Freeing thousands of states takes a while: another thread does it while this one commits. Nothing
        // refers to the entries any more (the pipeline is finished, the rows are written).
        nonisolated(unsafe) let retired = set
        set = StreamStateProjection<Self>.WorkingSet()
        DispatchQueue.global().async { withExtendedLifetime(retired) {} }
    }
}

extension Array {
    /// The array in consecutive slices of at most `size` elements.
    @inlinable
    func chunked(_ size: Int) -> [[Element]] {
        stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}
