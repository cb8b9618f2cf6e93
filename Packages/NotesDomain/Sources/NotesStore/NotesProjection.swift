import Foundation
import GRDB
import NotesDomain
import SyncEventStore
import SyncModels
import SyncStorage

/// The `notes` projection: per note, its CRDT state (`state`, the binary form of `NoteState`; rows written
/// before it hold canonical JSON, which still reads) and plain read
/// columns an app can query with SQL (`title`, `body`, `tags` as a JSON array, `pinned`, `view_count`,
/// `checklist` as JSON, `deleted`).
///
/// Applying a batch loads each touched note once, applies its events in memory and writes it back once,
/// so rebuilds cost one read and one write per note per batch rather than per event.
public struct NotesProjection: RowReplayingProjection {
    public let name = "notes"
    public let version = NoteState.version

    public init() {}

    static let columns = "id, scope, title, body, tags, pinned, view_count, checklist, deleted, created, state"

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
    }

    public func apply(_ events: [StoredEvent], in db: Database) throws {
        var notes = NotesWorkingSet()
        try notes.load(for: events, from: db)
        notes.apply(events)
        try notes.save(to: db)
    }

    /// Keeps every touched note's state in memory for the whole replay and saves each note once at the end,
    /// so a rebuild costs one load and one save per note instead of one per note per batch.
    public func applyStream(
        _ batches: (_ consume: ([StoredEvent]) throws -> Void) throws -> Void, in db: Database
    ) throws {
        var notes = NotesWorkingSet()
        try batches { events in
            try notes.load(for: events, from: db)
            notes.apply(events)
        }
        try notes.save(to: db)
    }

    /// Rebuilds and catch-up: every row applied from its payload bytes in place, each note loaded on first
    /// sight and saved once at the end.
    public func replay(
        _ rows: (_ consume: (ReplayedEvent) throws -> Void) throws -> Void, in db: Database
    ) throws {
        var notes = NotesWorkingSet()
        try rows { event in
            guard event.type.hasPrefix(NoteEventType.prefix), let slot = try notes.slot(of: event.stream, db) else {
                return
            }
            notes.notes[slot].apply(event)
        }
        try notes.save(to: db)
    }

    public func restoreSnapshot(streams: Set<String>?, in db: Database) throws {
        if let streams {
            let ids = streams.compactMap { NoteID($0)?.description }
            guard !ids.isEmpty else { return }
            let marks = databaseQuestionMarks(count: ids.count)
            try db.execute(sql: "DELETE FROM notes WHERE id IN (\(marks))", arguments: StatementArguments(ids))
            try db.execute(
                sql: "INSERT INTO notes SELECT * FROM notes_snapshot WHERE id IN (\(marks))",
                arguments: StatementArguments(ids))
        } else {
            try db.execute(sql: "DELETE FROM notes")
            try db.execute(sql: "INSERT INTO notes SELECT * FROM notes_snapshot")
        }
    }

    public func saveSnapshot(in db: Database) throws {
        try db.execute(sql: "DELETE FROM notes_snapshot")
        try db.execute(sql: "INSERT INTO notes_snapshot SELECT * FROM notes")
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

    /// Canonical JSON (sorted keys) of every note's plain values: two replicas that converged print
    /// identical bytes.
    public static func exportState(in db: Database) throws -> Data {
        try CanonicalJSON.encode(views(in: db))
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
    struct Note {
        var id: String
        var scope: String?
        var state = NoteState()

        mutating func apply(_ event: StoredEvent) {
            if scope == nil { scope = event.event.scope.name }
            state.apply(
                type: event.event.type, payload: event.event.payload, hlc: event.event.hlc, dot: event.event.dot)
        }

        mutating func apply(_ event: ReplayedEvent) {
            if scope == nil { scope = event.scope }
            state.apply(type: event.type, payloadBytes: event.payload, hlc: event.hlc, dot: event.dot)
        }
    }

    var notes: [Note] = []
    /// Index in `notes` by stream name (one lookup per event), and by note id.
    var slots: [String: Int] = [:]
    var byID: [String: Int] = [:]
    /// Streams that are not notes.
    var others: Set<String> = []
    /// Whether the notes table held no row when first asked (a rebuild without snapshot): then no note
    /// needs loading. Rows this working set saves come only at the end.
    var tableEmpty: Bool?

    enum Lookup {
        case slot(Int)
        /// A note not in the working set yet.
        case missing(id: String)
        /// Not a note's stream.
        case other
    }

    /// Where a stream's note is in the working set.
    mutating func lookup(_ stream: String) -> Lookup {
        if let slot = slots[stream] { return .slot(slot) }
        guard !others.contains(stream) else { return .other }
        guard let id = NoteID(stream)?.description else {
            others.insert(stream)
            return .other
        }
        guard let slot = byID[id] else { return .missing(id: id) }
        slots[stream] = slot
        return .slot(slot)
    }

    /// Adds a note reached by `stream` and returns its slot.
    @discardableResult
    mutating func add(_ note: Note, stream: String) -> Int {
        notes.append(note)
        slots[stream] = notes.count - 1
        byID[note.id] = notes.count - 1
        return notes.count - 1
    }

    /// The slot of a stream's note, loading its stored state on first sight; nil for streams that are not notes.
    mutating func slot(of stream: String, _ db: Database) throws -> Int? {
        let id: String
        switch lookup(stream) {
        case .slot(let slot): return slot
        case .other: return nil
        case .missing(let missing): id = missing
        }
        var note = Note(id: id)
        if tableEmpty == nil {
            tableEmpty = try !(Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM notes)") ?? false)
        }
        if tableEmpty == false,
            let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT scope, state FROM notes WHERE id = ?"), arguments: [id])
        {
            note.scope = row[0]
            note.state = try Self.state(row, 1)
        }
        return add(note, stream: stream)
    }

    static func state(_ row: Row, _ index: Int) throws -> NoteState {
        try row.withUnsafeData(atIndex: index) { data in try NoteState(stored: data.map { [UInt8]($0) } ?? []) }
    }

    /// Loads, in a few queries, the stored state of the notes `events` touch that are not loaded yet.
    mutating func load(for events: [StoredEvent], from db: Database) throws {
        var missing: [String: String] = [:]
        for stored in events where stored.event.type.hasPrefix(NoteEventType.prefix) {
            if case .missing(let id) = lookup(stored.event.stream) { missing[id] = stored.event.stream }
        }
        guard !missing.isEmpty else { return }
        var loaded: [String: (scope: String, state: NoteState)] = [:]
        let list = Array(missing.keys)
        for chunk in stride(from: 0, to: list.count, by: 500) {
            let slice = Array(list[chunk..<min(chunk + 500, list.count)])
            let rows = try Row.fetchCursor(
                db,
                sql: "SELECT id, scope, state FROM notes WHERE id IN (\(databaseQuestionMarks(count: slice.count)))",
                arguments: StatementArguments(slice))
            while let row = try rows.next() { loaded[row[0]] = (row[1], try Self.state(row, 2)) }
        }
        for (id, stream) in missing {
            add(Note(id: id, scope: loaded[id]?.scope, state: loaded[id]?.state ?? NoteState()), stream: stream)
        }
    }

    /// Applies events whose notes `load` loaded.
    mutating func apply(_ events: [StoredEvent]) {
        for stored in events {
            guard stored.event.type.hasPrefix(NoteEventType.prefix), case .slot(let slot) = lookup(stored.event.stream)
            else { continue }
            notes[slot].apply(stored)
        }
    }

    func save(to db: Database) throws {
        let statement = try db.cachedStatement(
            sql: """
                INSERT INTO notes (\(NotesProjection.columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET title = excluded.title, body = excluded.body, tags = excluded.tags,
                    pinned = excluded.pinned, view_count = excluded.view_count, checklist = excluded.checklist,
                    deleted = excluded.deleted, created = excluded.created, state = excluded.state
                """)
        for note in notes.sorted(by: { $0.id < $1.id }) {
            let view = note.state.view
            try statement.execute(arguments: [
                note.id, note.scope ?? "", view.title, view.body, view.tagsJSON, view.pinned, view.viewCount,
                view.checklistJSON, view.deleted, note.state.created, Data(note.state.binaryEncoded),
            ])
        }
    }
}

extension NoteView {
    /// The `tags` read column: a JSON array of the sorted tags.
    var tagsJSON: String {
        String(decoding: JSONValue.array(tags.map(JSONValue.string)).canonicalData(), as: UTF8.self)
    }

    /// The `checklist` read column: a JSON array of `{"done", "id", "text"}` in list order.
    var checklistJSON: String {
        let items = checklist.map { item -> JSONValue in
            ["id": .string(item.id), "text": .string(item.text), "done": .bool(item.done)]
        }
        return String(decoding: JSONValue.array(items).canonicalData(), as: UTF8.self)
    }
}
