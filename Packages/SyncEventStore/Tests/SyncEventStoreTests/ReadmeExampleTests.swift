import Foundation
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import Testing

/// Keeps the README example compiling and working: the body below is the README's code.
@Suite struct ReadmeExampleTests {
    @Test func readmeExampleRuns() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("notes.sqlite")
        // README begins
        let store = try EventStore(path: path, projections: [])  // path: where the SQLite file goes
        let stored = try await store.append([
            EventDraft(
                scope: "team-1", stream: "note:1", type: "note.created", payload: .object(["title": "Milk"]),
                expectedVersion: .noStream)
        ])
        print(stored[0].event.id, stored[0].status)  // a UUIDv7, pending
        print(try await store.pendingEvents().count)  // 1: what the next sync pushes
        // README ends
        #expect(stored[0].status == .pending)
    }
}
