import Foundation
import Logging
import PostgresNIO
import SyncModels
import SyncProtocol

/// Folds each scope's history at or below its stable point into one row per stream, through the domain's
/// `StreamFolder` (docs/ARCHITECTURE.md, "Compaction and retention").
///
/// **What a pass does to a scope.** It reads the scope's stable point `S` (the lowest position acknowledged
/// by a replica seen within the eviction horizon; the head when no replica was) and walks the events in
/// `(compacted_through, S]` in windows of `batchEvents`, one transaction each. In a window, every stream the
/// folder folds gets one row in `folded_events` at or below the window's end: its events there, after its
/// earlier row (a snapshot or a lone event), become one snapshot event of the folder's `snapshotType`, with
/// a new id and the seq, stream version, HLC, dot and receipt time of the last event it folds; a stream's
/// first and only event moves there as it is (unread, unless the folder may drop it: `LoneEventFolder`). The
/// window's rows leave `events`, and the stream's row in `folded_events` is updated in place. The folder may
/// leave tombstones out of the snapshot or drop the stream (`StreamFolder.foldStable`); then
/// `retained_from_seq` rises past the stream's last folded event, so a replica that had not seen all of it
/// (one silent for longer than the eviction horizon) is told to reset rather than resurrect what was purged.
/// Then `compacted_through` moves to the window's end. A crash rolls back at most the window in flight; the
/// next pass carries on from `compacted_through`. Pulls read both tables below `compacted_through`
/// (`EventRepository.events`).
///
/// **Space.** `events` holds the tail not folded yet, and `folded_events` one row per live stream, its
/// payload deflated (`FoldedPayload`). After each window that changed `folded_events`, the pass vacuums it
/// (`vacuumFolded`, no lock a push or a pull waits for): the old versions of the rows the window updated
/// become free space that the next window reuses, so the table holds its rows plus about one window's
/// updates, instead of a whole pass's.
///
/// **Why it is safe at any cursor.** A replica merges a snapshot into its state (idempotent), so one that had
/// applied none, some or all of the folded events ends in the same state. Only events at or below the stable
/// point are folded: each was acknowledged by every active replica, and an event still in its sender's outbox
/// (a push whose answer was lost) holds its sender's acknowledged position below it, so a retried push still
/// finds its id and is answered as a duplicate. Folding keeps tombstones (deleted elements stay in the
/// snapshot's state) unless the folder purges them, as above.
///
/// **Locks.** Pushes append above the head and do not wait for compaction: it holds a transaction-scoped
/// advisory lock per scope, which keeps two compactors (the service of several servers, `sync-server
/// compact`) out of each other's way, and touches the scope's row only when a window purged, to raise
/// `retained_from_seq` as the window's last statement (a push to that scope waits for that commit).
public struct Compactor: Sendable {
    let database: Database
    let folder: any StreamFolder
    let logger: Logger
    /// Events read and folded per transaction: the longest a window's locks and memory last.
    public var batchEvents: Int
    /// Replicas silent for longer do not hold stable points back.
    public var evictionHorizonSeconds: Int
    /// How long to wait between two windows: a throttle that leaves the database to foreground traffic while
    /// a large backlog is folded. 0 (the default) folds window after window.
    public var pauseMilliseconds: Int
    /// Whether to vacuum `folded_events` after each window that changed it (see **Space**).
    public var vacuumFolded = true
    /// The blobs an event refers to (the domain's `SyncDomain.blobReferences(in:)`): a window releases the
    /// references of the events it folds away (`blob_refs`) and records those of the snapshots it writes, so
    /// that a blob no live event refers to any more can be collected (`BlobService.collect`).
    var references: @Sendable (Event) -> [BlobReference] = { _ in [] }

    init(
        database: Database, folder: any StreamFolder, batchEvents: Int, evictionHorizonSeconds: Int,
        pauseMilliseconds: Int = 0, references: @escaping @Sendable (Event) -> [BlobReference] = { _ in [] },
        logger: Logger
    ) {
        self.references = references
        self.database = database
        self.folder = folder
        self.batchEvents = max(1, batchEvents)
        self.evictionHorizonSeconds = evictionHorizonSeconds
        self.pauseMilliseconds = max(0, pauseMilliseconds)
        self.logger = logger
    }

    /// What one pass did to one scope.
    public struct ScopeReport: Sendable, Codable, Hashable {
        public var scope: String
        /// The stable point the pass folded up to.
        public var stable: Int64
        /// Where the scope's compaction stood before and after the pass.
        public var compactedFrom: Int64
        public var compactedThrough: Int64
        /// Rows folded away (events, and earlier snapshots or lone events), and snapshots written in their
        /// place.
        public var foldedEvents: Int
        public var snapshots: Int
        /// Streams dropped altogether (`FoldResult.drop`, a deleted note or one never created), a single
        /// event's too (`LoneEventFolder`).
        public var droppedStreams: Int
        /// Streams whose history did not fold (the folder threw): left as they were.
        public var unfoldable: Int
        /// The scope's `retained_from_seq` after the pass: a cursor below it minus one gets 410.
        public var retainedFromSeq: Int64
        public var seconds: Double
    }

    /// A scope's compaction state as `candidates` reads it.
    public struct Candidate: Sendable, Hashable {
        public var scope: String
        public var head: Int64
        public var compactedThrough: Int64
        /// Streams compaction already keeps a folded row for.
        public var foldedStreams: Int64
    }

    /// Every scope with events past its `compacted_through`, with what decides whether folding it pays.
    public func candidates() async throws -> [Candidate] {
        try await database.withConnection { [logger] connection in
            let rows = try await connection.checkedQuery(
                """
                SELECT s.scope, s.head, coalesce(c.compacted_through, 0),
                       (SELECT count(*) FROM folded_events f WHERE f.scope = s.scope)
                FROM scopes s LEFT JOIN scope_compaction c ON c.scope = s.scope
                WHERE s.head > coalesce(c.compacted_through, 0)
                ORDER BY s.scope
                """, logger: logger)
            var found: [Candidate] = []
            for try await (scope, head, through, streams) in rows.decode((String, Int64, Int64, Int64).self) {
                found.append(
                    Candidate(scope: scope, head: head, compactedThrough: through, foldedStreams: streams))
            }
            return found
        }
    }

    /// The position compaction may fold up to in `scope` now: the lowest position acknowledged by a replica
    /// seen within the horizon, or the head when none was (nobody is left to hold it back).
    public func stablePoint(of scope: String) async throws -> Int64 {
        try await database.withConnection { [logger, evictionHorizonSeconds] connection in
            let repository = EventRepository()
            let heads = try await repository.selectHeads([scope], on: connection, logger: logger)
            let head = heads[try Scope(scope)]?.head ?? 0
            let acknowledged = try await repository.lowestAcknowledged(
                in: [scope], activeWithinSeconds: evictionHorizonSeconds, on: connection, logger: logger)
            return min(acknowledged[scope] ?? head, head)
        }
    }

    /// Folds `scope` up to its stable point (or `upTo`, when lower), window by window.
    public func compact(scope: String, upTo limit: Int64? = nil) async throws -> ScopeReport {
        let started = ContinuousClock.now
        var stable = try await stablePoint(of: scope)
        if let limit { stable = min(stable, limit) }
        var report = ScopeReport(
            scope: scope, stable: stable, compactedFrom: 0, compactedThrough: 0, foldedEvents: 0, snapshots: 0,
            droppedStreams: 0, unfoldable: 0, retainedFromSeq: 1, seconds: 0)
        var first = true
        while true {
            guard let window = try await foldWindow(scope: scope, stable: stable) else { break }
            if first {
                report.compactedFrom = window.from
                first = false
            }
            report.compactedThrough = window.through
            report.foldedEvents += window.folded
            report.snapshots += window.snapshots
            report.unfoldable += window.unfoldable
            report.droppedStreams += window.dropped
            if vacuumFolded, window.changedFolded { try await vacuumFoldedEvents() }
            if window.through >= stable { break }
            if pauseMilliseconds > 0 { try await Task.sleep(for: .milliseconds(pauseMilliseconds)) }
        }
        if first { report.compactedFrom = try await compactedThrough(scope) }
        if report.compactedThrough == 0 { report.compactedThrough = report.compactedFrom }
        report.retainedFromSeq = try await retainedFromSeq(scope)
        report.seconds = (ContinuousClock.now - started) / .seconds(1)
        if report.foldedEvents > 0 {
            logger.info(
                "compacted",
                metadata: [
                    "sync.scope": "\(scope)", "sync.compaction.folded": "\(report.foldedEvents)",
                    "sync.compaction.snapshots": "\(report.snapshots)",
                    "sync.compaction.through": "\(report.compactedThrough)",
                ])
        }
        return report
    }

    func retainedFromSeq(_ scope: String) async throws -> Int64 {
        try await database.withConnection { [logger] connection in
            let rows = try await connection.checkedQuery(
                "SELECT retained_from_seq FROM scopes WHERE scope = \(scope)", logger: logger)
            for try await retained in rows.decode(Int64.self) { return retained }
            return 1
        }
    }

    func compactedThrough(_ scope: String) async throws -> Int64 {
        try await database.withConnection { [logger] connection in
            let rows = try await connection.checkedQuery(
                "SELECT compacted_through FROM scope_compaction WHERE scope = \(scope)", logger: logger)
            for try await through in rows.decode(Int64.self) { return through }
            return 0
        }
    }

    /// `VACUUM folded_events`: the old versions of the rows a window updated become free space.
    func vacuumFoldedEvents() async throws {
        try await database.withConnection { [logger] connection in
            try await connection.checkedQuery("VACUUM folded_events", logger: logger)
        }
    }

    struct Window: Sendable {
        var from: Int64
        var through: Int64
        var folded: Int
        var snapshots: Int
        var dropped: Int
        var unfoldable: Int
        /// Whether the window wrote or deleted rows of `folded_events`.
        var changedFolded = false
    }

    /// One transaction: the next window after `compacted_through`, up to `stable`. Nil when there is nothing
    /// to fold or another compactor holds the scope.
    func foldWindow(scope: String, stable: Int64) async throws -> Window? {
        try await database.withTransaction(logger: logger) { [logger, folder, batchEvents, references] connection in
            guard try await Self.tryLock(scope, on: connection, logger: logger) else { return nil }
            let from = try await Self.compactedThrough(scope, on: connection, logger: logger)
            guard from < stable else { return nil }

            // The window: the next `batchEvents` rows after `from` (seqs below the stable point are dense
            // except where earlier passes folded, which is at or below `from`).
            let window = try await Self.rows(
                of: scope, "seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4",
                [from, stable, Int64(batchEvents)], on: connection, logger: logger)
            guard let last = window.last else {
                try await Self.advance(scope, to: stable, folded: 0, on: connection, logger: logger)
                return Window(from: from, through: stable, folded: 0, snapshots: 0, dropped: 0, unfoldable: 0)
            }
            let through = window.count < batchEvents ? stable : last.seq

            var byStream: [String: [StoredEvent]] = [:]
            var order: [String] = []
            for row in window where folder.folds(stream: row.stream) {
                if byStream[row.stream] == nil { order.append(row.stream) }
                byStream[row.stream, default: []].append(row)
            }
            guard !order.isEmpty else {
                try await Self.advance(scope, to: through, folded: 0, on: connection, logger: logger)
                return Window(from: from, through: through, folded: 0, snapshots: 0, dropped: 0, unfoldable: 0)
            }
            let bases = try await Self.foldedRows(of: scope, streams: order, on: connection, logger: logger)
            // Of the window's rows and their streams' folded rows, those some blob reference names: only their
            // streams' snapshots are asked for references (a scope without attachments pays one query).
            let referencing = try await Self.referencing(
                scope: scope, ids: window.map(\.id) + bases.values.map(\.id), on: connection, logger: logger)
            var fold = WindowFold(
                scope: scope, folder: folder, references: references, referencing: referencing, logger: logger,
                wall: UInt64(Date().timeIntervalSince1970 * 1000))
            for stream in order {
                try fold.fold(stream, events: byStream[stream]!, base: bases[stream])
            }
            try await Self.write(fold, through: through, on: connection, logger: logger)
            return Window(
                from: from, through: through, folded: fold.folded, snapshots: fold.snapshots,
                dropped: fold.dropped.count, unfoldable: fold.unfoldable,
                changedFolded: !fold.rows.isEmpty || !fold.dropped.isEmpty)
        }
    }

    /// Takes the scope's transaction-scoped advisory lock if no other compactor holds it; whether it did.
    static func tryLock(_ scope: String, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        let locked = try await connection.checkedQuery(
            "SELECT pg_try_advisory_xact_lock(hashtextextended('sync.compaction:' || \(scope), 0))",
            logger: logger)
        var held = false
        for try await value in locked.decode(Bool.self) { held = value }
        return held
    }

    /// The scope's `compacted_through` read on `connection` (0 when it has none).
    static func compactedThrough(_ scope: String, on connection: PostgresConnection, logger: Logger)
        async throws -> Int64
    {
        var from: Int64 = 0
        for try await through in try await connection.checkedQuery(
            "SELECT compacted_through FROM scope_compaction WHERE scope = \(scope)", logger: logger
        ).decode(Int64.self) { from = through }
        return from
    }

    /// Each of `streams`' one row at or below `compacted_through`, left by earlier passes, by stream.
    static func foldedRows(
        of scope: String, streams: [String], on connection: PostgresConnection, logger: Logger
    ) async throws -> [String: StoredEvent] {
        var bases: [String: StoredEvent] = [:]
        for try await row in try await connection.checkedQuery(
            """
            SELECT seq, event_id, stream, stream_version, type, schema_version, hlc, dot_replica, dot_counter,
                   payload, received_at, carries
            FROM folded_events WHERE scope = \(scope) AND stream = ANY(\(streams)::text[])
            """, logger: logger)
        {
            let base = try StoredEvent(folded: row, scope: try Scope(scope))
            bases[base.stream] = base
        }
        return bases
    }

    /// What folding a window's streams gives, stream by stream (`fold`): the rows its transaction deletes,
    /// writes and drops, the blob references it moves, and its counts.
    struct WindowFold {
        let scope: String
        let folder: any StreamFolder
        /// `folder`, when it may drop a stream of a single event.
        let loneFolder: (any LoneEventFolder)?
        /// The blobs an event refers to (`Compactor.references`).
        let references: @Sendable (Event) -> [BlobReference]
        /// Of the window's rows and their streams' folded rows, those some blob reference names.
        let referencing: Set<UUID>
        let logger: Logger
        /// The snapshots' ids, and the time they are made at.
        var ids = EventIDGenerator()
        let wall: UInt64

        /// The seqs of the window's rows that leave `events`.
        var deleted: [Int64] = []
        /// Rows folded away (events, and earlier folded rows), and snapshots written in their place.
        var folded = 0
        var snapshots = 0
        /// Each folded stream's row in `folded_events`: a snapshot or a lone event.
        var rows: [EventRepository.NewEvent] = []
        /// Streams dropped altogether, and streams whose history did not fold.
        var dropped: [String] = []
        var unfoldable = 0
        /// The last seq of a stream whose fold purged tombstones: cursors below it must reset.
        var purgedThrough: Int64 = 0
        /// What the dropped streams carried (their checksums; unknown ones, from before checksums, as 0).
        var purgedChecksum: Int64 = 0
        /// The events whose blob references are released, and the references the snapshots record.
        var released: [UUID] = []
        var recorded: [(hash: String, id: UUID)] = []

        init(
            scope: String, folder: any StreamFolder, references: @escaping @Sendable (Event) -> [BlobReference],
            referencing: Set<UUID>, logger: Logger, wall: UInt64
        ) {
            self.scope = scope
            self.folder = folder
            self.loneFolder = folder as? any LoneEventFolder
            self.references = references
            self.referencing = referencing
            self.logger = logger
            self.wall = wall
        }

        /// Folds `stream`'s `events` of the window after its earlier folded row, `base`: into one row, or a
        /// drop; a stream whose history the folder cannot fold is left as it is.
        mutating func fold(_ stream: String, events: [StoredEvent], base: StoredEvent?) throws {
            var history = events
            if let base { history.insert(base, at: 0) }
            let newest = history[history.count - 1]
            guard history.count >= 2 else {
                // A stream's first and only event: its folded row as it is, unless the folder ends the stream
                // there.
                if dropsLone(newest) {
                    drop(stream, history: history, events: events)
                    return
                }
                rows.append(
                    EventRepository.NewEvent(
                        event: try newest.event(scope: scope), seq: newest.seq, payloadJSON: newest.payloadJSON,
                        checksum: newest.checksum))
                deleted.append(newest.seq)
                return
            }
            let payload: JSONValue
            do {
                switch try folder.foldStable(try history.map { try $0.event(scope: scope) }) {
                case .drop:
                    drop(stream, history: history, events: events)
                    return
                case .snapshot(let value, let purged):
                    payload = value
                    if purged { purgedThrough = max(purgedThrough, newest.seq) }
                }
            } catch {
                unfoldable += 1
                logger.warning(
                    "stream not folded",
                    metadata: ["sync.scope": "\(scope)", "sync.stream": "\(stream)", "error": "\(error)"])
                return
            }
            deleted += events.map(\.seq)
            folded += history.count
            snapshots += 1
            let snapshot = Event(
                id: ids.next(wall: wall), scope: try Scope(scope), stream: stream,
                streamVersion: newest.streamVersion, type: folder.snapshotType,
                schemaVersion: Int(newest.schemaVersion), hlc: try HLCTimestamp(newest.hlc),
                dot: Dot(replica: try ReplicaID(newest.dotReplica), counter: UInt64(bitPattern: newest.dotCounter)),
                payload: payload, seq: newest.seq, receivedAt: newest.receivedAt)
            // The snapshot carries what its history did: the earlier folded row's sum and each event's
            // checksum (unknown when one of them is, an event stored before checksums).
            let carries = history.reduce(Int64?(0)) { sum, row in sum.flatMap { s in row.checksum.map { s + $0 } } }
            let historyReferences = history.map(\.id).filter { referencing.contains($0) }
            if !historyReferences.isEmpty {
                released += historyReferences
                for hash in Set(references(snapshot).map(\.hash.hex)) {
                    recorded.append((hash, snapshot.id.uuid))
                }
            }
            rows.append(
                EventRepository.NewEvent(
                    event: snapshot, seq: newest.seq,
                    payloadJSON: String(decoding: payload.canonicalData(), as: UTF8.self), checksum: carries))
        }

        /// Whether the folder drops a stream whose whole stable history is `event`. Asked only when its type
        /// may (`LoneEventFolder.mayDropLoneEvent(ofType:)`), so that a lone event of any other type, most of
        /// the streams a window starts, is never read; one the folder cannot read stays as it is.
        func dropsLone(_ event: StoredEvent) -> Bool {
            guard let lone = loneFolder, lone.mayDropLoneEvent(ofType: event.type),
                let history = try? [event.event(scope: scope)], let result = try? lone.foldStable(history)
            else { return false }
            return result == .drop
        }

        /// Ends `stream` (`FoldResult.drop`): its `history` (the window's `events` after its earlier folded row,
        /// if any) leaves both tables with nothing in its place, its blob references are released, what it
        /// carried goes to the purged checksum, and cursors below its last event must reset.
        mutating func drop(_ stream: String, history: [StoredEvent], events: [StoredEvent]) {
            released += history.map(\.id).filter { referencing.contains($0) }
            purgedChecksum += history.reduce(0) { $0 + ($1.checksum ?? 0) }
            deleted += events.map(\.seq)
            folded += history.count
            dropped.append(stream)
            purgedThrough = max(purgedThrough, history[history.count - 1].seq)
        }
    }

    /// A window's writes, in its transaction: its folds (`replace`), its blob references (`moveReferences`),
    /// the scope's `compacted_through` moved to `through`, and, when a fold purged, `retained_from_seq`.
    static func write(
        _ fold: WindowFold, through: Int64, on connection: PostgresConnection, logger: Logger
    ) async throws {
        let scope = fold.scope
        try await Self.replace(
            scope: scope, deleting: fold.deleted, with: fold.rows, dropping: fold.dropped, on: connection,
            logger: logger)
        try await Self.moveReferences(
            scope: scope, releasing: fold.released, recording: fold.recorded, on: connection, logger: logger)
        try await Self.advance(
            scope, to: through, folded: fold.folded - fold.snapshots, purged: fold.purgedChecksum, on: connection,
            logger: logger)
        if fold.purgedThrough > 0 {
            // Last: it waits for a push holding the scope's row, and then holds that row until the commit.
            try await connection.checkedQuery(
                """
                UPDATE scopes SET retained_from_seq = GREATEST(retained_from_seq, \(fold.purgedThrough + 1))
                WHERE scope = \(scope)
                """, logger: logger)
        }
    }

    /// Deletes the folded rows from `events`, writes each stream's folded row (`rows`, one per stream: a
    /// snapshot or a lone event) into `folded_events` in place of its earlier one, and drops the `dropped`
    /// streams' rows there and in `streams`.
    static func replace(
        scope: String, deleting seqs: [Int64], with rows: [EventRepository.NewEvent], dropping dropped: [String],
        on connection: PostgresConnection, logger: Logger
    ) async throws {
        if !dropped.isEmpty {
            try await connection.checkedQuery(
                "DELETE FROM folded_events WHERE scope = \(scope) AND stream = ANY(\(dropped)::text[])", logger: logger
            )
            try await connection.checkedQuery(
                "DELETE FROM streams WHERE scope = \(scope) AND stream = ANY(\(dropped)::text[])", logger: logger)
        }
        if !seqs.isEmpty {
            try await connection.checkedQuery(
                "DELETE FROM events WHERE scope = \(scope) AND seq = ANY(\(seqs)::int8[])", logger: logger)
        }
        guard !rows.isEmpty else { return }
        let seqs = rows.map(\.seq)
        let ids = rows.map(\.event.id.uuid)
        let streams = rows.map(\.event.stream)
        let versions = rows.map(\.event.streamVersion)
        let types = rows.map(\.event.type)
        let schemaVersions = rows.map { Int32(clamping: $0.event.schemaVersion) }
        let hlcs = rows.map(\.event.hlc.description)
        let replicas = rows.map(\.event.dot.replica.description)
        let counters = rows.map { Int64(bitPattern: $0.event.dot.counter) }
        let payloads = rows.map { FoldedPayload.bytes(of: $0.payloadJSON) }
        let received = rows.map { $0.event.receivedAt ?? Date() }
        // Text, '' for unknown: PostgresNIO binds no arrays of optionals.
        let carries = rows.map { $0.checksum.map(String.init) ?? "" }
        try await connection.checkedQuery(
            """
            INSERT INTO folded_events (scope, stream, seq, event_id, stream_version, type, schema_version, hlc,
                                       dot_replica, dot_counter, payload, received_at, carries)
            SELECT \(scope), r.stream, r.seq, r.event_id, r.stream_version, r.type, r.schema_version, r.hlc,
                   r.dot_replica, r.dot_counter, r.payload, r.received_at, NULLIF(r.carries, '')::int8
            FROM unnest(\(streams)::text[], \(seqs)::int8[], \(ids)::uuid[], \(versions)::int8[], \(types)::text[],
                        \(schemaVersions)::int4[], \(hlcs)::text[], \(replicas)::text[], \(counters)::int8[],
                        \(payloads)::bytea[], \(received)::timestamptz[], \(carries)::text[])
              AS r(stream, seq, event_id, stream_version, type, schema_version, hlc, dot_replica, dot_counter,
                   payload, received_at, carries)
            ON CONFLICT (scope, stream) DO UPDATE
            SET seq = EXCLUDED.seq, event_id = EXCLUDED.event_id, stream_version = EXCLUDED.stream_version,
                type = EXCLUDED.type, schema_version = EXCLUDED.schema_version, hlc = EXCLUDED.hlc,
                dot_replica = EXCLUDED.dot_replica, dot_counter = EXCLUDED.dot_counter, payload = EXCLUDED.payload,
                received_at = EXCLUDED.received_at, carries = EXCLUDED.carries
            """, logger: logger)
    }

    /// The ids among `ids` that some blob reference of `scope` names.
    static func referencing(scope: String, ids: [UUID], on connection: PostgresConnection, logger: Logger)
        async throws -> Set<UUID>
    {
        guard !ids.isEmpty else { return [] }
        var found: Set<UUID> = []
        for try await id in try await connection.checkedQuery(
            """
            SELECT DISTINCT event_id FROM blob_refs
            WHERE scope = \(scope) AND event_id = ANY(\(ids)::uuid[])
              AND EXISTS (SELECT 1 FROM blob_refs WHERE scope = \(scope))
            """, logger: logger
        ).decode(UUID.self) { found.insert(id) }
        return found
    }

    /// Releases the references of the events a window folded away and records those of its snapshots.
    static func moveReferences(
        scope: String, releasing released: [UUID], recording recorded: [(hash: String, id: UUID)],
        on connection: PostgresConnection, logger: Logger
    ) async throws {
        if !released.isEmpty {
            try await connection.checkedQuery(
                "DELETE FROM blob_refs WHERE scope = \(scope) AND event_id = ANY(\(released)::uuid[])", logger: logger)
        }
        guard !recorded.isEmpty else { return }
        try await connection.checkedQuery(
            """
            INSERT INTO blob_refs (scope, hash, event_id)
            SELECT \(scope), r.hash, r.event_id FROM unnest(\(recorded.map(\.hash))::text[], \(recorded.map(\.id))::uuid[])
              AS r(hash, event_id)
            ON CONFLICT DO NOTHING
            """, logger: logger)
    }

    /// Moves the scope's `compacted_through` and adds to its counters.
    static func advance(
        _ scope: String, to through: Int64, folded: Int, purged: Int64 = 0, on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        try await connection.checkedQuery(
            """
            INSERT INTO scope_compaction (scope, compacted_through, removed_events, compacted_at, purged_checksum)
            VALUES (\(scope), \(through), \(Int64(folded)), now(), \(purged))
            ON CONFLICT (scope) DO UPDATE
            SET compacted_through = GREATEST(scope_compaction.compacted_through, EXCLUDED.compacted_through),
                removed_events = scope_compaction.removed_events + EXCLUDED.removed_events,
                compacted_at = EXCLUDED.compacted_at,
                purged_checksum = scope_compaction.purged_checksum + EXCLUDED.purged_checksum
            """, logger: logger)
    }

    /// Rows of `scope`'s events matching `filter` (what follows `WHERE scope = $1 AND`, with binds from `$2`).
    static func rows(
        of scope: String, _ filter: String, _ binds: [any PostgresEncodable & Sendable],
        on connection: PostgresConnection, logger: Logger
    ) async throws -> [StoredEvent] {
        var bindings = PostgresBindings()
        try bindings.append(scope)
        for value in binds { try bindings.append(value) }
        let query = PostgresQuery(
            unsafeSQL: """
                SELECT seq, event_id, stream, stream_version, type, schema_version, hlc, dot_replica, dot_counter,
                       payload::text, received_at, checksum
                FROM events WHERE scope = $1 AND \(filter)
                """, binds: bindings)
        let named = try Scope(scope)
        var events: [StoredEvent] = []
        for try await row in try await connection.checkedQuery(query, logger: logger) {
            events.append(try StoredEvent(pulled: row, scope: named))
        }
        return events
    }
}

extension StoredEvent {
    /// The event as a folder reads it.
    func event(scope: String) throws -> Event {
        Event(
            id: EventID(uuid: id), scope: try Scope(scope), stream: stream, streamVersion: streamVersion, type: type,
            schemaVersion: Int(schemaVersion), hlc: try HLCTimestamp(hlc),
            dot: Dot(replica: try ReplicaID(dotReplica), counter: UInt64(bitPattern: dotCounter)),
            payload: try JSONValue(parsing: Data(payloadJSON.utf8)), seq: seq, receivedAt: receivedAt)
    }
}

/// A `StreamFolder` whose `foldStable(_:)` may drop a stream whose whole stable history is a single event
/// (one whose first event a rule rejected, say, so that what followed it describes nothing anybody shows).
///
/// Compaction moves a stream's first and only event into `folded_events` as it is, without reading it: most
/// streams of a window are new ones with a single event, and reading each would cost a decode of its
/// payload for nothing. A folder that conforms is asked, by the event's type alone, whether such an event
/// may end its stream; only when it may does compaction fold it, and drops the stream when `foldStable(_:)`
/// says so, exactly as it drops a longer history (its blob references released, its checksum purged, and
/// `retained_from_seq` raised past it). Any other answer keeps the event as it is.
public protocol LoneEventFolder: StreamFolder {
    /// Whether `foldStable(_:)` could drop a stream whose whole stable history is one event of `type`: false
    /// keeps such an event as it is, unread. Cheap, as it is asked for every stream a window starts.
    func mayDropLoneEvent(ofType type: String) -> Bool
}
