import Foundation
import GRDB
import SyncModels

/// One scope's checksums on this device (docs/PROTOCOL.md, "Checksums"), kept in `scope_checksums` in the
/// transactions that change what the device holds.
///
/// `applied` is what the server's checksum at the device's cursor must equal: the sum over every event the
/// device applied in the scope (a folded row counting what it carries). `held` follows the confirmed rows
/// in the log (the store adds what it inserts; triggers add rows confirmed by status and subtract deleted
/// ones), `pruned` what left the log into the projections' snapshots on purpose (a prune, or folding on
/// arrival). A row lost or added behind the store's back breaks `held + pruned == applied`.
public struct ScopeChecksum: Sendable, Hashable, Codable {
    public var scope: String
    public var applied: Int64
    public var held: Int64
    public var pruned: Int64
    /// The highest seq pruned or folded on arrival: at or below it the log misses rows on purpose.
    public var prunedThrough: Int64

    public init(scope: String, applied: Int64 = 0, held: Int64 = 0, pruned: Int64 = 0, prunedThrough: Int64 = 0) {
        self.scope = scope
        self.applied = applied
        self.held = held
        self.pruned = pruned
        self.prunedThrough = prunedThrough
    }

    /// Whether the log and the pruned sum add up to what was applied.
    public var isConsistent: Bool { held &+ pruned == applied }
}

/// The sum of a range of a scope's confirmed rows as the device holds them, computed from the rows
/// (`EventStore.rangeChecksum`).
public struct RangeChecksum: Sendable, Hashable, Codable {
    /// The sum of each row's checksum recomputed from its fields and payload (a folded row: what it
    /// carries).
    public var checksum: Int64
    /// How many rows the range holds.
    public var events: Int
    /// The seqs of rows whose stored checksum differs from the recomputed one (damaged in place).
    public var damaged: [Int64]

    public init(checksum: Int64, events: Int, damaged: [Int64]) {
        self.checksum = checksum
        self.events = events
        self.damaged = damaged
    }
}

/// What one repaired range changed (`EventStore.replaceConfirmed`).
public struct RangeRepair: Sendable, Hashable, Codable {
    public var scope: String
    public var after: Int64
    public var through: Int64
    /// Rows the device held in the range before (deleted).
    public var removed: Int
    /// Rows written from the server's answer.
    public var written: Int
    /// Confirmed rows, intact, whose event the server's answer does not have: the server lost them (or holds
    /// them at another seq). They were made pending again, so that the next push gives them back (the server
    /// keeps one copy, by id): a repair never drops what only this device holds.
    public var repended: Int

    public init(scope: String, after: Int64, through: Int64, removed: Int, written: Int, repended: Int = 0) {
        self.scope = scope
        self.after = after
        self.through = through
        self.removed = removed
        self.written = written
        self.repended = repended
    }
}

/// Per-scope sums to add in one transaction.
struct ChecksumDelta {
    var applied: Int64 = 0
    var held: Int64 = 0
    var pruned: Int64 = 0
    var prunedThrough: Int64 = 0
}

extension EventStore {
    /// Migration `eventstore.v8.checksums`.
    static func createChecksums(_ db: Database) throws {
        try db.execute(
            sql: """
                ALTER TABLE events ADD COLUMN checksum INTEGER;
                ALTER TABLE events ADD COLUMN carries INTEGER;
                CREATE TABLE scope_checksums (
                    scope TEXT PRIMARY KEY,
                    applied INTEGER NOT NULL DEFAULT 0,
                    held INTEGER NOT NULL DEFAULT 0,
                    pruned INTEGER NOT NULL DEFAULT 0,
                    pruned_through INTEGER NOT NULL DEFAULT 0
                ) WITHOUT ROWID;
                CREATE TRIGGER events_checksum_delete AFTER DELETE ON events WHEN OLD.status = 'confirmed' BEGIN
                    UPDATE scope_checksums SET held = held - coalesce(OLD.checksum, 0) WHERE scope = OLD.scope;
                END;
                CREATE TRIGGER events_checksum_confirm AFTER UPDATE OF status ON events
                WHEN NEW.status = 'confirmed' AND OLD.status != 'confirmed' BEGIN
                    INSERT INTO scope_checksums (scope, applied, held)
                        VALUES (NEW.scope, coalesce(NEW.checksum, 0), coalesce(NEW.checksum, 0))
                    ON CONFLICT (scope) DO UPDATE
                        SET applied = applied + excluded.applied, held = held + excluded.held;
                END;
                """)
        // Rows written before: their checksums, once. History pruned before is not known here: such a
        // device's sums stay below the server's, and its first verification repairs it (by a reset).
        let rows = try Row.fetchCursor(
            db,
            sql: """
                SELECT position, event_id, stream, type, schema_version, hlc, dot_replica, dot_counter, payload
                FROM events
                """)
        let update = try db.makeStatement(sql: "UPDATE events SET checksum = ? WHERE position = ?")
        while let row = try rows.next() {
            let position: Int64 = row[0]
            guard let checksum = try? Self.ownChecksum(row, from: 1) else { continue }
            try update.execute(arguments: [checksum, position])
        }
        try db.execute(
            sql: """
                INSERT INTO scope_checksums (scope, applied, held)
                SELECT scope, coalesce(sum(checksum), 0), coalesce(sum(checksum), 0) FROM events
                WHERE status = 'confirmed' GROUP BY scope
                """)
    }

    /// The checksum of a log row from its columns `event_id, stream, type, schema_version, hlc, dot_replica,
    /// dot_counter, payload`, starting at column `first`.
    static func ownChecksum(_ row: Row, from first: Int) throws -> Int64 {
        let id = try EventID(row[first] as String)
        let hlc = try HLCTimestamp(row[first + 4] as String)
        let dot = Dot(replica: try ReplicaID(row[first + 5] as String), counter: UInt64(bitPattern: row[first + 6]))
        let stream: String = row[first + 1]
        let type: String = row[first + 2]
        let schemaVersion: Int = row[first + 3]
        return try StoredEvent.parse(row, first + 7) { payload in
            EventChecksum.of(
                id: id.uuid, stream: stream, type: type, schemaVersion: schemaVersion, hlc: hlc, dot: dot,
                payload: payload)
        }
    }

    /// Adds `deltas` to their scopes' sums.
    static func addChecksums(_ deltas: [String: ChecksumDelta], _ db: Database) throws {
        guard !deltas.isEmpty else { return }
        let statement = try db.cachedStatement(
            sql: """
                INSERT INTO scope_checksums (scope, applied, held, pruned, pruned_through) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (scope) DO UPDATE SET applied = applied + excluded.applied, held = held + excluded.held,
                    pruned = pruned + excluded.pruned, pruned_through = max(pruned_through, excluded.pruned_through)
                """)
        for (scope, delta) in deltas {
            try statement.execute(
                arguments: [scope, delta.applied, delta.held, delta.pruned, delta.prunedThrough])
        }
    }

    /// Before confirmed rows matching `filter` (a condition on `events`) leave the log into the projections'
    /// snapshots: adds their checksums to their scopes' `pruned` (the delete trigger takes them from `held`).
    static func notePruned(where filter: String, arguments: StatementArguments, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO scope_checksums (scope, pruned, pruned_through)
                SELECT scope, coalesce(sum(checksum), 0), coalesce(max(seq), 0) FROM events
                WHERE status = 'confirmed' AND (\(filter)) GROUP BY scope
                ON CONFLICT (scope) DO UPDATE SET pruned = pruned + excluded.pruned,
                    pruned_through = max(pruned_through, excluded.pruned_through)
                """, arguments: arguments)
    }

    /// What events folded on arrival since `folded_cursor` was set added to their scopes' sums, per scope
    /// (`scope=sum` separated by spaces): a rewind to that cursor takes it back, since they come again.
    static let foldedChecksumsKey = "folded_checksums"

    /// Adds `sums` (folded on arrival in this transaction) to what a rewind would take back, while a
    /// folded cursor is kept.
    static func holdFoldedChecksums(_ sums: [String: Int64], _ db: Database) throws {
        guard !sums.isEmpty, try meta(foldedCursorKey, db) != nil else { return }
        try setSums(try self.sums(of: foldedChecksumsKey, db).merging(sums) { $0 &+ $1 }, of: foldedChecksumsKey, db)
    }

    /// The per-scope sums stored under `key` (`scope=sum` separated by spaces).
    static func sums(of key: String, _ db: Database) throws -> [String: Int64] {
        var sums: [String: Int64] = [:]
        for part in (try meta(key, db) ?? "").split(separator: " ") {
            let pair = part.split(separator: "=", maxSplits: 1)
            if pair.count == 2, let sum = Int64(pair[1]) { sums[String(pair[0])] = sum }
        }
        return sums
    }

    static func setSums(_ sums: [String: Int64], of key: String, _ db: Database) throws {
        try setMeta(key, sums.keys.sorted().map { "\($0)=\(sums[$0]!)" }.joined(separator: " "), db)
    }

    /// Takes back from the scopes' applied and pruned sums what `key` holds (what comes again after a
    /// rewind), and forgets it.
    static func unapplySums(of key: String, _ db: Database) throws {
        var deltas: [String: ChecksumDelta] = [:]
        for (scope, sum) in try sums(of: key, db) {
            deltas[scope] = ChecksumDelta(applied: 0 &- sum, held: 0, pruned: 0 &- sum)
        }
        try addChecksums(deltas, db)
        try removeMeta(key, db)
    }

    /// What the answers to reads from position 0 said was purged, per scope (`scope=sum`), until the cursor
    /// goes back to the start (a rewind to it takes them back: they come again).
    static let purgedChecksumsKey = "purged_checksums"

    /// Adds what the server purged (`PullResponse.purged`) to the scopes' applied and pruned sums: the device
    /// never gets those rows, and holds their effect the way it holds a pruned range's.
    static func applyPurgedChecksums(_ purged: [Scope: Int64], _ db: Database) throws {
        guard !purged.isEmpty else { return }
        var deltas: [String: ChecksumDelta] = [:]
        var held = try sums(of: purgedChecksumsKey, db)
        for (scope, sum) in purged {
            deltas[scope.name] = ChecksumDelta(applied: sum, held: 0, pruned: sum)
            held[scope.name] = sum
        }
        try addChecksums(deltas, db)
        try setSums(held, of: purgedChecksumsKey, db)
    }

    /// Each scope's checksums.
    public func scopeChecksums() async throws -> [String: ScopeChecksum] {
        try await database.writer.read { db in
            var sums: [String: ScopeChecksum] = [:]
            for row in try Row.fetchAll(
                db, sql: "SELECT scope, applied, held, pruned, pruned_through FROM scope_checksums")
            {
                let scope: String = row[0]
                sums[scope] = ScopeChecksum(
                    scope: scope, applied: row[1], held: row[2], pruned: row[3], prunedThrough: row[4])
            }
            return sums
        }
    }

    /// The sum of `scope`'s confirmed rows with a seq in `(after, through]`, each row's checksum recomputed
    /// from its fields and payload (a folded row counts what it carries), and the rows whose stored checksum
    /// differs from the recomputed one.
    public func rangeChecksum(scope: String, after: Int64, through: Int64) async throws -> RangeChecksum {
        try await database.writer.read { db in
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT seq, event_id, stream, type, schema_version, hlc, dot_replica, dot_counter, payload,
                           checksum, carries
                    FROM events INDEXED BY events_scope_seq
                    WHERE status = 'confirmed' AND scope = ? AND seq > ? AND seq <= ? AND seq IS NOT NULL
                    """, arguments: [scope, after, through])
            var sum: Int64 = 0
            var count = 0
            var damaged: [Int64] = []
            while let row = try rows.next() {
                count += 1
                let stored: Int64? = row[9]
                let expected: Int64
                if let carries: Int64 = row[10] {
                    expected = carries
                } else if let own = try? Self.ownChecksum(row, from: 1) {
                    expected = own
                } else {
                    damaged.append(row[0])
                    continue
                }
                if stored != expected { damaged.append(row[0]) }
                sum &+= expected
            }
            return RangeChecksum(checksum: sum, events: count, damaged: damaged)
        }
    }

    /// The sum of the checksums stored with `scope`'s confirmed rows with a seq in `(after, through]`, and
    /// how many there are: one indexed aggregate, without reading the payloads (a lost or added row shows;
    /// a payload altered in place does not, see `rangeChecksum`).
    public func storedRangeChecksum(scope: String, after: Int64, through: Int64) async throws -> RangeChecksum {
        try await database.writer.read { db in
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT coalesce(sum(checksum), 0), count(*) FROM events INDEXED BY events_scope_seq
                    WHERE status = 'confirmed' AND scope = ? AND seq > ? AND seq <= ? AND seq IS NOT NULL
                    """, arguments: [scope, after, through])
            return RangeChecksum(checksum: row?[0] ?? 0, events: row?[1] ?? 0, damaged: [])
        }
    }

    /// Replaces `scope`'s confirmed rows with a seq in `(after, through]` by `events` (the server's rows of
    /// that range, with `payloads`, their canonical bytes when known), in one transaction, and counts the
    /// scope's `held` sum again from its rows. Pending and rejected events are never touched: a pending event
    /// the server holds in the range is confirmed instead. An intact confirmed row (its stored checksum its
    /// own) whose event the answer does not have becomes pending again (`RangeRepair.repended`), even at a
    /// seq a row of the answer takes: the server lost it (a restore from a backup, after which other
    /// devices' events took its seq), and a repair never drops what only this device holds. The streams whose
    /// rows were removed or written are re-derived in every projection (`replay(streams:)`), in the same
    /// transaction: the projections' other rows are left as they are.
    public func replaceConfirmed(
        scope: String, after: Int64, through: Int64, with events: [Event], payloads: [Data?] = []
    ) async throws -> RangeRepair {
        let repair = try await database.writer.write { db in
            let incoming = events.filter {
                $0.scope.name == scope && ($0.seq ?? 0) > after && ($0.seq ?? 0) <= through
            }
            let ids = Set(incoming.map(\.id.description))
            var removed = 0
            var repended = 0
            // The streams whose rows were replaced: re-derived in every projection at the end.
            var affected: Set<String> = []
            let held = try Row.fetchAll(
                db,
                sql: """
                    SELECT position, event_id, stream, type, schema_version, hlc, dot_replica, dot_counter, payload,
                           checksum, carries
                    FROM events WHERE status = 'confirmed' AND scope = ? AND seq > ? AND seq <= ?
                    """,
                arguments: [scope, after, through])
            for row in held {
                let id: String = row[1]
                let position: Int64 = row[0]
                let stored: Int64? = row[9]
                let carries: Int64? = row[10]
                if !ids.contains(id), carries == nil, let own = try? Self.ownChecksum(row, from: 1), own == stored {
                    try db.execute(
                        sql: "UPDATE events SET status = 'pending', seq = NULL WHERE position = ?",
                        arguments: [position])
                    repended += 1
                    continue
                }
                try db.execute(sql: "DELETE FROM events WHERE position = ?", arguments: [position])
                removed += 1
                affected.insert(row[2])
            }
            var insert = try EventRowInsert(db, ifNew: true)
            var written = 0
            var inserted = 0
            for (index, event) in events.enumerated() {
                guard event.scope.name == scope, let seq = event.seq, seq > after, seq <= through else { continue }
                let payload = (index < payloads.count ? payloads[index] : nil) ?? PayloadCodec.encode(event)
                if try insert(event, payload: payload, status: .confirmed, db) != nil {
                    written += 1
                    inserted += 1
                    affected.insert(event.stream)
                } else {
                    // The server holds one of this device's pending events: confirmed by status (the trigger
                    // counts it).
                    try db.execute(
                        sql:
                            "UPDATE events SET status = 'confirmed', seq = ? WHERE scope = ? AND event_id = ? AND status = 'pending'",
                        arguments: [seq, scope, event.id.description])
                    written += db.changesCount
                }
            }
            try Self.count(.confirmed, inserted, db)
            try Self.recountHeld(scope: scope, db)
            try self.replay(streams: affected, db)
            return RangeRepair(
                scope: scope, after: after, through: through, removed: removed, written: written,
                repended: repended)
        }
        publish(.rebuilt, [])
        return repair
    }

    /// Counts `scope`'s sums again from its rows (`recountHeld`), in a transaction of its own: what a
    /// verification does when the rows agree with the server's but the sums do not.
    public func recountChecksums(scope: String) async throws -> ScopeChecksum {
        try await database.writer.write { db in
            try Self.recountHeld(scope: scope, db)
            let row = try Row.fetchOne(
                db, sql: "SELECT applied, held, pruned, pruned_through FROM scope_checksums WHERE scope = ?",
                arguments: [scope])
            return ScopeChecksum(
                scope: scope, applied: row?[0] ?? 0, held: row?[1] ?? 0, pruned: row?[2] ?? 0,
                prunedThrough: row?[3] ?? 0)
        }
    }

    /// Sets `scope`'s `held` to the sum of its confirmed rows' checksums as stored, and `applied` to
    /// `held + pruned`: after a repair made the rows right, what they add up to is what was applied.
    static func recountHeld(scope: String, _ db: Database) throws {
        let held =
            try Int64.fetchOne(
                db, sql: "SELECT coalesce(sum(checksum), 0) FROM events WHERE status = 'confirmed' AND scope = ?",
                arguments: [scope]) ?? 0
        try db.execute(
            sql: """
                INSERT INTO scope_checksums (scope, applied, held) VALUES (?1, ?2, ?2)
                ON CONFLICT (scope) DO UPDATE SET held = excluded.held, applied = excluded.held + pruned
                """, arguments: [scope, held])
    }
}
