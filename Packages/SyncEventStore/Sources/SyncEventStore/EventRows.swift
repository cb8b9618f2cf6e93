import Foundation
import GRDB
import GRDBSQLite
import SyncModels

/// The insert of event rows, with each value bound by SQLite's own `sqlite3_bind_*`.
///
/// A bootstrapping device inserts every event of the log: `StatementArguments` boxed each of the thirteen
/// values, and GRDB bound them one by one, which cost nearly as much as SQLite's own work on the row.
/// Here the statement is fetched from the cache once per transaction and the values are bound straight
/// from the strings' bytes, copied by SQLite (`SQLITE_TRANSIENT`: nothing bound points into Swift memory
/// after the call). GRDB still executes the statement, so transaction observers see every change as usual;
/// it is told once, in `init`, that the arguments are bound.
struct EventRowInsert {
    private let statement: Statement
    /// Events of one push share the time the server received them: formatted once per distinct time.
    private var lastReceived: (Date, String)?

    static let sql = """
        INSERT INTO events (event_id, scope, stream, stream_version, type, schema_version, payload, hlc,
            dot_replica, dot_counter, status, seq, received_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
    static let sqlIfNew = sql + " ON CONFLICT (scope, event_id) DO NOTHING"

    /// With `ifNew`, an event whose id the log holds already in its scope is left as it is (any other
    /// constraint still throws).
    init(_ db: Database, ifNew: Bool) throws {
        statement = try db.cachedStatement(sql: ifNew ? Self.sqlIfNew : Self.sql)
        statement.setUncheckedArguments(StatementArguments([DatabaseValue](repeating: .null, count: 13)))
    }

    /// Inserts `event`'s row with `payload` (its payload's bytes, `PayloadCodec.encode`) as the payload.
    /// - Returns: the row's position; nil when `ifNew` left an event already in the log alone.
    mutating func callAsFunction(_ event: Event, payload: Data, status: SyncStatus, _ db: Database) throws -> Int64? {
        let handle = statement.sqliteStatement
        sqlite3_reset(handle)
        SQLiteBinding.text(event.id.description, handle, 1)
        SQLiteBinding.text(event.scope.name, handle, 2)
        SQLiteBinding.text(event.stream, handle, 3)
        sqlite3_bind_int64(handle, 4, event.streamVersion)
        SQLiteBinding.text(event.type, handle, 5)
        sqlite3_bind_int64(handle, 6, Int64(event.schemaVersion))
        SQLiteBinding.blob(payload, handle, 7)
        SQLiteBinding.text(event.hlc.description, handle, 8)
        SQLiteBinding.text(event.dot.replica.description, handle, 9)
        sqlite3_bind_int64(handle, 10, Int64(bitPattern: event.dot.counter))
        SQLiteBinding.text(status.rawValue, handle, 11)
        if let seq = event.seq { sqlite3_bind_int64(handle, 12, seq) } else { sqlite3_bind_null(handle, 12) }
        if let received = event.receivedAt {
            if lastReceived?.0 != received { lastReceived = (received, RFC3339.string(from: received)) }
            SQLiteBinding.text(lastReceived!.1, handle, 13)
        } else {
            sqlite3_bind_null(handle, 13)
        }
        try statement.execute()
        guard db.changesCount > 0 else { return nil }
        return db.lastInsertedRowID
    }
}

/// The upsert of `streams` rows, bound like `EventRowInsert`: one per stream of each transaction of pulled
/// events.
struct StreamVersionRaise {
    private let statement: Statement

    init(_ db: Database) throws {
        statement = try db.cachedStatement(
            sql: """
                INSERT INTO streams (stream, version, scope) VALUES (?, ?, ?)
                ON CONFLICT (stream) DO UPDATE SET version = max(version, excluded.version),
                    scope = CASE WHEN scope IS NULL OR scope = excluded.scope THEN excluded.scope ELSE '' END
                """)
        statement.setUncheckedArguments(StatementArguments([DatabaseValue](repeating: .null, count: 3)))
    }

    /// Raises `stream`'s version to `version` if it is below, and records its scope (see
    /// `EventStore.raiseVersion`).
    func callAsFunction(_ stream: String, in scope: String, to version: Int64) throws {
        let handle = statement.sqliteStatement
        sqlite3_reset(handle)
        SQLiteBinding.text(stream, handle, 1)
        sqlite3_bind_int64(handle, 2, version)
        SQLiteBinding.text(scope, handle, 3)
        try statement.execute()
    }
}

/// Binding Swift values to a statement with SQLite's copy of the bytes.
enum SQLiteBinding {
    /// `SQLITE_TRANSIENT`: SQLite copies the value before the bind returns.
    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Binds `text` as TEXT (an empty string too: a nil pointer would bind NULL).
    static func text(_ text: String, _ handle: OpaquePointer, _ index: Int32) {
        var text = text
        text.withUTF8 { utf8 in
            if let base = utf8.baseAddress, utf8.count > 0 {
                sqlite3_bind_text(
                    handle, index, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), Int32(utf8.count),
                    transient)
            } else {
                sqlite3_bind_text(handle, index, "", 0, transient)
            }
        }
    }

    /// Binds `data` as a BLOB (an empty one too).
    static func blob(_ data: Data, _ handle: OpaquePointer, _ index: Int32) {
        data.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress, bytes.count > 0 {
                sqlite3_bind_blob(handle, index, base, Int32(bytes.count), transient)
            } else {
                sqlite3_bind_zeroblob(handle, index, 0)
            }
        }
    }
}
