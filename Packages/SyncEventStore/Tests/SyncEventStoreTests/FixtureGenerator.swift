import Foundation
import SyncEventStoreTestSupport
import Testing

@testable import SyncEventStore

/// Writes the fixture database of the current schema version. Run it by hand when a schema version is
/// released (`SYNC_WRITE_FIXTURES=1 swift test --filter writeCurrentSchemaFixture`), commit the file, and
/// add it to `opensDatabasesFromEarlierSchemaVersions`.
@Suite struct FixtureGenerator {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["SYNC_WRITE_FIXTURES"] == "1"))
    func writeCurrentSchemaFixture() async throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/eventstore-v2.sqlite").path
        try? FileManager.default.removeItem(atPath: path)
        let store = try EventStore(path: path, projections: [TitleProjection()])
        let first = try await store.append([title("note:1", "first"), tag("note:1", "a"), title("note:2", "other")])
        try await store.applyConfirmed(confirmed(first, firstSeq: 1), cursor: "c")
        let refused = try await store.append([title("note:2", "refused")])
        try await store.markRejected([refused[0].event.id], code: "validation.failed", message: "no")
        try await store.append([title("note:1", "second"), tag("note:3", "b")])
        try store.database.checkpoint()
    }
}
