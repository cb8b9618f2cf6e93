import Crypto
import Foundation
import GRDB
import SyncEventStore
import SyncModels
import SyncStorage

/// What support needs to understand a device's sync, with the user's content left out: a file a user can
/// send without sending their notes (`sync-agent diagnostics --out FILE`).
///
/// In it: the software (the app's name and version as the app gives them, the operating system, SQLite), the
/// replica's id, its events counted by status and by type, the rejected events by stream, type and code, the
/// cursor, the sync journal, the schema (every table's, index's and trigger's SQL) with each table's row
/// count, the file's pages and the size of each table and index, the open conflicts' count, and the local
/// blob cache's bytes.
///
/// Never in it: a payload, a title or body, a file name, a token, a rejection's message (a server rule may
/// quote what it refused; the journal's `rejection` lines keep their event id, type and code), or a scope's
/// name (an app may name scopes after people): scopes appear as the first 16 hex digits of their name's
/// SHA-256 (`scopeDigest`), which support can compute for a name it already knows, in the counts, the cursor
/// and the journal alike. The journal is otherwise the device's own:
/// its entries never hold content (the engine writes kinds, counts, codes and errors, and a token only as the
/// word "token").
public struct SyncDiagnostics: Codable, Sendable, Equatable {
    public struct Software: Codable, Sendable, Hashable {
        /// The app's name and version, as the app gives them.
        public var app: String
        public var appVersion: String
        public var operatingSystem: String
        public var sqlite: String
    }

    public struct EventCount: Codable, Sendable, Hashable {
        public var status: String
        public var type: String
        public var count: Int
    }

    public struct ScopeCount: Codable, Sendable, Hashable {
        /// `scopeDigest(name)`.
        public var scope: String
        public var pending: Int
        public var confirmed: Int
        public var rejected: Int
    }

    public struct Rejection: Codable, Sendable, Hashable {
        public var stream: String
        public var type: String
        public var code: String
    }

    public struct SchemaObject: Codable, Sendable, Hashable {
        public var type: String
        public var name: String
        public var sql: String
        /// Rows, for a table.
        public var rows: Int?
    }

    public var generatedAt: Date
    public var software: Software
    public var replica: String
    public var events: [EventCount]
    public var scopes: [ScopeCount]
    public var rejected: [Rejection]
    /// The stored cursor, each scope's last `seq` read (by `scopeDigest`): the cursor itself names the scopes.
    public var cursor: [String: Int64]
    public var openConflicts: Int
    public var journal: [SyncJournal.Entry]
    public var schema: [SchemaObject]
    /// The store's metadata keys (their values are the store's bookkeeping; the cursor is above).
    public var metadataKeys: [String]
    public var storage: StorageStatistics
    /// The local blob cache: bytes held, and of those the bytes it may evict.
    public var blobBytes: Int64?
    public var evictableBlobBytes: Int64?

    /// The name support sees for scope `name`: the first 16 hex digits of its UTF-8 bytes' SHA-256.
    public static func scopeDigest(_ name: String) -> String {
        SHA256.hash(data: Data(name.utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// Reads the diagnostics of a device.
    /// - Parameters:
    ///   - store: the device's event store, whose database holds the journal too.
    ///   - blobs: its local blob cache, when the app has one.
    ///   - app: the app's name, as support knows it.
    ///   - appVersion: the app's version.
    ///   - journalEntries: the newest journal entries included, at most.
    public static func collect(
        store: EventStore, blobs: LocalBlobs? = nil, app: String, appVersion: String, journalEntries: Int = 2000
    ) async throws -> SyncDiagnostics {
        let journal = try SyncJournal(database: store.database)
        let entries = try await journal.entries(limit: journalEntries)
        let usage = try await blobs?.usage()
        let storage = try store.database.maintenance.statistics()
        let conflicts = try await store.streamsInConflict().count
        let rejected = try await store.rejectedEvents().reversed().map {
            Rejection(stream: $0.event.stream, type: $0.event.type, code: $0.rejection?.code ?? "")
        }
        let cursor = try ScopeCursor(encoded: try await store.cursor())
        // The scopes' names, read with their counts: the journal's lines are redacted of them below.
        let (scopes, names) = try await store.database.read { db in try scopeCounts(db) }
        var diagnostics = try await store.database.read { db in
            SyncDiagnostics(
                generatedAt: Date(),
                software: Software(
                    app: app, appVersion: appVersion,
                    operatingSystem: ProcessInfo.processInfo.operatingSystemVersionString,
                    sqlite: try String.fetchOne(db, sql: "SELECT sqlite_version()") ?? ""),
                replica: store.replica.description, events: try eventCounts(db), scopes: scopes,
                rejected: rejected,
                cursor: Dictionary(uniqueKeysWithValues: cursor.positions.map { (scopeDigest($0.key.name), $0.value) }),
                openConflicts: conflicts, journal: [], schema: try schema(db),
                metadataKeys: try String.fetchAll(db, sql: "SELECT key FROM store_meta ORDER BY key"),
                storage: storage, blobBytes: usage?.total, evictableBlobBytes: usage?.evictable)
        }
        let allNames = names.union(cursor.positions.keys.map(\.name))
        diagnostics.journal = entries.map {
            let detail = $0.kind == "rejection" ? withoutMessage($0.detail) : $0.detail
            return SyncJournal.Entry(at: $0.at, kind: $0.kind, detail: redactingScopes(allNames, in: detail))
        }
        return diagnostics
    }

    /// A `rejection` entry's detail (`ID TYPE: CODE MESSAGE`) without its message, which a server rule may
    /// have written from what it refused.
    static func withoutMessage(_ detail: String) -> String {
        guard let colon = detail.range(of: ": ") else { return detail }
        let code = detail[colon.upperBound...].prefix { $0 != " " }
        return String(detail[..<colon.upperBound]) + code
    }

    /// `text` with each whole occurrence of a name in `scopes` (not inside a longer run of the characters
    /// scope names are made of, a colon aside) replaced by `scopeDigest(name)`.
    static func redactingScopes(_ scopes: Set<String>, in text: String) -> String {
        func isNameCharacter(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default: false
            }
        }
        var bytes = Array(text.utf8)
        // Longest first, so that a name inside a longer one is never replaced in it first.
        for name in scopes.sorted(by: { $0.utf8.count > $1.utf8.count }) {
            let needle = Array(name.utf8)
            let digest = Array(scopeDigest(name).utf8)
            var output: [UInt8] = []
            output.reserveCapacity(bytes.count)
            var index = 0
            while index < bytes.count {
                let end = index + needle.count
                if end <= bytes.count, bytes[index..<end].elementsEqual(needle),
                    index == 0 || !isNameCharacter(bytes[index - 1]),
                    end == bytes.count || !isNameCharacter(bytes[end])
                {
                    output += digest
                    index = end
                } else {
                    output.append(bytes[index])
                    index += 1
                }
            }
            bytes = output
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The diagnostics as indented JSON with sorted keys, times in RFC 3339 with milliseconds.
    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(RFC3339.string(from: date))
        }
        return try encoder.encode(self)
    }

    /// Reads what `json()` wrote.
    public static func decode(_ data: Data) throws -> SyncDiagnostics {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = RFC3339.date(from: text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an RFC 3339 time: \(text)")
            }
            return date
        }
        return try decoder.decode(SyncDiagnostics.self, from: data)
    }

    static func eventCounts(_ db: Database) throws -> [EventCount] {
        try Row.fetchAll(
            db, sql: "SELECT status, type, count(*) AS n FROM events GROUP BY status, type ORDER BY status, type"
        ).map { EventCount(status: $0["status"], type: $0["type"], count: $0["n"]) }
    }

    /// The events counted by scope (by digest), and the scopes' names.
    static func scopeCounts(_ db: Database) throws -> ([ScopeCount], Set<String>) {
        let rows = try Row.fetchAll(
            db,
            sql: """
                SELECT scope, sum(status = 'pending') AS pending, sum(status = 'confirmed') AS confirmed,
                    sum(status = 'rejected') AS rejected
                FROM events GROUP BY scope
                """)
        let counts = rows.map {
            ScopeCount(
                scope: scopeDigest($0["scope"]), pending: $0["pending"], confirmed: $0["confirmed"],
                rejected: $0["rejected"])
        }
        return (counts.sorted { $0.scope < $1.scope }, Set(rows.map { $0["scope"] as String }))
    }

    /// Every table, index, view and trigger SQLite keeps the SQL of, with each table's row count.
    static func schema(_ db: Database) throws -> [SchemaObject] {
        var objects = try Row.fetchAll(
            db,
            sql: """
                SELECT type, name, sql FROM sqlite_master
                WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type, name
                """
        ).map { SchemaObject(type: $0["type"], name: $0["name"], sql: $0["sql"], rows: nil) }
        for index in objects.indices where objects[index].type == "table" {
            let name = objects[index].name.replacingOccurrences(of: "\"", with: "\"\"")
            objects[index].rows = try Int.fetchOne(db, sql: "SELECT count(*) FROM \"\(name)\"")
        }
        return objects
    }
}
