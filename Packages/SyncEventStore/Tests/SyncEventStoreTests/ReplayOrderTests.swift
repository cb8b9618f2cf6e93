import Foundation
import GRDB
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import SyncStorage
import Testing

/// A projection that writes down the events it is fed, in order.
struct FeedRecorder: Projection {
    let name: String
    let version = 1
    let replayOrder: ReplayOrder

    func registerMigrations(into migrations: inout SchemaMigrations) {
        migrations.register("\(name).v1", derivedTables: [name]) { db in
            try db.execute(sql: "CREATE TABLE \(name) (n INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL)")
        }
    }

    func apply(_ events: [StoredEvent], in db: Database) throws {
        for stored in events {
            try db.execute(
                sql: "INSERT INTO \(name) (event_id) VALUES (?)", arguments: [stored.event.id.description])
        }
    }

    func restoreSnapshot(streams: Set<String>?, in db: Database) throws {
        try db.execute(sql: "DELETE FROM \(name)")
    }

    func saveSnapshot(in db: Database) throws {}

    func discardSnapshot(in db: Database) throws {}

    static func fed(_ name: String, _ store: EventStore) async throws -> [String] {
        try await store.database.writer.read { db in
            try String.fetchAll(db, sql: "SELECT event_id FROM \(name) ORDER BY n")
        }
    }
}

@Suite struct ReplayOrderTests {
    /// A log whose write order differs from canonical order: a local event confirmed after a remote one
    /// that arrived later, then a pending one. Rebuilds feed canonical order or log order as the projection
    /// asks.
    @Test func rebuildsFeedTheOrderTheProjectionAsksFor() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(
            path: directory.path("a.sqlite"),
            projections: [
                FeedRecorder(name: "canonical", replayOrder: .canonical),
                FeedRecorder(name: "arrival", replayOrder: .arrival),
            ])
        let local = try await store.append([title("note:1", "mine")])
        let other = try EventStore(path: directory.path("b.sqlite"))
        let remote = try await other.append([title("note:2", "theirs")])
        try await store.applyConfirmed(confirmed(remote, firstSeq: 1), cursor: "c1")
        #expect(try await store.markConfirmed([local[0].event.id: 2]) == 1)
        let pending = try await store.append([title("note:3", "later")])
        let ids = [local[0], remote[0], pending[0]].map(\.event.id.description)

        try await store.rebuildAll()
        #expect(try await FeedRecorder.fed("canonical", store) == [ids[1], ids[0], ids[2]])
        #expect(try await FeedRecorder.fed("arrival", store) == [ids[0], ids[1], ids[2]])
    }
}
