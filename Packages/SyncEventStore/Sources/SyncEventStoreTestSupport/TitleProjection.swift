import Foundation
import GRDB
import SyncEventStore
import SyncModels
import SyncStorage
// The shared test support (seeded generator, temporary directories) comes with this module's fixtures.
@_exported import SyncTestSupport

/// A small CRDT-style projection for tests: per stream, a last-writer-wins title (by HLC) and an add-only
/// set of tags. Idempotent and order-independent, as the store requires.
public struct TitleProjection: Projection {
    public var name = "titles"
    public var version = 1

    public init(name: String = "titles", version: Int = 1) {
        self.name = name
        self.version = version
    }

    public func registerMigrations(into migrations: inout SchemaMigrations) {
        migrations.register("titles.v1", derivedTables: ["titles", "titles_snapshot", "tags", "tags_snapshot"]) { db in
            for suffix in ["", "_snapshot"] {
                try db.execute(sql: "CREATE TABLE titles\(suffix) (stream TEXT PRIMARY KEY, title TEXT, hlc TEXT)")
                try db.execute(sql: "CREATE TABLE tags\(suffix) (stream TEXT, tag TEXT, PRIMARY KEY (stream, tag))")
            }
        }
    }

    public func apply(_ events: [StoredEvent], in db: Database) throws {
        for stored in events {
            let event = stored.event
            switch event.type {
            case "title.set":
                try db.execute(
                    sql: """
                        INSERT INTO titles (stream, title, hlc) VALUES (?, ?, ?)
                        ON CONFLICT (stream) DO UPDATE SET title = excluded.title, hlc = excluded.hlc
                        WHERE excluded.hlc > titles.hlc
                        """,
                    arguments: [event.stream, event.payload["title"]?.stringValue, event.hlc.description])
            case "tag.added":
                try db.execute(
                    sql: "INSERT OR IGNORE INTO tags (stream, tag) VALUES (?, ?)",
                    arguments: [event.stream, event.payload["tag"]?.stringValue])
            default:
                break
            }
        }
    }

    public func restoreSnapshot(streams: Set<String>?, in db: Database) throws {
        for table in ["titles", "tags"] {
            if let streams {
                let marks = databaseQuestionMarks(count: streams.count)
                let arguments = StatementArguments(Array(streams))
                try db.execute(sql: "DELETE FROM \(table) WHERE stream IN (\(marks))", arguments: arguments)
                try db.execute(
                    sql: "INSERT INTO \(table) SELECT * FROM \(table)_snapshot WHERE stream IN (\(marks))",
                    arguments: arguments)
            } else {
                try db.execute(sql: "DELETE FROM \(table)")
                try db.execute(sql: "INSERT INTO \(table) SELECT * FROM \(table)_snapshot")
            }
        }
    }

    public func discardSnapshot(in db: Database) throws {
        for table in ["titles", "tags"] { try db.execute(sql: "DELETE FROM \(table)_snapshot") }
    }

    public func saveSnapshot(in db: Database) throws {
        for table in ["titles", "tags"] {
            try db.execute(sql: "DELETE FROM \(table)_snapshot")
            try db.execute(sql: "INSERT INTO \(table)_snapshot SELECT * FROM \(table)")
        }
    }

    /// The projection's whole state, for comparing two stores.
    public static func dump(_ store: EventStore) async throws -> [String] {
        try await store.database.read { db in
            try String.fetchAll(db, sql: "SELECT stream || '=' || coalesce(title, '') FROM titles ORDER BY stream")
                + String.fetchAll(db, sql: "SELECT stream || '#' || tag FROM tags ORDER BY stream, tag")
        }
    }
}

public func title(_ stream: String, _ title: String, scope: Scope = "team-1", expecting: ExpectedVersion = .any)
    -> EventDraft
{
    EventDraft(
        scope: scope, stream: stream, type: "title.set", payload: .object(["title": .string(title)]),
        expectedVersion: expecting)
}

public func tag(_ stream: String, _ tag: String, scope: Scope = "team-1") -> EventDraft {
    EventDraft(scope: scope, stream: stream, type: "tag.added", payload: .object(["tag": .string(tag)]))
}

/// Events as a server would send them: confirmed, with seq and receivedAt.
public func confirmed(_ events: [StoredEvent], firstSeq: Int64) -> [Event] {
    events.enumerated().map { index, stored in
        var event = stored.event
        event.seq = firstSeq + Int64(index)
        event.receivedAt = Date(timeIntervalSince1970: 1_700_000_000 + Double(index))
        return event
    }
}
