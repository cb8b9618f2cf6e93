import Foundation
import GRDB
import SyncModels
import SyncStorage

/// The local record of every sync step (start, push ok, pull ok, rejection, retry, pause, reset), kept in
/// the replica's own database for support: `export()` gives it as JSON Lines. Keeps the newest
/// `capacity` entries.
public struct SyncJournal: Sendable {
    public struct Entry: Codable, Sendable, Hashable {
        public var at: Date
        public var kind: String
        public var detail: String
    }

    let database: SyncDatabase
    let capacity: Int

    /// Opens the journal in `database` (creating its table on first use).
    public init(database: SyncDatabase, capacity: Int = 10_000) throws {
        self.database = database
        self.capacity = capacity
        var migrations = SchemaMigrations()
        migrations.register("engine.v1.journal") { db in
            try db.execute(
                sql: """
                    CREATE TABLE sync_journal (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        at TEXT NOT NULL,
                        kind TEXT NOT NULL,
                        detail TEXT NOT NULL
                    )
                    """)
        }
        try database.migrate(migrations)
    }

    func record(_ kind: String, _ detail: String = "") async {
        let capacity = capacity
        // The journal must never break a sync: a failed write is dropped.
        try? await database.writer.write { db in
            try db.execute(
                sql: "INSERT INTO sync_journal (at, kind, detail) VALUES (?, ?, ?)",
                arguments: [RFC3339.string(from: Date()), kind, detail])
            if db.lastInsertedRowID % 100 == 0 {
                try db.execute(
                    sql: "DELETE FROM sync_journal WHERE id <= ?", arguments: [db.lastInsertedRowID - Int64(capacity)])
            }
        }
    }

    /// The newest entries, oldest first.
    public func entries(limit: Int = 1000) async throws -> [Entry] {
        try await database.writer.read { db in
            try Row.fetchAll(
                db, sql: "SELECT at, kind, detail FROM sync_journal ORDER BY id DESC LIMIT ?", arguments: [limit]
            ).reversed().map {
                Entry(
                    at: RFC3339.date(from: $0["at"]) ?? Date(timeIntervalSince1970: 0), kind: $0["kind"],
                    detail: $0["detail"])
            }
        }
    }

    /// The whole journal as JSON Lines (canonical JSON, one entry per line).
    public func export() async throws -> Data {
        var data = Data()
        let encoder = CanonicalJSON.encoder()
        for entry in try await entries(limit: capacity) {
            data += try encoder.encode(entry)
            data.append(UInt8(ascii: "\n"))
        }
        return data
    }
}
