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
public struct NotesProjection: Projection {
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
    var states: [String: NoteState] = [:]
    var scopes: [String: String] = [:]
    /// Note id (the row key) by stream name, so each event costs one lookup rather than a UUID parse.
    var ids: [String: String] = [:]

    /// The note id of a stream, nil for streams that are not notes.
    mutating func id(of stream: String) -> String? {
        if let id = ids[stream] { return id }
        guard let id = NoteID(stream)?.description else { return nil }
        ids[stream] = id
        return id
    }

    /// Loads the stored state of the notes `events` touch that are not loaded yet.
    mutating func load(for events: [StoredEvent], from db: Database) throws {
        var missing = Set<String>()
        for stored in events where stored.event.type.hasPrefix(NoteEventType.prefix) {
            if let id = id(of: stored.event.stream), scopes[id] == nil { missing.insert(id) }
        }
        guard !missing.isEmpty else { return }
        let list = Array(missing)
        for chunk in stride(from: 0, to: list.count, by: 500) {
            let slice = Array(list[chunk..<min(chunk + 500, list.count)])
            let rows = try Row.fetchCursor(
                db,
                sql: "SELECT id, scope, state FROM notes WHERE id IN (\(databaseQuestionMarks(count: slice.count)))",
                arguments: StatementArguments(slice))
            while let row = try rows.next() {
                let id: String = row[0]
                states[id] = try row.withUnsafeData(atIndex: 2) { data in
                    try NoteState(stored: data.map { [UInt8]($0) } ?? [])
                }
                scopes[id] = row[1]
            }
        }
    }

    mutating func apply(_ events: [StoredEvent]) {
        for stored in events {
            let event = stored.event
            guard event.type.hasPrefix(NoteEventType.prefix), let id = id(of: event.stream) else { continue }
            if scopes[id] == nil { scopes[id] = event.scope.name }
            states[id, default: NoteState()].apply(
                type: event.type, payload: event.payload, hlc: event.hlc, dot: event.dot)
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
        for id in states.keys.sorted() {
            let state = states[id]!
            let view = state.view
            try statement.execute(arguments: [
                id, scopes[id] ?? "", view.title, view.body, view.tagsJSON, view.pinned, view.viewCount,
                view.checklistJSON, view.deleted, state.created, Data(state.binaryEncoded),
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
