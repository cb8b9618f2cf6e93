import Foundation
import GRDB
import NotesDomain
import NotesStore
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import Testing

@Suite struct NotesClientTests {
    static func pair(_ directory: TemporaryDirectory) throws -> (NotesClient, NotesClient) {
        (try NotesClient.open(path: directory.path("a.sqlite")), try NotesClient.open(path: directory.path("b.sqlite")))
    }

    /// Delivers every event one replica has and the other lacks, as a server would (confirmed, with seq).
    static func exchange(_ from: NotesClient, _ to: NotesClient, seq: inout Int64) async throws {
        let known = Set(
            try await to.store.database.writer.read { db in try String.fetchAll(db, sql: "SELECT event_id FROM events")
            })
        let events = try await from.store.database.writer.read { db in
            try String.fetchAll(db, sql: "SELECT stream FROM events GROUP BY stream")
        }
        var page: [Event] = []
        for stream in events {
            for stored in try await from.store.events(stream: stream)
            where !known.contains(stored.event.id.description) && stored.status != .rejected {
                var event = stored.event
                seq += 1
                event.seq = seq
                event.receivedAt = Date()
                page.append(event)
            }
        }
        try await to.store.applyConfirmed(page, cursor: nil)
    }

    @Test func everyCommandShowsInTheNoteAtOnce() async throws {
        let directory = try TemporaryDirectory()
        let client = try NotesClient.open(path: directory.path("a.sqlite"))
        let id = try await client.create(scope: "team-1", title: "Groceries", body: "milk", tags: ["food"])
        try await client.setTitle(id, "Shopping")
        try await client.setBody(id, "milk and eggs")
        try await client.addTag(id, "weekly")
        try await client.removeTag(id, "food")
        try await client.setPinned(id, true)
        try await client.view(id)
        try await client.view(id)
        let first = try await client.addChecklistItem(id, text: "eggs")
        let second = try await client.addChecklistItem(id, text: "bread", after: first)
        try await client.setChecklistItemDone(id, item: first, done: true)
        try await client.removeChecklistItem(id, item: second)
        let note = try #require(try await client.note(id))
        #expect(note.title == "Shopping" && note.body == "milk and eggs" && note.tags == ["weekly"])
        #expect(note.pinned && note.viewCount == 2 && !note.deleted)
        #expect(note.checklist == [NoteView.Item(id: first, text: "eggs", done: true)])
        try await client.delete(id)
        #expect(try await client.note(id)?.deleted == true)
        #expect(try await client.store.pendingEvents().count == 15)
    }

    @Test func invalidEditsAreRefusedBeforeTheyAreWritten() async throws {
        let directory = try TemporaryDirectory()
        let client = try NotesClient.open(path: directory.path("a.sqlite"))
        let id = try await client.create(scope: "team-1", title: "x")
        await #expect(throws: EventStoreError.self) { try await client.addTag(id, String(repeating: "t", count: 33)) }
        await #expect(throws: EventStoreError.self) {
            try await client.setTitle(id, String(repeating: "t", count: 201))
        }
        await #expect(throws: EventStoreError.self) { try await client.setTitle(NoteID(), "no such note") }
        #expect(try await client.store.pendingEvents().count == 1)
    }

    @Test func concurrentEditsMergeWithTheChosenSemantics() async throws {
        let directory = try TemporaryDirectory()
        let (a, b) = try Self.pair(directory)
        var seq: Int64 = 0
        let id = try await a.create(scope: "team-1", title: "Plan", body: "hello world", tags: ["x"])
        let anchor = try await a.addChecklistItem(id, text: "first")
        try await Self.exchange(a, b, seq: &seq)

        try await a.setTitle(id, "Plan A")
        try await b.setTitle(id, "Plan B")
        try await a.removeTag(id, "x")
        try await b.addTag(id, "x")  // concurrent add wins over the remove
        try await a.setBody(id, "hello brave world")
        try await b.setBody(id, "hello world!")
        try await a.addChecklistItem(id, text: "a1", after: anchor)
        try await b.addChecklistItem(id, text: "b1", after: anchor)
        try await a.view(id)
        try await b.view(id)
        try await b.view(id)
        try await Self.exchange(a, b, seq: &seq)
        try await Self.exchange(b, a, seq: &seq)

        let stateA = try await a.exportState()
        let stateB = try await b.exportState()
        #expect(stateA == stateB, "identical bytes")
        let note = try #require(try await a.note(id))
        #expect(["Plan A", "Plan B"].contains(note.title))
        #expect(note.tags == ["x"])
        #expect(note.body == "hello brave world!", "both edits of the body survive")
        #expect(note.viewCount == 3)
        #expect(
            note.checklist.map(\.text).first == "first" && Set(note.checklist.map(\.text)) == ["first", "a1", "b1"])
    }

    @Test func rebuildingTheNotesProjectionGivesTheSameState() async throws {
        let directory = try TemporaryDirectory()
        let client = try NotesClient.open(path: directory.path("a.sqlite"))
        for index in 0..<20 {
            let id = try await client.create(scope: "team-1", title: "n\(index)", body: "body \(index)")
            try await client.addTag(id, "t\(index % 3)")
            if index % 4 == 0 { try await client.delete(id) }
        }
        let before = try await client.exportState()
        try await client.store.rebuild(projection: "notes")
        #expect(try await client.exportState() == before)
    }

    @Test func rulesNameTheBrokenField() {
        let stream = NoteID().stream
        #expect(
            NoteRules.violation(type: "note.tagAdded", stream: stream, payload: ["tag": ""])
                == "tag names are 1-32 characters")
        #expect(NoteRules.violation(type: "note.created", stream: "note:nope", payload: ["title": "x"]) != nil)
        #expect(NoteRules.violation(type: "note.unknownThing", stream: stream, payload: [:]) != nil)
        #expect(
            NoteRules.violation(type: "other.thing", stream: "anything", payload: .null) == nil, "other domains pass")
        #expect(NoteRules.violation(type: "note.viewed", stream: stream, payload: ["count": 0]) != nil)
        #expect(
            NoteRules.liveNoteDelta(type: "note.created") == 1 && NoteRules.liveNoteDelta(type: "note.deleted") == -1)
    }

    /// Replicas apply a payload's CRDT operations: one that does not decode, or says something else than the
    /// fields beside it, is refused rather than accepted and then ignored everywhere.
    @Test func rulesCheckTheOperationsPayloadsCarry() {
        let stream = NoteID().stream
        let replica = ReplicaID.random()
        var state = NoteState()
        func violation(_ type: NoteEventType, _ payload: [String: JSONValue]) -> String? {
            NoteRules.violation(type: type.rawValue, stream: stream, payload: .object(payload))
        }
        func violation<P: NoteEventPayload>(_ payload: P) -> String? {
            NoteRules.violation(type: P.type.rawValue, stream: stream, payload: payload.json)
        }
        let add = state.tags.add("work", replica: replica)
        let remove = state.tags.remove("work", replica: replica)
        #expect(violation(NotePayload.TagAdded(tag: "work", op: add)) == nil)
        #expect(violation(.tagAdded, ["tag": "work"]) == "op adds the tag")
        #expect(violation(NotePayload.TagAdded(tag: "home", op: add)) == "op adds the tag", "an op for another tag")
        #expect(violation(NotePayload.TagAdded(tag: "work", op: remove)) == "op adds the tag", "a remove")
        #expect(violation(NotePayload.TagRemoved(tag: "work", op: remove)) == nil)
        #expect(violation(NotePayload.TagRemoved(tag: "work", observed: [], op: add)) == "op removes the tag")

        let body = state.body.insert("hello", at: 0, replica: replica).map { [$0] } ?? []
        #expect(violation(NotePayload.BodyEdited(ops: body)) == nil)
        #expect(violation(.bodyEdited, ["ops": [["insert": "nonsense"]]]) == "ops are text operations")

        let view = state.views.add(2, at: Dot(replica: replica, counter: 1))
        #expect(violation(NotePayload.Viewed(count: 2, op: view)) == nil)
        #expect(violation(NotePayload.Viewed(count: 3, op: view)) == "op adds the views", "fewer views than counted")
        #expect(violation(.viewed, ["count": 2]) == "op adds the views")
        let subtract = state.views.add(-1, at: Dot(replica: replica, counter: 2))
        #expect(violation(NotePayload.Viewed(count: 1, op: subtract)) == "op adds the views", "views never go down")

        let item = NoteID().description
        let insert = state.checklist.insertElement(item, at: 0, replica: replica)
        #expect(violation(NotePayload.ChecklistItemAdded(item: item, text: "milk", op: insert)) == nil)
        #expect(
            violation(.checklistItemAdded, ["item": .string(item), "text": "milk", "op": 3])
                == "op is a checklist operation")
        #expect(violation(.checklistItemRemoved, ["item": .string(item)]) == "op is a checklist operation")
    }
}
