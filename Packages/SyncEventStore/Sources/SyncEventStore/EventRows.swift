import Foundation
import GRDB
import GRDBSQLite
import SyncModels

/// The insert of event rows, with each value bound by SQLite's own `sqlite3_bind_*`.
///
/// A bootstrapping device inserts every event of the log: `StatementArguments` boxed each of the thirteen
/// values, and GRDB bound them one by one, which cost nearly as much as SQLite's own work on the row.
/// Here the statement is fetched from the cache once per transaction and the values are bound in place,
/// from one buffer of the row's text and the payload's bytes, and unbound before the call returns (nothing
/// bound points into Swift memory after it). GRDB still executes the statement, so transaction observers
/// see every change as usual; it is told once, in `init`, that the arguments are bound.
struct EventRowInsert {
    private let statement: Statement
    /// Events of one push share the time the server received them: formatted once per distinct time.
    private var lastReceived: (Date, String)?
    /// The current row's text columns (see `callAsFunction`).
    private var text: [UInt8] = []
    /// The checksum written with the last row (`EventChecksum.contribution`): what it adds to its scope's.
    private(set) var lastChecksum: Int64 = 0

    static let sql = """
        INSERT INTO events (event_id, scope, stream, stream_version, type, schema_version, payload, hlc,
            dot_replica, dot_counter, status, seq, received_at, checksum, carries)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
    static let sqlIfNew = sql + " ON CONFLICT (scope, event_id) DO NOTHING"

    /// With `ifNew`, an event whose id the log holds already in its scope is left as it is (any other
    /// constraint still throws).
    init(_ db: Database, ifNew: Bool) throws {
        statement = try db.cachedStatement(sql: ifNew ? Self.sqlIfNew : Self.sql)
        statement.setUncheckedArguments(StatementArguments([DatabaseValue](repeating: .null, count: 15)))
    }

    /// Inserts `event`'s row with `payload` (its payload's bytes, `PayloadCodec.encode`) as the payload.
    /// - Returns: the row's position; nil when `ifNew` left an event already in the log alone.
    mutating func callAsFunction(_ event: Event, payload: Data, status: SyncStatus, _ db: Database) throws -> Int64? {
        // The row's text, back to back in one buffer that SQLite reads in place while the statement runs:
        // no copy by SQLite (its allocations take a global mutex), no allocation once the buffer has grown.
        text.removeAll(keepingCapacity: true)
        var ends: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)
        text.append(contentsOf: event.id.description.utf8)
        ends.0 = text.count
        text.append(contentsOf: event.scope.name.utf8)
        ends.1 = text.count
        text.append(contentsOf: event.stream.utf8)
        ends.2 = text.count
        text.append(contentsOf: event.type.utf8)
        ends.3 = text.count
        text.append(contentsOf: event.hlc.description.utf8)
        ends.4 = text.count
        text.append(contentsOf: event.dot.replica.description.utf8)
        ends.5 = text.count
        text.append(contentsOf: status.rawValue.utf8)
        ends.6 = text.count
        if let received = event.receivedAt {
            if lastReceived?.0 != received { lastReceived = (received, RFC3339.string(from: received)) }
            text.append(contentsOf: lastReceived!.1.utf8)
        }
        ends.7 = text.count
        // A pointer for an empty value too (a nil one would bind NULL).
        text.append(0)
        let handle = statement.sqliteStatement
        let checksum = EventChecksum.contribution(of: event, payload: payload)
        lastChecksum = checksum
        try text.withUnsafeBytes { text in
            try payload.withUnsafeBytes { payload in
                sqlite3_reset(handle)
                // The bindings point into `text` and `payload`: cleared before they go, thrown error or not.
                defer { sqlite3_clear_bindings(handle) }
                let base = text.baseAddress!.assumingMemoryBound(to: CChar.self)
                func bind(_ index: Int32, _ start: Int, _ end: Int) {
                    sqlite3_bind_text(handle, index, base + start, Int32(end - start), nil)
                }
                bind(1, 0, ends.0)
                bind(2, ends.0, ends.1)
                bind(3, ends.1, ends.2)
                sqlite3_bind_int64(handle, 4, event.streamVersion)
                bind(5, ends.2, ends.3)
                sqlite3_bind_int64(handle, 6, Int64(event.schemaVersion))
                if let start = payload.baseAddress, payload.count > 0 {
                    sqlite3_bind_blob(handle, 7, start, Int32(payload.count), nil)
                } else {
                    sqlite3_bind_zeroblob(handle, 7, 0)
                }
                bind(8, ends.3, ends.4)
                bind(9, ends.4, ends.5)
                sqlite3_bind_int64(handle, 10, Int64(bitPattern: event.dot.counter))
                bind(11, ends.5, ends.6)
                if let seq = event.seq { sqlite3_bind_int64(handle, 12, seq) }
                if event.receivedAt != nil { bind(13, ends.6, ends.7) }
                sqlite3_bind_int64(handle, 14, checksum)
                if let carries = event.carries { sqlite3_bind_int64(handle, 15, carries) }
                try statement.execute()
            }
        }
        guard db.changesCount > 0 else { return nil }
        return db.lastInsertedRowID
    }
}

/// The upsert of `streams` rows, bound like `EventRowInsert`: one per stream of each transaction of pulled
/// events.
struct StreamVersionRaise {
    private let statement: Statement

    /// How a row met again is raised: the higher version, and `''` for a second scope. Deferred versions
    /// read back from the log are raised by the same rule (`EventStore.raiseVersions(fromLogAfter:_:)`).
    static let onConflict = """
        ON CONFLICT (stream) DO UPDATE SET version = max(version, excluded.version),
            scope = CASE WHEN scope IS NULL OR scope = excluded.scope THEN excluded.scope ELSE '' END
        """

    init(_ db: Database) throws {
        statement = try db.cachedStatement(
            sql: "INSERT INTO streams (stream, version, scope) VALUES (?, ?, ?) \(Self.onConflict)")
        statement.setUncheckedArguments(StatementArguments([DatabaseValue](repeating: .null, count: 3)))
    }

    /// Raises `stream`'s version (what the next local append builds on) to `version` if it is below, and
    /// records that the log holds events of it in `scope` (`streams.scope` becomes `''` once a stream has
    /// events in two scopes; pass `''` for a batch that held several).
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
    @inline(__always) static var transient: sqlite3_destructor_type {
        unsafeBitCast(-1, to: sqlite3_destructor_type.self)
    }

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
}
