import Foundation
import GRDB
import NotesDomain
import SyncEventStore
import SyncModels
import SyncStorage

/// The `notes` projection: the generic per-stream state projection (`StreamStateProjection`) with the notes
/// model. Per note, its CRDT state (`state`, the binary form of `NoteState`; rows written before it hold
/// canonical JSON, which still reads) and plain read columns an app can query with SQL (`title`, `body`,
/// `tags` as a JSON array, `pinned`, `view_count`, `checklist` as JSON, `deleted`, `created`, and
/// `title_conflict`: NULL, or the open title conflict's values as a JSON array of
/// `{"hlc", "replica", "value"}`, the shown title first).
public typealias NotesProjection = StreamStateProjection<NotesModel>

/// What the notes domain gives `StreamStateProjection`: a note's state is `NoteState`, its stream
/// `note:<id>`, its row keyed by the id. Rows are made on worker threads and bound in place
/// (`NotesRows.swift`), and replays apply the log's rows without decoding events: a note's state is large,
/// and these were most of a long pull's and a rebuild's time.
public struct NotesModel: StreamStateReplayModel {
    public init() {}

    public var name: String { "notes" }
    public var version: Int { NoteState.version }
    public var table: String { "notes" }
    public var keyColumn: String { "id" }
    public var columns: [StreamStateColumn] {
        [
            StreamStateColumn("title", "TEXT NOT NULL DEFAULT ''"),
            StreamStateColumn("body", "TEXT NOT NULL DEFAULT ''"),
            StreamStateColumn("tags", "TEXT NOT NULL DEFAULT '[]'"),
            StreamStateColumn("pinned", "INTEGER NOT NULL DEFAULT 0"),
            StreamStateColumn("view_count", "INTEGER NOT NULL DEFAULT 0"),
            StreamStateColumn("checklist", "TEXT NOT NULL DEFAULT '[]'"),
            StreamStateColumn("deleted", "INTEGER NOT NULL DEFAULT 0"),
            StreamStateColumn("created", "INTEGER NOT NULL DEFAULT 0"),
            StreamStateColumn("title_conflict", "TEXT"),
        ]
    }
    /// A deleted note: nothing can be appended to it once every replica has seen its end.
    public var retiredColumn: String? { "deleted" }
    /// A note with an open title conflict (the column's partial index keeps reading them cheap).
    public var conflictColumn: String? { "title_conflict" }
    /// Live notes: created and not deleted (`NoteState.isLive`); a note whose creation was folded away with
    /// its deletion, and which only a late edit brought back, stays hidden.
    public var shownCondition: String? { "deleted = 0 AND created = 1" }

    public func key(ofStream stream: String) -> NoteID? {
        stream.hasPrefix("note:") ? NoteID(stream) : nil
    }

    public func key(ofStreamBytes bytes: UnsafeRawBufferPointer) -> NoteID? { NoteID(utf8: bytes) }

    public func stream(of key: NoteID) -> String { key.stream }

    public func accepts(type: String) -> Bool { type.hasPrefix(NoteEventType.prefix) }

    public func initialState() -> NoteState { NoteState() }

    public func apply(_ event: StoredEvent, to state: inout NoteState) {
        // The bytes the log holds: the payload is not encoded again to decode it.
        event.withPayloadBytes { bytes in
            state.apply(type: event.event.type, payloadBytes: bytes, hlc: event.event.hlc, dot: event.event.dot)
        }
    }

    /// A known note event type, or nil for a `note.*` type this version does not know: that event still
    /// gives its note a row (as incremental application does), and changes nothing in it.
    public typealias Kind = NoteEventType?

    public func kind(ofType type: UnsafeRawBufferPointer) -> NoteEventType?? {
        let kind = NoteEventType(utf8: type)
        guard kind != nil || type.starts(with: NoteEventType.prefix.utf8) else { return nil }
        return .some(kind)
    }

    public func apply(
        _ kind: NoteEventType?, payload: UnsafeRawBufferPointer, hlc: HLCTimestamp, dot: Dot, to state: inout NoteState
    ) {
        guard let kind else { return }
        state.apply(kind, payloadBytes: payload, hlc: hlc, dot: dot)
    }

    public func encode(_ state: NoteState) -> Data { Data(state.binaryEncoded) }

    public func decode(_ data: Data) throws -> NoteState { try NoteState(stored: [UInt8](data)) }

    public func values(of state: NoteState) -> [DatabaseValue] {
        var tags: [UInt8] = []
        NotesColumnJSON.writeTags(state.tags.elements.sorted(), to: &tags)
        var checklist: [UInt8] = []
        NotesColumnJSON.writeChecklist(state.checklistItems, to: &checklist)
        return [
            (state.title.value ?? "").databaseValue, state.body.text.databaseValue,
            String(decoding: tags, as: UTF8.self).databaseValue, (state.pinned.value ?? false).databaseValue,
            state.views.value.databaseValue, String(decoding: checklist, as: UTF8.self).databaseValue,
            (state.deleted.value ?? false).databaseValue, state.created.databaseValue,
            NotesColumnJSON.titleConflict(of: state).map { String(decoding: $0, as: UTF8.self) }.databaseValue,
        ]
    }

    /// A stable fold purges as the server's compaction does: every note's state drops its tombstones
    /// (`NoteState.compactStable`); what the notes show does not change.
    public func compactStable(_ state: inout NoteState) -> Bool { state.compactStable() }

    public func compactStable(_ state: inout NoteState, through folded: NoteState) -> Bool {
        state.compactStable(through: folded)
    }

    public func isRetired(_ state: NoteState) -> Bool { state.deleted.value ?? false }

    /// The notes table predates the generic projection: its own migrations, which leave the generic shape
    /// (the key column `id`, `scope`, `state`, the columns above, `changed` and the copy-on-write triggers).
    public func registerMigrations(_ table: StreamStateTable, into migrations: inout SchemaMigrations) {
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
            let columns = "id, scope, title, body, tags, pinned, view_count, checklist, deleted, created, state"
            let old = columns.split(separator: ",").map { "OLD." + $0.trimmingCharacters(in: .whitespaces) }
                .joined(separator: ", ")
            try db.execute(
                sql: """
                    ALTER TABLE notes ADD COLUMN changed INTEGER NOT NULL DEFAULT 1;
                    CREATE TRIGGER notes_copy_on_update BEFORE UPDATE ON notes
                    WHEN OLD.changed = 0 AND NEW.changed = 1 BEGIN
                        INSERT OR REPLACE INTO notes_snapshot (\(columns)) VALUES (\(old));
                    END;
                    CREATE TRIGGER notes_copy_on_delete BEFORE DELETE ON notes WHEN OLD.changed = 0 BEGIN
                        INSERT OR REPLACE INTO notes_snapshot (\(columns)) VALUES (\(old));
                    END;
                    """)
        }
        // The open title conflict as a read column (NoteState version 2 rebuilds the rows that fill it); the
        // copy-on-write triggers copy it too.
        migrations.register("notes.v3.title-conflict", derivedTables: ["notes", "notes_snapshot"]) { db in
            let columns = Self.columnsV3
            let old = columns.split(separator: ",").map { "OLD." + $0.trimmingCharacters(in: .whitespaces) }
                .joined(separator: ", ")
            try db.execute(
                sql: """
                    ALTER TABLE notes ADD COLUMN title_conflict TEXT;
                    ALTER TABLE notes_snapshot ADD COLUMN title_conflict TEXT;
                    CREATE INDEX notes_with_conflict ON notes (scope) WHERE title_conflict IS NOT NULL;
                    DROP TRIGGER notes_copy_on_update;
                    DROP TRIGGER notes_copy_on_delete;
                    CREATE TRIGGER notes_copy_on_update BEFORE UPDATE ON notes
                    WHEN OLD.changed = 0 AND NEW.changed = 1 BEGIN
                        INSERT OR REPLACE INTO notes_snapshot (\(columns)) VALUES (\(old));
                    END;
                    CREATE TRIGGER notes_copy_on_delete BEFORE DELETE ON notes WHEN OLD.changed = 0 BEGIN
                        INSERT OR REPLACE INTO notes_snapshot (\(columns)) VALUES (\(old));
                    END;
                    """)
        }
    }

    /// The row's columns as of `notes.v3.title-conflict` (a migration keeps the list it was written with).
    static let columnsV3 =
        "id, scope, title, body, tags, pinned, view_count, checklist, deleted, created, state, title_conflict"

    /// Rows computed on up to `workers` threads while this thread inserts the rows computed before it, each
    /// bound from its own bytes (`NotesRowInsert`).
    public func writeRows(
        _ entries: [StreamStateEntry<NoteID, NoteState>], to target: StreamStateRowTarget, table: StreamStateTable,
        workers: Int, in db: Database
    ) throws {
        guard !entries.isEmpty else { return }
        let insert: NotesRowInsert
        switch target {
        case .table(let changed): insert = try NotesRowInsert(db, asSnapshot: !changed)
        case .snapshot: insert = try NotesRowInsert(snapshotOf: db)
        }
        defer { insert.finish() }
        try entries.withUnsafeBufferPointer { entries in
            let rows = NotesRowProducer(entries: entries)
            try rows.produce(workers: workers) { row in try insert.execute(row) }
        }
    }
}

extension StreamStateProjection where Model == NotesModel {
    /// - Parameters:
    ///   - workers: threads for long replays and large writes; by default one per active processor, at most 8.
    ///   - cachedNotes: decoded note states kept between writes (0 turns the cache off).
    public init(workers: Int = ProcessInfo.processInfo.activeProcessorCount, cachedNotes: Int = 20_000) {
        self.init(NotesModel(), workers: workers, cachedStreams: cachedNotes)
    }

    /// The columns of a note row (in `notes` and `notes_snapshot`), in table order.
    public static var columns: String { NotesModel.columnsV3 }

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

    /// The open conflicts of the notes an app shows (created, not deleted), by note id: the rows whose
    /// `title_conflict` is set, read from their states.
    public static func conflicts(in db: Database) throws -> [NoteConflict] {
        var conflicts: [NoteConflict] = []
        for row in try Row.fetchAll(
            db,
            sql: """
                SELECT id, state FROM notes
                WHERE title_conflict IS NOT NULL AND created = 1 AND deleted = 0 ORDER BY id
                """)
        {
            let data: Data = row["state"]
            guard let id = NoteID(row["id"] as String) else { continue }
            conflicts += try NoteState(stored: [UInt8](data)).conflicts(of: id)
        }
        return conflicts
    }

    /// Live (created and not deleted) notes of `scope`.
    public static func liveCount(scope: Scope, in db: Database) throws -> Int {
        try Int.fetchOne(
            db, sql: "SELECT count(*) FROM notes WHERE scope = ? AND created = 1 AND deleted = 0",
            arguments: [scope.name]
        ) ?? 0
    }
}
