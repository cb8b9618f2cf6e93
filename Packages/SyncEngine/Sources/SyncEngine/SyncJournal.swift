import Foundation
import GRDB
import SyncEventStore
import SyncModels
import SyncStorage
import Synchronization

/// The local record of every sync step (start, push ok, pull ok, rejection, retry, pause, reset), kept in
/// the replica's own database for support: `export()` gives it as JSON Lines.
///
/// Bounded by count and by age (`Bounds`): a device that syncs every few seconds for years keeps the same
/// few thousand rows, and writing an entry costs the same on the first day as on the last. Old entries are
/// trimmed every `trimInterval` writes, by the primary key (ids grow with time), so a trim touches only
/// the rows it deletes plus at most `trimInterval` newer ones.
public struct SyncJournal: Sendable {
    public struct Entry: Codable, Sendable, Hashable {
        public var at: Date
        public var kind: String
        public var detail: String
    }

    /// How much of the journal is kept.
    public struct Bounds: Sendable, Hashable {
        /// The newest entries kept, at most (plus up to `trimInterval` written since the last trim).
        public var maxEntries: Int
        /// Entries older than this are dropped at the next trim.
        public var maxAge: Duration

        public init(maxEntries: Int = 10_000, maxAge: Duration = .seconds(30 * 24 * 3600)) {
            precondition(maxEntries > 0, "the journal keeps at least one entry")
            self.maxEntries = maxEntries
            self.maxAge = maxAge
        }
    }

    /// Writes between two trims.
    static let trimInterval: Int64 = 100

    let database: SyncDatabase
    public let bounds: Bounds
    /// The entry `hold` keeps for the next write.
    private let held = HeldEntry()
    private final class HeldEntry: Sendable {
        let entry = Mutex<(Date, String, String)?>(nil)
    }
    /// The wall clock entries are stamped with (a test moves it to age entries).
    let now: @Sendable () -> Date

    /// Opens the journal in `database` (creating its table on first use).
    public init(
        database: SyncDatabase, bounds: Bounds = Bounds(), now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        self.database = database
        self.bounds = bounds
        self.now = now
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
        await record([(kind, detail)])
    }

    /// Keeps an entry in memory, to be written with the next `record` that writes anything, with its own
    /// time; a later `hold` replaces it. A cycle's "start" is held this way: a cycle that moves nothing
    /// writes nothing, and one that does writes its start with its first answer, in one transaction.
    func hold(_ kind: String, _ detail: String = "") {
        held.entry.withLock { $0 = (now(), kind, detail) }
    }

    /// Records entries in one write.
    func record(_ entries: [(kind: String, detail: String)]) async {
        guard !entries.isEmpty else { return }
        let rows = rows(entries)
        let bounds = bounds
        let now = now()
        // The journal must never break a sync: a failed write is dropped.
        try? await database.writer.write { [rows] db in try Self.insert(rows, db, bounds: bounds, now: now) }
    }

    /// The entries for one applied answer of the server: its push's, when `pushed`, each rejection's, and
    /// its pull's, when `pulled`; the push's and the pull's end with `(request ID)` when the request's id is
    /// known, the id the server's log names the request by.
    static func entries(
        for outcome: EventStore.SyncResponseOutcome, pushed: Bool, pulled: Bool, requestID: String? = nil
    ) -> [(kind: String, detail: String)] {
        let request = requestID.map { " (request \($0))" } ?? ""
        var entries: [(kind: String, detail: String)] = []
        if pushed {
            entries.append(
                ("push.ok", "\(outcome.acknowledged) acknowledged, \(outcome.rolledBack.count) rejected\(request)"))
        }
        for event in outcome.rolledBack {
            let rejection = event.rejection
            entries.append(
                (
                    "rejection",
                    "\(event.event.id) \(event.event.type): \(rejection?.code ?? "") \(rejection?.message ?? "")"
                ))
        }
        if pulled {
            let result = outcome.pulled
            let folded = result.folded > 0 ? " (\(result.folded) folded on arrival)" : ""
            entries.append(
                (
                    "pull.ok",
                    "\(result.inserted + result.folded) new\(folded), \(result.confirmedLocal + result.alreadyKnown) known\(request)"
                ))
        }
        return entries
    }

    /// The entries for the streams whose conflict opened (`conflict.open`) or was resolved
    /// (`conflict.resolved`) between two reads of the streams in conflict, each with its stream, sorted.
    static func entries(conflictsWere before: Set<String>, are now: Set<String>) -> [(kind: String, detail: String)] {
        now.subtracting(before).sorted().map { ("conflict.open", $0) }
            + before.subtracting(now).sorted().map { ("conflict.resolved", $0) }
    }

    /// Records entries inside the caller's write transaction (the store's transaction for a server answer,
    /// so that an answer costs one commit, not two). A failed insert is dropped, as in `record`, and leaves
    /// the caller's transaction as it was (SQLite undoes the one statement).
    func write(_ entries: [(kind: String, detail: String)], in db: Database) {
        guard !entries.isEmpty else { return }
        try? Self.insert(rows(entries), db, bounds: bounds, now: now())
    }

    /// The rows for `entries`, stamped now, after the held entry if there is one (which is taken).
    private func rows(_ entries: [(kind: String, detail: String)]) -> [(at: String, kind: String, detail: String)] {
        let at = RFC3339.string(from: now())
        var rows = entries.map { (at: at, kind: $0.kind, detail: $0.detail) }
        if let (time, kind, detail) = held.entry.withLock({ entry in
            defer { entry = nil }; return entry
        }) {
            rows.insert((RFC3339.string(from: time), kind, detail), at: 0)
        }
        return rows
    }

    private static func insert(
        _ rows: [(at: String, kind: String, detail: String)], _ db: Database, bounds: Bounds, now: Date
    ) throws {
        for (at, kind, detail) in rows {
            try db.cachedStatement(sql: "INSERT INTO sync_journal (at, kind, detail) VALUES (?, ?, ?)")
                .execute(arguments: [at, kind, detail])
            let last = db.lastInsertedRowID
            if last % Self.trimInterval == 0 { try Self.trim(db, last: last, bounds: bounds, now: now) }
        }
    }

    /// Drops entries beyond `bounds`: every id more than `maxEntries` below the newest, then the oldest ones
    /// while they are older than `maxAge` (a walk up the primary key that stops at the first young entry).
    static func trim(_ db: Database, last: Int64, bounds: Bounds, now: Date) throws {
        try db.execute(
            sql: "DELETE FROM sync_journal WHERE id <= ?", arguments: [last - Int64(bounds.maxEntries)])
        let seconds = Double(bounds.maxAge.components.seconds) + Double(bounds.maxAge.components.attoseconds) / 1e18
        let cutoff = RFC3339.string(from: now.addingTimeInterval(-seconds))
        // RFC 3339 times in one format (UTC, milliseconds) sort as text in time order.
        try db.execute(
            sql: """
                DELETE FROM sync_journal WHERE id < coalesce(
                    (SELECT id FROM sync_journal WHERE at >= ? ORDER BY id LIMIT 1),
                    (SELECT max(id) + 1 FROM sync_journal))
                """, arguments: [cutoff])
    }

    /// How many entries the journal holds now.
    public func count() async throws -> Int {
        try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM sync_journal") ?? 0 }
    }

    /// When the newest entry of `kind` was written; nil when the journal holds none.
    public func lastTime(of kind: String) async throws -> Date? {
        try await database.read { db in
            try String.fetchOne(
                db, sql: "SELECT at FROM sync_journal WHERE kind = ? ORDER BY id DESC LIMIT 1", arguments: [kind]
            ).flatMap(RFC3339.date(from:))
        }
    }

    /// The newest entries, oldest first.
    public func entries(limit: Int = 1000) async throws -> [Entry] {
        try await database.read { db in
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
        for entry in try await entries(limit: bounds.maxEntries + Int(Self.trimInterval)) {
            data += try encoder.encode(entry)
            data.append(UInt8(ascii: "\n"))
        }
        return data
    }
}
