import Foundation
import Logging
import PostgresNIO
import SyncModels
import SyncProtocol

/// The SQL of the event log: locking scope heads, finding stored ids and stream versions, writing a batch,
/// and reading pages. Every method runs on the connection it is given, so the caller owns transactions.
///
/// Every statement on a table keyed by scope names its scopes with `scope = ANY(…)` (or `=`), even where a
/// join with the request's rows already implies them: on a Citus cluster that predicate is what routes the
/// statement to the shards of those scopes only; without it, a push's statements ran on all 32 shards of both
/// workers, a two-phase commit each time (docs/SCALING.md).
struct EventRepository: Sendable {
    /// The NOTIFY channel a commit signals on: one notification per scope it appended to, `scope head` (the
    /// scope's name, a space, its new head; see `LongPollHub.notification`).
    static let channel = "sync_events"

    /// Whether the hot statements (the push's, and the pages and heads that pulls and live tails read) run as
    /// prepared statements (`FixedStatement`): on one PostgreSQL. On a Citus cluster they run as unnamed
    /// statements, as the cluster routes them (docs/SCALING.md).
    var prepares = false

    /// A scope's head row.
    struct ScopeHead: Sendable, Hashable {
        /// The seq of the scope's last event (0 before the first).
        var head: Int64
        /// The lowest seq still stored; a cursor below `retainedFromSeq - 1` cannot continue.
        var retainedFromSeq: Int64
        /// How far compaction has folded the scope (`scope_compaction`): at or below it, seqs have gaps.
        /// Read by `selectHeads`; 0 from `lockScopes`.
        var compactedThrough: Int64 = 0
        /// The sum of the checksums of the events compaction purged (`scope_compaction.purged_checksum`).
        /// Read by `selectHeads`; 0 from `lockScopes`.
        var purgedChecksum: Int64 = 0
    }

    /// One row to insert.
    struct NewEvent: Sendable {
        var event: Event
        var seq: Int64
        var payloadJSON: String
        /// The event's checksum (`EventChecksum`), or, for a folded row, what it carries; nil when unknown.
        var checksum: Int64?

        /// A row whose checksum is the event's own, computed from its fields and payload text.
        init(event: Event, seq: Int64, payloadJSON: String) {
            var text = payloadJSON
            let checksum = text.withUTF8 { bytes in
                EventChecksum.of(
                    id: event.id.uuid, stream: event.stream, type: event.type, schemaVersion: event.schemaVersion,
                    hlc: event.hlc, dot: event.dot, payload: UnsafeRawBufferPointer(bytes))
            }
            self.init(event: event, seq: seq, payloadJSON: text, checksum: checksum)
        }

        init(event: Event, seq: Int64, payloadJSON: String, checksum: Int64?) {
            self.event = event
            self.seq = seq
            self.payloadJSON = payloadJSON
            self.checksum = checksum
        }
    }

    /// Locks the head rows of `scopes` (sorted, the lock order that rules out deadlocks), creating the
    /// missing ones, in one round trip (`sync_lock_scopes`, migration `0007-lock-scopes-function`). Must run
    /// inside a transaction; the locks last until it ends. Also returns the transaction's `now()`, the time its
    /// rows are received at (`received_at` defaults to it).
    func lockScopes(_ scopes: [Scope], on connection: PostgresConnection, logger: Logger) async throws
        -> (heads: [Scope: ScopeHead], now: Date)
    {
        var bindings = PostgresBindings()
        try bindings.append(scopes.map(\.name).sorted())
        var heads: [Scope: ScopeHead] = [:]
        var now = Date()
        try await connection.forEachRow(LockScopes.self, bindings, prepared: prepares, logger: logger) { row in
            let (scope, head, retained, time) = try row.decode((String, Int64, Int64, Date).self)
            heads[try Scope(scope)] = ScopeHead(head: head, retainedFromSeq: retained)
            now = time
        }
        return (heads, now)
    }

    enum LockScopes: FixedStatement {
        static let name = "sync_lock_scopes_2"
        static let sql = "SELECT scope, head, retained_from_seq, now() FROM sync_lock_scopes($1::text[])"
    }

    /// The head rows of `names` (those that exist), with each scope's folded point, unlocked.
    func selectHeads(_ names: [String], on connection: PostgresConnection, logger: Logger) async throws
        -> [Scope: ScopeHead]
    {
        var bindings = PostgresBindings()
        try bindings.append(names)
        var heads: [Scope: ScopeHead] = [:]
        try await connection.forEachRow(SelectHeads.self, bindings, prepared: prepares, logger: logger) { row in
            let (scope, head, retained, through, purged) = try row.decode((String, Int64, Int64, Int64, Int64).self)
            heads[try Scope(scope)] = ScopeHead(
                head: head, retainedFromSeq: retained, compactedThrough: through, purgedChecksum: purged)
        }
        return heads
    }

    enum SelectHeads: FixedStatement {
        static let name = "sync_select_heads_1"
        static let sql = """
            SELECT s.scope, s.head, s.retained_from_seq, coalesce(c.compacted_through, 0),
                   coalesce(c.purged_checksum, 0)
            FROM scopes s LEFT JOIN scope_compaction c ON c.scope = s.scope
            WHERE s.scope = ANY($1::text[])
            """
    }

    /// An event's identity in the log: ids are unique within a scope (`events_scope_event_id_key`).
    struct EventKey: Sendable, Hashable {
        var scope: Scope
        var id: EventID
    }

    /// The seqs of the given events (scope and id) that are already stored.
    ///
    /// Never prepared, also where `prepares`, nor is `streamVersions`: their plans must follow the table's size.
    /// A prepared statement settles on a generic plan after five runs, and one made while `events` held a few
    /// pages (a new database) scans the table and hashes, which every connection then keeps doing until an
    /// `ANALYZE` invalidates it. In a load test's first minute, such a lookup read about 3,900 buffers where the
    /// index needs 4 an event, with its lane waiting. Unprepared, each is planned for the table as it is.
    func storedSeqs(_ keys: [EventKey], on connection: PostgresConnection, logger: Logger) async throws
        -> [EventKey: Int64]
    {
        guard !keys.isEmpty else { return [:] }
        let scopes = keys.map(\.scope.name)
        var bindings = PostgresBindings()
        try bindings.append(scopes)
        try bindings.append(keys.map(\.id.uuid))
        try bindings.append(Array(Set(scopes)))
        var stored: [EventKey: Int64] = [:]
        try await connection.forEachRow(StoredSeqs.self, bindings, prepared: false, logger: logger) { row in
            let (scope, id, seq) = try row.decode((String, UUID, Int64).self)
            stored[EventKey(scope: try Scope(scope), id: EventID(uuid: id))] = seq
        }
        return stored
    }

    enum StoredSeqs: FixedStatement {
        static let name = "sync_stored_seqs_1"
        static let sql = """
            SELECT e.scope, e.event_id, e.seq FROM events e
            JOIN unnest($1::text[], $2::uuid[]) AS k(scope, event_id)
              ON e.scope = k.scope AND e.event_id = k.event_id
            WHERE e.scope = ANY($3::text[])
            """
    }

    /// The current versions of the given streams (absent streams have none).
    func streamVersions(_ keys: [PushPlan.StreamKey], on connection: PostgresConnection, logger: Logger)
        async throws -> [PushPlan.StreamKey: Int64]
    {
        guard !keys.isEmpty else { return [:] }
        let scopes = keys.map(\.scope.name)
        var bindings = PostgresBindings()
        try bindings.append(scopes)
        try bindings.append(keys.map(\.stream))
        try bindings.append(Array(Set(scopes)))
        var versions: [PushPlan.StreamKey: Int64] = [:]
        try await connection.forEachRow(StreamVersions.self, bindings, prepared: false, logger: logger) { row in
            let (scope, stream, version) = try row.decode((String, String, Int64).self)
            versions[PushPlan.StreamKey(scope: try Scope(scope), stream: stream)] = version
        }
        return versions
    }

    enum StreamVersions: FixedStatement {
        static let name = "sync_stream_versions_1"
        static let sql = """
            SELECT s.scope, s.stream, s.version FROM streams s
            JOIN unnest($1::text[], $2::text[]) AS k(scope, stream)
              ON s.scope = k.scope AND s.stream = k.stream
            WHERE s.scope = ANY($3::text[])
            """
    }

    /// An unprepared write (on a Citus cluster) of one scope with at most this many events, and streams, writes
    /// them as `VALUES` rows; others as `unnest` of arrays. On a Citus cluster, `INSERT … SELECT` runs through
    /// the coordinator on a connection of its own, so a push written that way commits in two phases; `VALUES`
    /// rows go to their shard on the transaction's connection, and a push of one scope commits in one
    /// (docs/SCALING.md). A write of several scopes (a group of pushes) spans shards, and so workers, anyway.
    /// On one PostgreSQL every write is the prepared statement of arrays (`Write`): parsed and planned once
    /// per connection, it costs a one-event push about a third less of PostgreSQL's time than `VALUES` parsed
    /// and planned each time.
    static let valuesRowsLimit = 32

    /// Binds values to the `$n` parameters of a statement being written.
    struct Binder {
        var bindings = PostgresBindings()

        /// The placeholder of `value`, bound.
        mutating func callAsFunction<Value: PostgresEncodable>(_ value: Value) throws -> String {
            try bindings.append(value)
            return "$\(bindings.count)"
        }
    }

    /// Inserts the events, moves the scope heads, stores the new stream versions and queues a NOTIFY per
    /// scope, in one statement: prepared (`Write`, every value an array) when `prepares`, else unnamed, with
    /// `VALUES` rows for a few events of one scope (`valuesRowsLimit`).
    /// - Returns: how many events were inserted (fewer than given only if another transaction stored one
    ///   of the ids meanwhile, in which case the caller must roll back and retry to stay gap-free).
    func write(
        _ rows: [NewEvent], heads: [Scope: Int64], streams: [PushPlan.StreamKey: Int64],
        on connection: PostgresConnection, logger: Logger
    ) async throws -> Int {
        var bind = Binder()
        let asValues =
            !prepares && heads.count == 1 && !rows.isEmpty && rows.count <= Self.valuesRowsLimit
            && streams.count <= Self.valuesRowsLimit
        let sql = try Self.writeSQL(rows, heads: heads, streams: streams, asValues: asValues, &bind)
        var inserted = 0
        if prepares {
            assert(sql == Write.sql, "the arrays' statement is the same text every time")
            for try await row in try await connection.checkedExecute(Write.self, bind.bindings, logger: logger) {
                inserted = Int(try row.decode((Int64, Int64, Int64, Int64).self).0)
            }
            return inserted
        }
        let result = try await connection.checkedQuery(
            PostgresQuery(unsafeSQL: sql, binds: bind.bindings), logger: logger)
        for try await (count, _, _, _) in result.decode((Int64, Int64, Int64, Int64).self) {
            inserted = Int(count)
        }
        return inserted
    }

    /// `write`'s statement with every value an array: its text does not depend on the rows.
    enum Write: FixedStatement {
        static let name = "sync_write_1"
        static let sql: String = {
            var bind = Binder()
            // Empty inputs make the same text as any others: only the bindings differ.
            return try! EventRepository.writeSQL([], heads: [:], streams: [:], asValues: false, &bind)
        }()
    }

    /// The text of `write`'s statement, its values bound to `bind`.
    static func writeSQL(
        _ rows: [NewEvent], heads: [Scope: Int64], streams: [PushPlan.StreamKey: Int64], asValues: Bool,
        _ bind: inout Binder
    ) throws -> String {
        let events = try asValues ? Self.eventValues(rows, &bind) : Self.eventArrays(rows, &bind)
        let versions: String
        if asValues {
            versions =
                streams.isEmpty
                ? "SELECT 1 WHERE false"
                : """
                INSERT INTO streams (scope, stream, version)
                VALUES \(try streams.map { "(\(try bind($0.key.scope.name)), \(try bind($0.key.stream)), \(try bind($0.value)))" }.joined(separator: ", "))
                ON CONFLICT (scope, stream) DO UPDATE SET version = GREATEST(streams.version, EXCLUDED.version)
                RETURNING 1
                """
        } else {
            versions = """
                INSERT INTO streams (scope, stream, version)
                SELECT * FROM unnest(\(try bind(streams.keys.map(\.scope.name)))::text[], \(try bind(streams.keys.map(\.stream)))::text[],
                                     \(try bind(streams.keys.map { streams[$0]! }))::int8[])
                ON CONFLICT (scope, stream) DO UPDATE SET version = GREATEST(streams.version, EXCLUDED.version)
                RETURNING 1
                """
        }
        var sums: [Scope: Int64] = [:]
        for row in rows { sums[row.event.scope, default: 0] += row.checksum ?? 0 }
        let headScopes = try bind(heads.keys.map(\.name))
        let headValues = try bind(heads.keys.map { heads[$0]! })
        let headSums = try bind(heads.keys.map { sums[$0] ?? 0 })
        return """
            WITH inserted AS (
                INSERT INTO events (scope, seq, event_id, stream, stream_version, type, schema_version, hlc,
                                    dot_replica, dot_counter, payload, checksum)
                \(events)
                ON CONFLICT (scope, event_id) DO NOTHING
                RETURNING 1
            ), moved AS (
                UPDATE scopes SET head = h.head, checksum = scopes.checksum + h.added
                FROM unnest(\(headScopes)::text[], \(headValues)::int8[], \(headSums)::int8[]) AS h(scope, head, added)
                WHERE scopes.scope = h.scope AND scopes.scope = ANY(\(headScopes)::text[])
                RETURNING 1
            ), versions AS (
                \(versions)
            ), woken AS (
                SELECT count(pg_notify(\(try bind(Self.channel)), h.scope || ' ' || h.head)) AS notified
                FROM unnest(\(headScopes)::text[], \(headValues)::int8[]) AS h(scope, head)
            )
            SELECT (SELECT count(*) FROM inserted), (SELECT count(*) FROM moved), (SELECT count(*) FROM versions),
                   (SELECT notified FROM woken)
            """
    }

    /// Rows a statement of `writeInParts` inserts at most (12 parameters each).
    static let partRowsLimit = 1_000

    /// What `write` does, as one statement per part instead of one with a part per CTE: for Citus, which
    /// plans each modifying CTE of a statement that spans shards as a plan of its own and passes its result
    /// through an intermediate result file (created, written, read and deleted for every push group: on a
    /// worker, most of the time a group took). Each part here runs on the shards it names, pushed down, with
    /// no intermediate result: the events and the stream versions as `VALUES` rows (at most `partRowsLimit`
    /// events a statement), the heads joined with the request's arrays, and the `NOTIFY`s.
    /// - Returns: how many events were inserted, as `write`.
    func writeInParts(
        _ rows: [NewEvent], heads: [Scope: Int64], streams: [PushPlan.StreamKey: Int64],
        on connection: PostgresConnection, logger: Logger
    ) async throws -> Int {
        var inserted = 0
        var start = 0
        while start < rows.count {
            let part = Array(rows[start..<min(rows.count, start + Self.partRowsLimit)])
            start += part.count
            var bind = Binder()
            let sql = """
                INSERT INTO events (scope, seq, event_id, stream, stream_version, type, schema_version, hlc,
                                    dot_replica, dot_counter, payload, checksum)
                \(try Self.eventValues(part, &bind))
                ON CONFLICT (scope, event_id) DO NOTHING
                RETURNING 1
                """
            let result = try await connection.checkedQuery(
                PostgresQuery(unsafeSQL: sql, binds: bind.bindings), logger: logger)
            for try await _ in result { inserted += 1 }
        }
        var sums: [Scope: Int64] = [:]
        for row in rows { sums[row.event.scope, default: 0] += row.checksum ?? 0 }
        let scopes = heads.keys.map(\.name)
        let values = heads.keys.map { heads[$0]! }
        let added = heads.keys.map { sums[$0] ?? 0 }
        try await connection.checkedQuery(
            """
            UPDATE scopes SET head = h.head, checksum = scopes.checksum + h.added
            FROM unnest(\(scopes)::text[], \(values)::int8[], \(added)::int8[]) AS h(scope, head, added)
            WHERE scopes.scope = h.scope AND scopes.scope = ANY(\(scopes)::text[])
            """, logger: logger)
        let keys = Array(streams.keys)
        var next = 0
        while next < keys.count {
            let part = keys[next..<min(keys.count, next + Self.partRowsLimit * 4)]
            next += part.count
            var bind = Binder()
            let rows = try part.map {
                "(\(try bind($0.scope.name)), \(try bind($0.stream)), \(try bind(streams[$0]!)))"
            }
            try await connection.checkedQuery(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO streams (scope, stream, version) VALUES \(rows.joined(separator: ", "))
                        ON CONFLICT (scope, stream) DO UPDATE SET version = GREATEST(streams.version, EXCLUDED.version)
                        """, binds: bind.bindings), logger: logger)
        }
        try await connection.checkedQuery(
            """
            SELECT count(pg_notify(\(Self.channel), h.scope || ' ' || h.head))
            FROM unnest(\(scopes)::text[], \(values)::int8[]) AS h(scope, head)
            """, logger: logger)
        return inserted
    }

    /// The rows to insert as `VALUES` (a few).
    static func eventValues(_ rows: [NewEvent], _ bind: inout Binder) throws -> String {
        var values: [String] = []
        values.reserveCapacity(rows.count)
        for row in rows {
            let event = row.event
            let fields = [
                try bind(event.scope.name), try bind(row.seq), try bind(event.id.uuid), try bind(event.stream),
                try bind(event.streamVersion), try bind(event.type), try bind(Int32(clamping: event.schemaVersion)),
                try bind(event.hlc.description), try bind(event.dot.replica.description),
                try bind(Int64(bitPattern: event.dot.counter)), "\(try bind(row.payloadJSON))::json",
                try bind(row.checksum ?? 0),
            ]
            values.append("(" + fields.joined(separator: ", ") + ")")
        }
        return "VALUES " + values.joined(separator: ", ")
    }

    /// The rows to insert as a `SELECT` of `unnest`ed arrays, a bind per column (many).
    static func eventArrays(_ rows: [NewEvent], _ bind: inout Binder) throws -> String {
        var scopes: [String] = []
        var seqs: [Int64] = []
        var ids: [UUID] = []
        var streamNames: [String] = []
        var streamVersions: [Int64] = []
        var types: [String] = []
        var schemaVersions: [Int32] = []
        var hlcs: [String] = []
        var replicas: [String] = []
        var counters: [Int64] = []
        var payloads: [String] = []
        var checksums: [Int64] = []
        checksums.reserveCapacity(rows.count)
        scopes.reserveCapacity(rows.count)
        seqs.reserveCapacity(rows.count)
        ids.reserveCapacity(rows.count)
        streamNames.reserveCapacity(rows.count)
        streamVersions.reserveCapacity(rows.count)
        types.reserveCapacity(rows.count)
        schemaVersions.reserveCapacity(rows.count)
        hlcs.reserveCapacity(rows.count)
        replicas.reserveCapacity(rows.count)
        counters.reserveCapacity(rows.count)
        payloads.reserveCapacity(rows.count)
        for row in rows {
            scopes.append(row.event.scope.name)
            seqs.append(row.seq)
            ids.append(row.event.id.uuid)
            streamNames.append(row.event.stream)
            streamVersions.append(row.event.streamVersion)
            types.append(row.event.type)
            schemaVersions.append(Int32(clamping: row.event.schemaVersion))
            hlcs.append(row.event.hlc.description)
            replicas.append(row.event.dot.replica.description)
            counters.append(Int64(bitPattern: row.event.dot.counter))
            payloads.append(row.payloadJSON)
            checksums.append(row.checksum ?? 0)
        }
        return """
            SELECT r.scope, r.seq, r.event_id, r.stream, r.stream_version, r.type, r.schema_version, r.hlc,
                   r.dot_replica, r.dot_counter, r.payload::json, r.checksum
            FROM unnest(\(try bind(scopes))::text[], \(try bind(seqs))::int8[], \(try bind(ids))::uuid[],
                        \(try bind(streamNames))::text[], \(try bind(streamVersions))::int8[], \(try bind(types))::text[],
                        \(try bind(schemaVersions))::int4[], \(try bind(hlcs))::text[], \(try bind(replicas))::text[],
                        \(try bind(counters))::int8[], \(try bind(payloads))::text[], \(try bind(checksums))::int8[])
              AS r(scope, seq, event_id, stream, stream_version, type, schema_version, hlc, dot_replica,
                   dot_counter, payload, checksum)
            """
    }

    /// Up to `limit` events of `scope` after `after`, in seq order: from `events`, and, below `foldedThrough`
    /// (the scope's `compacted_through`), from `folded_events` too, the two merged by seq.
    func events(
        in scope: Scope, after: Int64, limit: Int, foldedThrough: Int64 = 0,
        excluding: (replica: String, foldedThrough: Int64)? = nil, on connection: PostgresConnection,
        logger: Logger
    ) async throws -> [StoredEvent] {
        // Without `excluding`, no replica id is empty: the condition holds for every row.
        let (replica, excludedThrough) = excluding ?? ("", Int64.max)
        var bindings = PostgresBindings()
        try bindings.append(scope.name)
        try bindings.append(after)
        try bindings.append(replica)
        try bindings.append(excludedThrough)
        try bindings.append(Int64(limit))
        var events: [StoredEvent] = []
        events.reserveCapacity(limit)
        try await connection.forEachRow(EventsPage.self, bindings, prepared: prepares, logger: logger) { row in
            events.append(try StoredEvent(pulled: row, scope: scope))
        }
        guard after < foldedThrough else { return events }
        // Folded history: at or below `compacted_through`, never left out (snapshots carry the dot of the
        // last event they fold, which may be anyone's).
        var folded = PostgresBindings()
        try folded.append(scope.name)
        try folded.append(after)
        try folded.append(Int64(limit))
        var snapshots: [StoredEvent] = []
        try await connection.forEachRow(FoldedPage.self, folded, prepared: prepares, logger: logger) { row in
            snapshots.append(try StoredEvent(folded: row, scope: scope))
        }
        guard !snapshots.isEmpty else { return events }
        var merged: [StoredEvent] = []
        merged.reserveCapacity(min(limit, events.count + snapshots.count))
        var (i, j) = (0, 0)
        while merged.count < limit, i < events.count || j < snapshots.count {
            if j == snapshots.count || (i < events.count && events[i].seq < snapshots[j].seq) {
                merged.append(events[i])
                i += 1
            } else {
                merged.append(snapshots[j])
                j += 1
            }
        }
        return merged
    }

    enum EventsPage: FixedStatement {
        static let name = "sync_events_page_1"
        static let sql = """
            SELECT seq, event_id, stream, stream_version, type, schema_version, hlc, dot_replica, dot_counter,
                   payload::text, received_at, checksum
            FROM events WHERE scope = $1 AND seq > $2 AND (dot_replica <> $3 OR seq <= $4)
            ORDER BY seq LIMIT $5
            """
    }

    enum FoldedPage: FixedStatement {
        static let name = "sync_folded_page_1"
        static let sql = """
            SELECT seq, event_id, stream, stream_version, type, schema_version, hlc, dot_replica, dot_counter,
                   payload, received_at, carries
            FROM folded_events WHERE scope = $1 AND seq > $2
            ORDER BY seq LIMIT $3
            """
    }

    /// How many events of `scope` are stored with a seq in `(after, through]`, in `events` and
    /// `folded_events` (index-only counts; callers keep the range to the folded part of the log, about one
    /// row per stream).
    func count(in scope: Scope, after: Int64, through: Int64, on connection: PostgresConnection, logger: Logger)
        async throws -> Int64
    {
        let rows = try await connection.checkedQuery(
            """
            SELECT (SELECT count(*) FROM events WHERE scope = \(scope.name) AND seq > \(after) AND seq <= \(through))
                 + (SELECT count(*) FROM folded_events WHERE scope = \(scope.name) AND seq > \(after) AND seq <= \(through))
            """,
            logger: logger)
        for try await count in rows.decode(Int64.self) { return count }
        return 0
    }

    /// Per scope, the lowest position acknowledged by a replica seen within `seconds` (scopes without one
    /// are left out).
    func lowestAcknowledged(
        in scopes: [String], activeWithinSeconds seconds: Int, on connection: PostgresConnection, logger: Logger
    ) async throws -> [String: Int64] {
        guard !scopes.isEmpty else { return [:] }
        let rows = try await connection.checkedQuery(
            """
            SELECT scope, min(acknowledged_seq) FROM replica_progress
            WHERE scope = ANY(\(scopes)::text[]) AND seen_at > now() - make_interval(secs => \(Double(seconds)))
            GROUP BY scope
            """, logger: logger)
        var lowest: [String: Int64] = [:]
        for try await (scope, seq) in rows.decode((String, Int64).self) { lowest[scope] = seq }
        return lowest
    }

    /// Per scope, the two lowest positions acknowledged by replicas seen within `seconds`, the lowest with its
    /// replica (scopes without one are left out): the stable point, and the stable point among the replicas
    /// other than any one of them (`AcknowledgedFloor.excluding`).
    func lowestAcknowledgements(
        in scopes: [String], activeWithinSeconds seconds: Int, on connection: PostgresConnection, logger: Logger
    ) async throws -> [String: AcknowledgedFloor] {
        guard !scopes.isEmpty else { return [:] }
        let rows = try await connection.checkedQuery(
            """
            SELECT scope, replica, acknowledged_seq FROM (
                SELECT scope, replica, acknowledged_seq,
                       row_number() OVER (PARTITION BY scope ORDER BY acknowledged_seq, replica) AS rank
                FROM replica_progress
                WHERE scope = ANY(\(scopes)::text[]) AND seen_at > now() - make_interval(secs => \(Double(seconds)))
            ) ranked WHERE rank <= 2 ORDER BY scope, rank
            """, logger: logger)
        var floors: [String: AcknowledgedFloor] = [:]
        for try await (scope, replica, seq) in rows.decode((String, String, Int64).self) {
            if var floor = floors[scope] {
                floor.second = seq
                floors[scope] = floor
            } else {
                floors[scope] = AcknowledgedFloor(lowest: seq, lowestReplica: replica, second: nil)
            }
        }
        return floors
    }

    /// Records that `replica` has read up to `positions` (never moving a position back), for compaction's
    /// stable point (docs/ARCHITECTURE.md, "Compaction and retention"); also marks the replica as seen now. `bases`
    /// holds, for the scopes it read from position 0 (a bootstrap), the scope's `retained_from_seq` as read before
    /// those events: the purge level its new state is based on.
    func recordProgress(
        replica: ReplicaID, positions: [Scope: Int64], bases: [Scope: Int64] = [:], on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        guard !positions.isEmpty else { return }
        let scopes = positions.keys.map(\.name)
        let seqs = positions.keys.map { positions[$0]! }
        let based = positions.keys.map { bases[$0] ?? -1 }
        try await connection.checkedQuery(
            """
            INSERT INTO replica_progress (replica, scope, acknowledged_seq, seen_at, based_on_retained)
            SELECT \(replica.description), p.scope, p.seq, now(), GREATEST(p.based, 0)
            FROM unnest(\(scopes)::text[], \(seqs)::int8[], \(based)::int8[]) AS p(scope, seq, based)
            ON CONFLICT (replica, scope) DO UPDATE
            SET acknowledged_seq = GREATEST(replica_progress.acknowledged_seq, EXCLUDED.acknowledged_seq),
                seen_at = EXCLUDED.seen_at,
                based_on_retained = CASE WHEN EXCLUDED.based_on_retained > 0 THEN EXCLUDED.based_on_retained
                                         ELSE replica_progress.based_on_retained END
            """, logger: logger)
    }

    /// Records each replica as seen now in its scope (`ReplicaSightings`), inside a push's transaction: as
    /// `recordProgress` with position 0 (no position moves), as `VALUES` rows, which a Citus cluster writes to
    /// their shards on the transaction's connection.
    func recordSightings(
        _ sightings: [(replica: ReplicaID, scope: Scope)], on connection: PostgresConnection, logger: Logger
    )
        async throws
    {
        guard !sightings.isEmpty else { return }
        var bind = Binder()
        let rows = try sightings.map {
            "(\(try bind($0.replica.description)), \(try bind($0.scope.name)), 0, now(), 0)"
        }
        try await connection.checkedQuery(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO replica_progress (replica, scope, acknowledged_seq, seen_at, based_on_retained)
                    VALUES \(rows.joined(separator: ", "))
                    ON CONFLICT (replica, scope) DO UPDATE SET seen_at = EXCLUDED.seen_at
                    """, binds: bind.bindings), logger: logger)
    }

    /// Per scope, `replica`'s acknowledged position and the purge level its state is based on (scopes it
    /// was never seen in are left out).
    func progress(replica: ReplicaID, in scopes: [String], on connection: PostgresConnection, logger: Logger)
        async throws -> [String: (acknowledged: Int64, basedOnRetained: Int64)]
    {
        let rows = try await connection.checkedQuery(
            """
            SELECT scope, acknowledged_seq, based_on_retained FROM replica_progress
            WHERE replica = \(replica.description) AND scope = ANY(\(scopes)::text[])
            """, logger: logger)
        var found: [String: (acknowledged: Int64, basedOnRetained: Int64)] = [:]
        for try await (scope, seq, based) in rows.decode((String, Int64, Int64).self) { found[scope] = (seq, based) }
        return found
    }
}

/// A scope's lowest acknowledged positions among the replicas seen within the eviction horizon.
struct AcknowledgedFloor: Sendable, Hashable {
    /// The lowest position (the stable point), and the replica that acknowledged it.
    var lowest: Int64
    var lowestReplica: String
    /// The next lowest, of another replica; nil when only one replica is active.
    var second: Int64?

    /// The lowest position acknowledged by the active replicas other than `replica`; nil when there is none.
    func excluding(_ replica: String) -> Int64? {
        replica == lowestReplica ? second : lowest
    }
}
