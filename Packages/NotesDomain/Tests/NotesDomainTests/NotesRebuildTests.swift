import Foundation
import GRDB
import NotesDomain
import NotesStore
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import Testing

/// Rebuilds of the notes projection: on several threads, on one, and event by event all give the same rows.
@Suite struct NotesRebuildTests {
    /// Every column of every note row, in id order (the state as its stored bytes).
    static func rows(_ store: EventStore) async throws -> [[DatabaseValue]] {
        try await store.database.writer.read { db in
            try Row.fetchAll(db, sql: "SELECT \(NotesProjection.columns) FROM notes ORDER BY id").map {
                Array($0.databaseValues)
            }
        }
    }

    /// A log of a few thousand events over more notes and events than the parallel thresholds: every kind of
    /// command, in a seeded random order.
    static func makeLog(at path: String, seed: UInt64) async throws -> (views: Data, events: Int) {
        let client = try NotesClient.open(path: path)
        var random = SplitMix64(seed: seed)
        var notes: [NoteID] = []
        var items: [NoteID: [String]] = [:]
        for index in 0..<120 {
            notes.append(try await client.create(scope: index % 3 == 0 ? "team-2" : "team-1", title: "n\(index)"))
        }
        for step in 0..<2_000 {
            let id = notes[Int.random(in: 0..<notes.count, using: &random)]
            switch Int.random(in: 0..<10, using: &random) {
            case 0: try await client.setTitle(id, "title \(step)")
            case 1, 2: try await client.setBody(id, "body \(step) of \(id.description.prefix(4))")
            case 3: try await client.addTag(id, "t\(step % 7)")
            case 4: try await client.removeTag(id, "t\(step % 7)")
            case 5: try await client.view(id)
            case 6: try await client.setPinned(id, step % 2 == 0)
            case 7: items[id, default: []].append(try await client.addChecklistItem(id, text: "item \(step)"))
            case 8:
                if let item = items[id]?.randomElement(using: &random) {
                    try await client.setChecklistItemDone(id, item: item, done: true)
                }
            default:
                if step % 50 == 0 { try await client.delete(id) } else { try await client.view(id) }
            }
        }
        let events = try await client.store.database.writer.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM events") ?? 0
        }
        return (try await client.exportState(), events)
    }

    @Test func parallelRebuildWritesTheSameRowsAsSerialAndIncremental() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("notes.sqlite")
        let (incremental, events) = try await Self.makeLog(at: path, seed: 11)
        #expect(events > 1_024, "enough events for the parallel path (from 1,024 events a batch)")

        let serial = try EventStore(path: path, projections: [NotesProjection(workers: 1)])
        try await serial.rebuild(projection: "notes")
        let serialRows = try await Self.rows(serial)
        #expect(try await serial.database.writer.read { try NotesProjection.exportState(in: $0) } == incremental)

        for workers in [2, 3, 8] {
            let parallel = try EventStore(path: path, projections: [NotesProjection(workers: workers)])
            try await parallel.rebuild(projection: "notes")
            let parallelRows = try await Self.rows(parallel)
            #expect(parallelRows.count == 120)
            #expect(parallelRows == serialRows, "rebuild on \(workers) threads")
        }
    }

    /// The `tags` and `checklist` read columns are canonical JSON, escapes included, as `JSONValue` writes it.
    @Test func readColumnsAreCanonicalJSON() async throws {
        let directory = try TemporaryDirectory()
        let client = try NotesClient.open(path: directory.path("json.sqlite"))
        let id = try await client.create(scope: "team-1", title: "json")
        for tag in ["plain", "quote\"d", "back\\slash", "tab\tand\nnewline", "é ✓"] { try await client.addTag(id, tag) }
        let first = try await client.addChecklistItem(id, text: "say \"hi\"\u{1}")
        try await client.addChecklistItem(id, text: "second ✓", after: first)
        try await client.setChecklistItemDone(id, item: first, done: true)
        let view = try #require(try await client.note(id))
        let row = try #require(
            try await client.store.database.writer.read { db in
                try Row.fetchOne(db, sql: "SELECT tags, checklist FROM notes WHERE id = ?", arguments: [id.description])
            })
        let tags = JSONValue.array(view.tags.map(JSONValue.string)).canonicalData()
        let checklist = JSONValue.array(
            view.checklist.map { ["id": .string($0.id), "text": .string($0.text), "done": .bool($0.done)] }
        ).canonicalData()
        #expect(row["tags"] == String(decoding: tags, as: UTF8.self))
        #expect(row["checklist"] == String(decoding: checklist, as: UTF8.self))
        #expect(view.checklist.count == 2 && view.tags.count == 5)
    }

    /// Saving writes the read columns straight from the state (not through `NoteState.view`): after a
    /// rebuild, every row's columns say what its stored state's `view` says.
    @Test func readColumnsAgreeWithTheStoredState() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("columns.sqlite")
        _ = try await Self.makeLog(at: path, seed: 5)
        let store = try EventStore(path: path, projections: [NotesProjection(workers: 2)])
        try await store.rebuild(projection: "notes")
        let rows: [(Row, NoteState?)] = try await store.database.writer.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM notes ORDER BY id").map { row in
                let id: String = row["id"]
                return (row, try NoteID(id).flatMap { try NotesProjection.state(of: $0, in: db) })
            }
        }
        #expect(rows.count == 120)
        #expect(rows.contains { $0.1?.view.deleted == true } && rows.contains { $0.1?.view.checklist.isEmpty == false })
        for (row, state) in rows {
            let state = try #require(state, "the state of \(row["id"] as String)")
            let view = state.view
            let checklist = JSONValue.array(
                view.checklist.map { ["id": .string($0.id), "text": .string($0.text), "done": .bool($0.done)] })
            #expect(row["title"] == view.title && row["body"] == view.body)
            #expect(
                row["tags"]
                    == String(decoding: JSONValue.array(view.tags.map(JSONValue.string)).canonicalData(), as: UTF8.self)
            )
            #expect(row["checklist"] == String(decoding: checklist.canonicalData(), as: UTF8.self))
            #expect(row["pinned"] == view.pinned && row["view_count"] == view.viewCount)
            #expect(row["deleted"] == view.deleted && row["created"] == state.created)
        }
    }

    /// Replays route rows by the note id and type parsed from their bytes: the same answers as the `String`
    /// forms, for upper- and lowercase ids, with and without the stream prefix.
    @Test func noteIDsAndTypesParseFromBytesAsFromStrings() {
        for _ in 0..<200 {
            let id = NoteID(uuid: UUID())
            #expect(id.description == id.uuid.uuidString.lowercased())
            for text in [id.stream, id.description, id.uuid.uuidString, "note:" + id.uuid.uuidString] {
                var copy = text
                let parsed = copy.withUTF8 { NoteID(utf8: UnsafeRawBufferPointer($0)) }
                #expect(parsed == id && NoteID(text) == id, "\(text)")
            }
        }
        // Rows are saved in id order, compared without making the strings: the same order as the strings'.
        let ids = (0..<500).map { _ in NoteID(uuid: UUID()) }
        #expect(ids.sorted().map(\.description) == ids.map(\.description).sorted())
        for bad in ["note:", "note:123", "note:\(UUID().uuidString)x", "nope:\(UUID().uuidString)", ""] {
            #expect(NoteID(bad) == nil, "\(bad)")
        }
        for kind in NoteEventType.allCases {
            var name = kind.rawValue
            #expect(name.withUTF8 { NoteEventType(utf8: UnsafeRawBufferPointer($0)) } == kind)
        }
        for other in ["note.", "note.create", "note.createdX", "other.created", "NOTE.CREATED"] {
            var name = other
            #expect(name.withUTF8 { NoteEventType(utf8: UnsafeRawBufferPointer($0)) } == nil, "\(other)")
        }
    }
}
