import Foundation
import GRDB
import NotesDomain
import NotesStore
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import Testing

/// The notes projection keeps decoded note states between writes. It must never serve a state the table
/// does not hold: not after another connection (another process on the same file) wrote the note, not after
/// a transaction that touched it rolled back, not after a rejection restored it from its snapshot.
@Suite struct NoteStateCacheTests {
    /// Every note's state as a fresh rebuild from the log makes it: what the projection must equal.
    static func rebuilt(_ path: String, _ directory: TemporaryDirectory) async throws -> Data {
        let copyPath = directory.path("rebuilt-\(UUID().uuidString).sqlite")
        let source = try DatabaseQueue(path: path)
        let copy = try DatabaseQueue(path: copyPath)
        try source.backup(to: copy)
        try source.close()
        try copy.close()
        let store = try EventStore(path: copyPath, projections: [NotesProjection()])
        try await store.rebuildAll()
        return try await store.database.writer.read { db in try NotesProjection.exportState(in: db) }
    }

    static func state(_ client: NotesClient) async throws -> Data {
        try await client.store.database.writer.read { db in try NotesProjection.exportState(in: db) }
    }

    @Test func anotherConnectionsWritesAreNotOverwrittenByCachedStates() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("shared.sqlite")
        let app = try NotesClient.open(path: path)
        let id = try await app.create(scope: "team-1", title: "one", tags: ["a"])
        try await app.addTag(id, "b")  // the note's state is now cached by `app`
        // Another process (here another store on the same file, with its own connections) edits the note.
        let other = try NotesClient.open(path: path)
        try await other.addTag(id, "from-other")
        try await other.setBody(id, "written elsewhere")
        // The app edits it again: it must start from the row, not from its cache.
        try await app.addTag(id, "c")
        let view = try #require(try await app.note(id))
        #expect(view.tags == ["a", "b", "c", "from-other"])
        #expect(view.body == "written elsewhere")
        #expect(try await Self.state(app) == Self.rebuilt(path, directory))
    }

    @Test func aRolledBackTransactionLeavesNoCachedState() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("rollback.sqlite")
        let app = try NotesClient.open(path: path)
        let id = try await app.create(scope: "team-1", title: "kept")
        struct Abort: Error {}
        // A page from the server retitles the note; applying it fails after the projection took it in (as a
        // crash there would), so the whole transaction rolls back.
        let other = try EventStore(path: directory.path("other.sqlite"))
        let retitle = NotePayload.titleSet(.init(title: "lost"))
        let made = try await other.append([
            EventDraft(scope: "team-1", stream: id.stream, type: retitle.type.rawValue, payload: retitle.json)
        ])
        await EventStore.$syncResponseFault.withValue({ step in if step == .beforeCursor { throw Abort() } }) {
            await #expect(throws: Abort.self) {
                try await app.store.applySyncResponse(
                    acknowledged: [:], rejected: [:], pulled: confirmed(made, firstSeq: 1), cursor: "c")
            }
        }
        try await app.addTag(id, "after")
        let view = try #require(try await app.note(id))
        #expect(view.title == "kept", "the rolled-back title never shows")
        #expect(view.tags == ["after"])
        #expect(try await Self.state(app) == Self.rebuilt(path, directory))
    }
}
