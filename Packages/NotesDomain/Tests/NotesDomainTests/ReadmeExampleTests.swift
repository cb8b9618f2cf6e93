import NotesStore
import SyncEventStoreTestSupport
import Testing

/// Keeps the README example compiling and working: the body below is the README's code.
@Suite struct ReadmeExampleTests {
    @Test func readmeExampleRuns() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("notes.sqlite")
        // README begins
        let notes = try NotesClient.open(path: path)  // path: where the SQLite file goes
        let id = try await notes.create(scope: "team-1", title: "Groceries", body: "milk", tags: ["food"])
        try await notes.setBody(id, "milk and eggs")
        print(try await notes.note(id)!.body)  // "milk and eggs", offline, at once
        // README ends
        #expect(try await notes.note(id)?.body == "milk and eggs")
    }
}
