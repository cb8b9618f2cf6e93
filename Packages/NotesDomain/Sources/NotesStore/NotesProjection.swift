import Dispatch
import Foundation
import GRDB
import NotesDomain
import SyncEventStore
import SyncModels
import SyncStorage
import Synchronization

/// The `notes` projection: per note, its CRDT state (`state`, the binary form of `NoteState`; rows written
/// before it hold canonical JSON, which still reads) and plain read
/// columns an app can query with SQL (`title`, `body`, `tags` as a JSON array, `pinned`, `view_count`,
/// `checklist` as JSON, `deleted`).
///
/// Applying a batch loads each touched note once, applies its events in memory and writes it back once,
/// so rebuilds cost one read and one write per note per batch rather than per event.
public struct NotesProjection: RowReplayingProjection, ArrivalFoldingProjection {
    public let name = "notes"
    public let version = NoteState.version
    /// Threads a long replay (rebuild, catch-up) applies events and encodes notes on. Notes are independent
    /// CRDTs, so they are split among threads by note; each note still sees its events in replay order.
    public let workers: Int

    /// Notes are CRDTs, so any order gives the same notes; log order is the cheapest to read and leaves a
    /// rebuilt note exactly as incremental application left it.
    public var replayOrder: ReplayOrder { .arrival }

    /// Decoded states of the notes as this store's writer left them, so that a page of pulled events does
    /// not decode again the notes the page before it touched (see `NoteStateCache`).
    let cache: NoteStateCache

    /// - Parameters:
    ///   - workers: threads for long replays; by default one per active processor, at most 8.
    ///   - cachedNotes: decoded note states kept between writes (0 turns the cache off).
    public init(workers: Int = ProcessInfo.processInfo.activeProcessorCount, cachedNotes: Int = 20_000) {
        self.workers = max(1, min(workers, 8))
        self.cache = NoteStateCache(capacity: cachedNotes)
    }

    /// The columns of a note row (in `notes` and `notes_snapshot`), in table order.
    public static let columns = "id, scope, title, body, tags, pinned, view_count, checklist, deleted, created, state"

    public func registerMigrations(into migrations: inout SchemaMigrations) {
        migrations.register("notes.v1", derivedTables: ["notes", "notes_snapshot"]) { db in
            for table in ["notes", "notes_snapshot"] {
                try db.execute(
                    sql: """
                        CREATE TABLE \(table) (
                            id TEXT PRIMARY KEY,
                            scope TEXT NOT NULL,
                            title TEXT NOT NULL DEFAULT '',
                            body TEXT NOT NULL DEFAULT '',
                            tags TEXT NOT NULL DEFAULT '[]',
                            pinned INTEGER NOT NULL DEFAULT 0,
                            view_count INTEGER NOT NULL DEFAULT 0,
                            checklist TEXT NOT NULL DEFAULT '[]',
                            deleted INTEGER NOT NULL DEFAULT 0,
                            created INTEGER NOT NULL DEFAULT 0,
                            state BLOB NOT NULL
                        )
                        """)
            }
            try db.execute(sql: "CREATE INDEX notes_by_scope ON notes (scope, deleted)")
        }
        // Copy-on-write snapshots: a note unchanged since the last snapshot is its own snapshot (changed = 0)
        // and has no row in notes_snapshot; the first write to it copies its row there. A prune then holds
        // the projection about once, not twice.
        migrations.register("notes.v2.copy-on-write", derivedTables: ["notes", "notes_snapshot"]) { db in
            let old = Self.columns.split(separator: ",").map { "OLD." + $0.trimmingCharacters(in: .whitespaces) }
                .joined(separator: ", ")
            try db.execute(
                sql: """
                    ALTER TABLE notes ADD COLUMN changed INTEGER NOT NULL DEFAULT 1;
                    CREATE TRIGGER notes_copy_on_update BEFORE UPDATE ON notes
                    WHEN OLD.changed = 0 AND NEW.changed = 1 BEGIN
                        INSERT OR REPLACE INTO notes_snapshot (\(Self.columns)) VALUES (\(old));
                    END;
                    CREATE TRIGGER notes_copy_on_delete BEFORE DELETE ON notes WHEN OLD.changed = 0 BEGIN
                        INSERT OR REPLACE INTO notes_snapshot (\(Self.columns)) VALUES (\(old));
                    END;
                    """)
        }
    }

    public func apply(_ events: [StoredEvent], in db: Database) throws {
        try cache.begin(db)
        var notes = NotesWorkingSet()
        try notes.load(for: events, from: db, cache: cache)
        try writeFolded(among: notes, db)
        notes.apply(events)
        try notes.save(to: db)
        cache.store(notes.notes)
    }

    /// Writes, as their own snapshot, the notes of `notes` that hold folded events in memory: before an
    /// event the log holds is applied to one, so that the snapshot its row's trigger copies holds them.
    func writeFolded(among notes: NotesWorkingSet, _ db: Database) throws {
        guard cache.holdsFolded else { return }
        var folded = NotesWorkingSet()
        for note in notes.notes where cache.isFolded(note.key) { folded.add(note) }
        guard !folded.notes.isEmpty else { return }
        try folded.save(to: db, asSnapshot: true)
        cache.markFoldedWritten(folded.notes)
    }

    // MARK: - Folding on arrival (ArrivalFoldingProjection)

    /// Notes whose row is their own snapshot (`changed = 0`) or that have none, and that hold no buffered
    /// event the log holds; streams that are not notes have nothing here.
    public func foldable(_ streams: Set<String>, in db: Database) throws -> Set<String> {
        try cache.begin(db)
        var foldable: Set<String> = []
        var unknown: [String: String] = [:]
        for stream in streams {
            guard let key = NoteID(stream), stream.hasPrefix("note:") else {
                foldable.insert(stream)
                continue
            }
            switch cache.rowState(key) {
            case .buffered: continue
            case .snapshot: foldable.insert(stream)
            case .changed: continue
            case .unknown: unknown[key.description] = stream
            }
        }
        let ids = Array(unknown.keys)
        for start in stride(from: 0, to: ids.count, by: 500) {
            let slice = Array(ids[start..<min(start + 500, ids.count)])
            var changed: Set<String> = []
            let rows = try Row.fetchCursor(
                db,
                sql: "SELECT id FROM notes WHERE changed = 1 AND id IN (\(databaseQuestionMarks(count: slice.count)))",
                arguments: StatementArguments(slice))
            while let row = try rows.next() { changed.insert(row[0]) }
            for id in slice where !changed.contains(id) { foldable.insert(unknown[id]!) }
        }
        return foldable
    }

    /// Applies folded events to the notes' state, which stays their snapshot: held in memory when
    /// `deferSaves` and the cache has room, written at once (`changed = 0`) otherwise.
    public func applyFolded(_ events: [StoredEvent], deferSaves: Bool, in db: Database) throws -> Bool {
        try cache.begin(db)
        var notes = NotesWorkingSet()
        try notes.load(for: events, from: db, cache: cache)
        notes.apply(events)
        if deferSaves, cache.markFolded(notes.notes) { return true }
        try notes.save(to: db, workers: notes.notes.count > 256 ? workers : 1, asSnapshot: true)
        cache.markFoldedWritten(notes.notes)
        return false
    }

    public var holdsFolded: Bool { cache.holdsFolded }

    public var foldedLoss: Bool { cache.foldedLoss }

    public func clearFoldedLoss() { cache.clearFoldedLoss() }

    public func snapshotStreams(scope: String, in db: Database) throws -> [String] {
        var streams: [String] = []
        let ids = try String.fetchCursor(
            db, sql: "SELECT id FROM notes WHERE scope = ? AND changed = 0", arguments: [scope])
        while let id = try ids.next() {
            if let note = NoteID(id) { streams.append(note.stream) }
        }
        return streams
    }

    // MARK: - Write-behind (BufferingProjection)

    /// Applies a page to the cached notes and marks them to be written later: a long pull then encodes and
    /// writes each note once per flush instead of once per page (which was most of applying a page). Past
    /// `cachedNotes` buffered notes, the page's notes are written at once instead.
    public func buffer(
        _ events: [StoredEvent], after position: Int64, through last: Int64, checkpoint: Int64, in db: Database
    ) throws -> Bool {
        guard cache.capacity > 0 else { return false }
        try cache.begin(db)
        guard cache.holds(position: position, checkpoint: checkpoint) else {
            cache.clear()
            return false
        }
        var notes = NotesWorkingSet()
        try notes.load(for: events, from: db, cache: cache)
        try writeFolded(among: notes, db)
        notes.apply(events)
        if !cache.markDirty(notes.notes, through: last) {
            try notes.save(to: db)
            cache.markClean(notes.notes, through: last)
        }
        return true
    }

    public var bufferedThrough: Int64? { cache.bufferedThrough }

    /// Buffered notes first, then notes holding folded events (written as their own snapshot), `limit` in all.
    public func flush(streams: Set<String>?, limit: Int, in db: Database) throws -> ProjectionFlush {
        try cache.begin(db)
        let keys = streams.map { Set($0.compactMap { NoteID($0) }) }
        var notes = NotesWorkingSet()
        for note in cache.dirtyNotes(among: keys, limit: limit) { notes.add(note) }
        try notes.save(to: db, workers: notes.notes.count > 256 ? workers : 1)
        let held = cache.markClean(notes.notes, through: nil)
        var folded = NotesWorkingSet()
        for note in cache.foldedNotes(among: keys, limit: limit - notes.notes.count) { folded.add(note) }
        try folded.save(to: db, workers: folded.notes.count > 256 ? workers : 1, asSnapshot: true)
        cache.markFoldedWritten(folded.notes)
        return ProjectionFlush(
            streams: Set(notes.notes.map(\.key.stream) + folded.notes.map(\.key.stream)), heldThrough: held)
    }

    /// Keeps every touched note's state in memory for the whole replay and saves each note once at the end,
    /// so a rebuild costs one load and one save per note instead of one per note per batch.
    public func applyStream(
        _ batches: (_ consume: ([StoredEvent]) throws -> Void) throws -> Void, in db: Database
    ) throws {
        cache.clear()
        var notes = NotesWorkingSet()
        try batches { events in
            try notes.load(for: events, from: db)
            notes.apply(events)
        }
        try notes.save(to: db, workers: workers)
    }

    /// Rebuilds and catch-up: every row's payload read from its bytes, each note loaded on first sight and
    /// saved once at the end. Rows are gathered in batches that `workers` threads apply, split by note, while
    /// this thread reads the next batch.
    public func replay(
        _ rows: (_ consume: (ReplayedEvent) throws -> Void) throws -> Void, in db: Database
    ) throws {
        cache.clear()
        var notes = NotesWorkingSet()
        let pipeline = NotesReplayPipeline(workers: workers)
        defer {
            // Batches refer to the notes without owning them: the working set must outlive every batch.
            pipeline.finish()
            withExtendedLifetime(notes) {}
        }
        var batch = pipeline.firstBatch()
        try rows { event in
            // A note.* type this version does not know still gives its note a row (as incremental application
            // does), and changes nothing in it.
            let kind = NoteEventType(utf8: event.typeBytes)
            guard kind != nil || event.typeBytes.starts(with: NoteEventType.prefix.utf8),
                let slot = try notes.slot(of: event, db), let kind
            else { return }
            batch.append(notes.notes[slot], slot: slot, kind: kind, event)
            if batch.isFull { batch = pipeline.submit(batch) }
        }
        _ = pipeline.submit(batch, last: true)
        pipeline.finish()
        try notes.save(to: db, workers: workers)
        // Freeing thousands of note states takes a while: another thread does it while this one commits.
        // Nothing refers to the notes any more (the pipeline is finished, the rows are written).
        nonisolated(unsafe) let retired = notes
        notes = NotesWorkingSet()
        DispatchQueue.global().async { withExtendedLifetime(retired) {} }
    }

    /// Rows changed since the snapshot go; the copies of their snapshot state come back (a note absent from
    /// the snapshot has none, and stays gone); unchanged rows are their own snapshot and stay.
    public func restoreSnapshot(streams: Set<String>?, in db: Database) throws {
        cache.clear()
        var filter = ""
        var arguments = StatementArguments()
        if let streams {
            let ids = streams.compactMap { NoteID($0)?.description }
            guard !ids.isEmpty else { return }
            filter = " AND id IN (\(databaseQuestionMarks(count: ids.count)))"
            arguments = StatementArguments(ids)
        }
        try db.execute(sql: "DELETE FROM notes WHERE changed = 1\(filter)", arguments: arguments)
        try db.execute(
            sql: """
                INSERT INTO notes (\(Self.columns), changed) SELECT \(Self.columns), 0 FROM notes_snapshot
                WHERE 1\(filter)
                """, arguments: arguments)
        try db.execute(sql: "DELETE FROM notes_snapshot WHERE 1\(filter)", arguments: arguments)
    }

    /// Every row becomes its own snapshot: nothing is copied until a row changes again.
    public func saveSnapshot(in db: Database) throws {
        try db.execute(sql: "DELETE FROM notes_snapshot")
        try db.execute(sql: "UPDATE notes SET changed = 0 WHERE changed = 1")
    }

    /// A stable fold purges as the server's compaction does: deleted notes go, and every other note's state
    /// drops its tombstones (`NoteState.compactStable`); what the notes show does not change.
    public func saveSnapshot(in db: Database, stable: Bool) throws {
        if stable {
            cache.clear()
            try Self.purgeStable(filter: "", [], db)
        }
        try saveSnapshot(in: db)
    }

    /// The notes of `streams` become their own snapshot (their copies in `notes_snapshot` go); a stable fold
    /// first purges them as `saveSnapshot(in:stable:)` does. Other notes' snapshots stay as they were.
    public func saveSnapshot(streams: Set<String>, stable: Bool, in db: Database) throws {
        cache.clear()
        let ids = streams.compactMap { NoteID($0)?.description }
        for start in stride(from: 0, to: ids.count, by: 500) {
            let slice = Array(ids[start..<min(start + 500, ids.count)])
            let filter = " AND id IN (\(databaseQuestionMarks(count: slice.count)))"
            let arguments = StatementArguments(slice)
            if stable { try Self.purgeStable(filter: filter, arguments, db) }
            try db.execute(sql: "DELETE FROM notes_snapshot WHERE 1\(filter)", arguments: arguments)
            try db.execute(sql: "UPDATE notes SET changed = 0 WHERE changed = 1\(filter)", arguments: arguments)
        }
    }

    /// The snapshot state of each note of `streams` (its copy in `notes_snapshot`, or its row when unchanged
    /// since the snapshot, or none) takes `events`; the row is marked changed, so that it keeps its current
    /// state and a restore returns to the new copy. A stable fold purges the copy (a deleted note has none),
    /// and the row of the tombstones of the folded operations (`NoteState.compactStable(through:)`).
    public func foldIntoSnapshot(_ events: [StoredEvent], streams: Set<String>, stable: Bool, in db: Database) throws {
        let keys = streams.compactMap { NoteID($0) }.sorted()
        guard !keys.isEmpty else { return }
        let copy = try db.cachedStatement(sql: "SELECT scope, state FROM notes_snapshot WHERE id = ?")
        let row = try db.cachedStatement(sql: "SELECT scope, state FROM notes WHERE id = ? AND changed = 0")
        let markChanged = try db.cachedStatement(sql: "UPDATE notes SET changed = 1 WHERE id = ? AND changed = 0")
        let dropCopy = try db.cachedStatement(sql: "DELETE FROM notes_snapshot WHERE id = ?")
        var notes = NotesWorkingSet()
        for key in keys {
            let note = NotesWorkingSet.Note(key: key, scope: nil)
            if let stored = try Row.fetchOne(copy, arguments: [note.id]) ?? Row.fetchOne(row, arguments: [note.id]) {
                note.scope = stored[0]
                note.state = try NotesWorkingSet.state(stored, 1)
            }
            notes.add(note)
        }
        notes.apply(events)
        let current = try db.cachedStatement(sql: "SELECT state FROM notes WHERE id = ?")
        let compact = try db.cachedStatement(sql: "UPDATE notes SET state = ? WHERE id = ?")
        let insert = try NotesRowInsert(snapshotOf: db)
        defer { insert.finish() }
        for note in notes.notes {
            // The row's copy-on-write trigger copies the old snapshot state first; the new one replaces it.
            try markChanged.execute(arguments: [note.id])
            if stable {
                // The row drops what the fold drops too (the tombstones of the folded operations), keeping
                // what its later operations need: what it shows does not change.
                if let row = try Row.fetchOne(current, arguments: [note.id]) {
                    var state = try NotesWorkingSet.state(row, 0)
                    if state.compactStable(through: note.state) {
                        try compact.execute(arguments: [Data(state.binaryEncoded), note.id])
                        cache.clear()
                    }
                }
                _ = note.state.compactStable()
                if note.state.deleted.value ?? false {
                    try dropCopy.execute(arguments: [note.id])
                    continue
                }
            }
            guard note.scope != nil else {
                // No event of the note folded (none of its events is a note event): nothing to keep.
                try dropCopy.execute(arguments: [note.id])
                continue
            }
            try insert.execute(NoteState.savedRow(of: &note.state, id: note.id, scope: note.scope ?? ""))
        }
    }

    /// Deletes the deleted notes among those `filter` selects (` AND …`), and drops the tombstones of the
    /// others' states (`NoteState.compactStable`).
    static func purgeStable(filter: String, _ arguments: StatementArguments, _ db: Database) throws {
        try db.execute(sql: "DELETE FROM notes WHERE deleted = 1\(filter)", arguments: arguments)
        let rows = try Row.fetchCursor(db, sql: "SELECT id, state FROM notes WHERE 1\(filter)", arguments: arguments)
        var compacted: [(String, Data)] = []
        while let row = try rows.next() {
            let data: Data = row[1]
            var state = try NoteState(stored: [UInt8](data))
            if state.compactStable() { compacted.append((row[0], Data(state.binaryEncoded))) }
        }
        // Each compacted note moves to the end of the table (deleted, then inserted again with a new rowid)
        // instead of shrinking in place: shrunk rows left a third of the pages they were on unused, while the
        // pages a move empties go back to the file at the next incremental vacuum.
        let read = try db.cachedStatement(sql: "SELECT \(Self.columns), changed FROM notes WHERE id = ?")
        let delete = try db.cachedStatement(sql: "DELETE FROM notes WHERE id = ?")
        let insert = try db.cachedStatement(
            sql: "INSERT INTO notes (\(Self.columns), changed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        for (id, state) in compacted {
            guard let row = try Row.fetchOne(read, arguments: [id]) else { continue }
            var values = Array(row.databaseValues)
            values[10] = state.databaseValue
            try delete.execute(arguments: [id])
            try insert.execute(arguments: StatementArguments(values))
        }
    }

    /// Deleted notes: a stable fold purges them, and no edit can follow a delete every replica has seen.
    public func retiredStreams(in db: Database) throws -> Set<String> {
        var streams: Set<String> = []
        let ids = try String.fetchCursor(db, sql: "SELECT id FROM notes WHERE deleted = 1")
        while let id = try ids.next() {
            if let note = NoteID(id) { streams.insert(note.stream) }
        }
        return streams
    }

    /// The deleted notes among `streams`, each looked up by its id.
    public func retiredStreams(among streams: Set<String>, in db: Database) throws -> Set<String> {
        var retired: Set<String> = []
        let deleted = try db.cachedStatement(sql: "SELECT deleted FROM notes WHERE id = ?")
        for stream in streams {
            guard let note = NoteID(stream), stream.hasPrefix("note:") else { continue }
            if try Bool.fetchOne(deleted, arguments: [note.description]) == true { retired.insert(stream) }
        }
        return retired
    }

    public func discardSnapshot(in db: Database) throws {
        cache.clear()
        // Marking rows changed copies them into notes_snapshot first (the trigger); then none is kept.
        try db.execute(sql: "UPDATE notes SET changed = 1 WHERE changed = 0")
        try db.execute(sql: "DELETE FROM notes_snapshot")
    }

    // MARK: - Reading

    /// The CRDT state of one note, or nil if no event of it was applied.
    public static func state(of id: NoteID, in db: Database) throws -> NoteState? {
        guard let data = try Data.fetchOne(db, sql: "SELECT state FROM notes WHERE id = ?", arguments: [id.description])
        else { return nil }
        return try NoteState(stored: [UInt8](data))
    }

    /// Every note's plain values, keyed by note id.
    public static func views(in db: Database) throws -> [String: NoteView] {
        var views: [String: NoteView] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT id, state FROM notes") {
            let data: Data = row["state"]
            views[row["id"]] = try NoteState(stored: [UInt8](data)).view
        }
        return views
    }

    /// Canonical JSON (sorted keys) of the plain values of every note an app shows (created, not deleted):
    /// two replicas that converged print identical bytes, whether they still hold a deleted note's
    /// tombstone or compaction dropped it.
    public static func exportState(in db: Database) throws -> Data {
        var views: [String: NoteView] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT id, state FROM notes") {
            let data: Data = row["state"]
            let state = try NoteState(stored: [UInt8](data))
            if state.isLive { views[row["id"]] = state.view }
        }
        return try CanonicalJSON.encode(views)
    }

    /// Live (created and not deleted) notes of `scope`.
    public static func liveCount(scope: Scope, in db: Database) throws -> Int {
        try Int.fetchOne(
            db, sql: "SELECT count(*) FROM notes WHERE scope = ? AND created = 1 AND deleted = 0",
            arguments: [scope.name]
        ) ?? 0
    }
}

/// The notes a batch of events touches, loaded once and saved once.
struct NotesWorkingSet {
    /// One note's state while events are applied: a class, so that a replay batch can carry it to the worker
    /// thread that applies its events while this working set keeps growing, and so that `NoteStateCache`
    /// hands the writer the same object to change in place rather than a copy of the whole state.
    ///
    /// `@unchecked Sendable`: a note is changed only inside the store's write transaction (one at a time,
    /// on whichever thread GRDB runs it) or by a replay's worker while the writer waits for it
    /// (`NotesReplayBatch`); the cache keeps it between transactions and drops it if one rolls back.
    final class Note: @unchecked Sendable {
        let key: NoteID
        var scope: String?
        var state: NoteState
        /// Whether the note's row is its own snapshot (`changed = 0`) or it has none, as of the last load
        /// or write; nil when not known.
        var rowIsSnapshot: Bool?

        init(key: NoteID, scope: String?, state: NoteState = NoteState(), rowIsSnapshot: Bool? = nil) {
            self.key = key
            self.scope = scope
            self.state = state
            self.rowIsSnapshot = rowIsSnapshot
        }

        /// The note's id as its row stores it (made when needed, on the thread that saves the note).
        var id: String { key.description }

        func apply(_ event: StoredEvent) {
            if scope == nil { scope = event.event.scope.name }
            // The bytes the log holds: the payload is not encoded again to decode it.
            event.withPayloadBytes { bytes in
                state.apply(type: event.event.type, payloadBytes: bytes, hlc: event.event.hlc, dot: event.event.dot)
            }
        }
    }

    var notes: [Note] = []
    /// Index in `notes` by note id (parsed from the stream name, so one lookup per event).
    var slots: [NoteID: Int] = [:]
    /// Whether the notes table held no row when first asked (a rebuild without snapshot): then no note
    /// needs loading. Rows this working set saves come only at the end.
    var tableEmpty: Bool?

    /// Adds a note and returns its slot.
    @discardableResult
    mutating func add(_ note: Note) -> Int {
        notes.append(note)
        slots[note.key] = notes.count - 1
        return notes.count - 1
    }

    /// The slot of a replayed event's note, loading its stored state on first sight; nil for streams that are
    /// not notes.
    mutating func slot(of event: ReplayedEvent, _ db: Database) throws -> Int? {
        guard let key = NoteID(utf8: event.streamBytes) else { return nil }
        if let slot = slots[key] { return slot }
        let note = Note(key: key, scope: event.scope)
        if tableEmpty == nil {
            tableEmpty = try !(Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM notes)") ?? false)
        }
        if tableEmpty == false,
            let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT scope, state FROM notes WHERE id = ?"), arguments: [note.id])
        {
            note.scope = row[0] as String? ?? note.scope
            note.state = try Self.state(row, 1)
        }
        return add(note)
    }

    static func state(_ row: Row, _ index: Int) throws -> NoteState {
        try row.withUnsafeData(atIndex: index) { data in try NoteState(stored: data.map { [UInt8]($0) } ?? []) }
    }

    /// Loads, in a few queries, the stored state of the notes `events` touch that are not loaded yet (from
    /// `cache` when it holds them).
    mutating func load(for events: [StoredEvent], from db: Database, cache: NoteStateCache? = nil) throws {
        var missing: [String: NoteID] = [:]
        for stored in events where stored.event.type.hasPrefix(NoteEventType.prefix) {
            guard let key = NoteID(stored.event.stream), slots[key] == nil, missing[key.description] == nil
            else { continue }
            if let cached = cache?.note(key) {
                add(cached)
            } else {
                missing[key.description] = key
            }
        }
        guard !missing.isEmpty else { return }
        var loaded: [String: (scope: String, state: NoteState, changed: Bool)] = [:]
        let list = Array(missing.keys)
        for chunk in stride(from: 0, to: list.count, by: 500) {
            let slice = Array(list[chunk..<min(chunk + 500, list.count)])
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT id, scope, state, changed FROM notes WHERE id IN (\(databaseQuestionMarks(count: slice.count)))
                    """,
                arguments: StatementArguments(slice))
            while let row = try rows.next() { loaded[row[0]] = (row[1], try Self.state(row, 2), row[3]) }
        }
        for (id, key) in missing {
            let found = loaded[id]
            add(
                Note(
                    key: key, scope: found?.scope, state: found?.state ?? NoteState(),
                    rowIsSnapshot: !(found?.changed ?? false)))
        }
    }

    /// Applies events whose notes `load` loaded.
    mutating func apply(_ events: [StoredEvent]) {
        for stored in events {
            guard stored.event.type.hasPrefix(NoteEventType.prefix), let key = NoteID(stored.event.stream),
                let slot = slots[key]
            else { continue }
            notes[slot].apply(stored)
        }
    }

    /// Writes every note of the working set, in id order. Each row's values (read columns and encoded
    /// state) are computed on up to `workers` threads while this thread inserts the rows computed before it.
    /// With `asSnapshot`, the rows stay their own snapshot (`changed = 0`): for notes holding only folded
    /// events since their snapshot.
    func save(to db: Database, workers: Int = 1, asSnapshot: Bool = false) throws {
        guard !notes.isEmpty else { return }
        for note in notes { note.rowIsSnapshot = asSnapshot }
        let order = notes.indices.sorted { notes[$0].key < notes[$1].key }
        let insert = try NotesRowInsert(db, asSnapshot: asSnapshot)
        defer { insert.finish() }
        try notes.withUnsafeBufferPointer { notes in
            try order.withUnsafeBufferPointer { order in
                let rows = NotesRowProducer(notes: notes, order: order)
                try rows.produce(workers: workers) { row in try insert.execute(row) }
            }
        }
    }
}

/// Decoded note states, as the last transaction of this store's writer left them, and the notes whose rows
/// are behind them (buffered, see `NotesProjection.buffer`).
///
/// Applying a page of pulled events touches a few hundred notes; loading each of them from its row means
/// decoding its whole CRDT state, which was the largest single cost of applying a page (a quarter of it,
/// measured with `sync-bench bootstrap`). The cache keeps the notes the writer just applied, so the next page
/// finds most of them decoded, and changes them in place.
///
/// It never serves a state other than the table's, or, for a buffered note, the table's plus the events
/// buffered since:
/// - it is written inside the transaction, and emptied (buffered notes included) when that transaction
///   rolls back;
/// - it is emptied when another connection (another process on the same file) has committed since it was
///   filled, which SQLite's `PRAGMA data_version` tells;
/// - it is emptied by every other way the projection changes rows (rebuilds, catch-up, snapshot restores);
/// - past `capacity` notes, clean ones are dropped all at once rather than one by one; buffered ones stay
///   until written.
/// Emptying it loses buffered notes, never their events: the projection's checkpoint is still where the
/// rows hold everything, and the store catches the rows up from there.
final class NoteStateCache: Sendable {
    private struct Storage: Sendable {
        var dataVersion: Int64?
        var notes: [NoteID: NotesWorkingSet.Note] = [:]
        /// Notes whose rows are behind their state here.
        var dirty: Set<NoteID> = []
        /// The log position buffered notes hold; nil when none is buffered.
        var heldThrough: Int64?
        /// Notes whose rows are behind their state here by folded events only (see `ArrivalFoldingProjection`):
        /// each row is its own snapshot and stays one when written.
        var folded: Set<NoteID> = []
        /// Whether folded notes were dropped unwritten since the store last dealt with it.
        var foldedLost = false

        mutating func dropClean(toFit capacity: Int) {
            guard notes.count > capacity else { return }
            notes = notes.filter { dirty.contains($0.key) || folded.contains($0.key) }
        }

        /// Empties the cache, keeping `dataVersion`; folded notes dropped unwritten are a loss.
        mutating func empty() {
            let version = dataVersion
            let lost = foldedLost || !folded.isEmpty
            self = Storage()
            dataVersion = version
            foldedLost = lost
        }
    }

    /// What the cache knows of a note's row (`NotesProjection.foldable`).
    enum RowState {
        /// Behind by buffered events the log holds.
        case buffered
        /// Its own snapshot (or no row), possibly behind by folded events held here.
        case snapshot
        /// Changed since its snapshot.
        case changed
        /// Not here, or not known.
        case unknown
    }

    let capacity: Int
    private let storage = Mutex(Storage())

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// Called at the start of each apply, buffer and flush, inside the writer's transaction: drops everything
    /// if another connection committed since the cache was filled, and empties the cache if this transaction
    /// rolls back.
    func begin(_ db: Database) throws {
        guard capacity > 0 else { return }
        let version = try Int64.fetchOne(db, sql: "PRAGMA data_version") ?? 0
        storage.withLock { storage in
            if storage.dataVersion != version {
                storage.empty()
                storage.dataVersion = version
            }
        }
        db.afterNextTransaction(onCommit: { _ in }, onRollback: { [weak self] _ in self?.clear() })
    }

    func note(_ key: NoteID) -> NotesWorkingSet.Note? {
        storage.withLock { $0.notes[key] }
    }

    /// Whether the notes here and the rows together hold the log's state at `position`, the rows being at
    /// `checkpoint`.
    func holds(position: Int64, checkpoint: Int64) -> Bool {
        storage.withLock { $0.dirty.isEmpty ? checkpoint == position : $0.heldThrough == position }
    }

    var bufferedThrough: Int64? {
        storage.withLock { $0.dirty.isEmpty ? nil : $0.heldThrough }
    }

    /// Keeps the states just saved.
    func store(_ notes: [NotesWorkingSet.Note]) {
        guard capacity > 0 else { return }
        storage.withLock { storage in
            guard notes.count <= capacity else { return }
            for note in notes { storage.notes[note.key] = note }
            storage.dropClean(toFit: capacity)
        }
    }

    /// Marks `notes`, which hold the log's state at `last`, as buffered; false, changing nothing, when that
    /// would buffer more than `capacity` notes.
    func markDirty(_ notes: [NotesWorkingSet.Note], through last: Int64) -> Bool {
        storage.withLock { storage in
            let added = notes.reduce(0) { $0 + (storage.dirty.contains($1.key) ? 0 : 1) }
            guard storage.dirty.count + storage.folded.count + added <= capacity else { return false }
            for note in notes {
                storage.notes[note.key] = note
                storage.dirty.insert(note.key)
            }
            storage.heldThrough = last
            storage.dropClean(toFit: capacity)
            return true
        }
    }

    /// Marks `notes`, just written, as clean; when `last` is given, the log position every note here holds
    /// now. Returns the position the rows hold in full when no buffered note remains.
    @discardableResult
    func markClean(_ notes: [NotesWorkingSet.Note], through last: Int64?) -> Int64? {
        storage.withLock { storage in
            if let last { storage.heldThrough = last }
            for note in notes {
                storage.dirty.remove(note.key)
                storage.notes[note.key] = note
            }
            storage.dropClean(toFit: capacity)
            guard storage.dirty.isEmpty, let held = storage.heldThrough else { return nil }
            storage.heldThrough = nil
            return held
        }
    }

    /// Up to `limit` buffered notes (those among `keys` when given), in id order.
    func dirtyNotes(among keys: Set<NoteID>?, limit: Int) -> [NotesWorkingSet.Note] {
        storage.withLock { storage in
            let candidates = keys.map { $0.intersection(storage.dirty) } ?? storage.dirty
            return candidates.sorted().prefix(max(0, limit)).compactMap { storage.notes[$0] }
        }
    }

    func clear() {
        storage.withLock { $0.empty() }
    }

    // MARK: Folded notes

    func rowState(_ key: NoteID) -> RowState {
        storage.withLock { storage in
            if storage.dirty.contains(key) { return .buffered }
            if storage.folded.contains(key) { return .snapshot }
            switch storage.notes[key]?.rowIsSnapshot {
            case true?: return .snapshot
            case false?: return .changed
            case nil: return .unknown
            }
        }
    }

    var holdsFolded: Bool { storage.withLock { !$0.folded.isEmpty } }

    var foldedLoss: Bool { storage.withLock { $0.foldedLost } }

    func clearFoldedLoss() { storage.withLock { $0.foldedLost = false } }

    func isFolded(_ key: NoteID) -> Bool { storage.withLock { $0.folded.contains(key) } }

    /// Marks `notes` as holding folded events not written; false, changing nothing, when that would hold more
    /// than `capacity` notes unwritten.
    func markFolded(_ notes: [NotesWorkingSet.Note]) -> Bool {
        guard capacity > 0 else { return false }
        return storage.withLock { storage in
            let added = notes.reduce(0) { $0 + (storage.folded.contains($1.key) ? 0 : 1) }
            guard storage.dirty.count + storage.folded.count + added <= capacity else { return false }
            for note in notes {
                storage.notes[note.key] = note
                storage.folded.insert(note.key)
            }
            storage.dropClean(toFit: capacity)
            return true
        }
    }

    /// Marks `notes`, just written as their own snapshot, as clean.
    func markFoldedWritten(_ notes: [NotesWorkingSet.Note]) {
        storage.withLock { storage in
            for note in notes {
                storage.folded.remove(note.key)
                if capacity > 0 { storage.notes[note.key] = note }
            }
            storage.dropClean(toFit: capacity)
        }
    }

    /// Up to `limit` notes holding folded events (those among `keys` when given), in id order.
    func foldedNotes(among keys: Set<NoteID>?, limit: Int) -> [NotesWorkingSet.Note] {
        storage.withLock { storage in
            let candidates = keys.map { $0.intersection(storage.folded) } ?? storage.folded
            return candidates.sorted().prefix(max(0, limit)).compactMap { storage.notes[$0] }
        }
    }
}
