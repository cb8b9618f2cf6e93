import Foundation
import GRDB
import SyncModels
import SyncStorage
import Synchronization

/// The client's source of truth: an append-only event log in SQLite that is also the sync outbox, with
/// projections kept current in the same write transaction.
///
/// Every write follows one pipeline inside one SQLite transaction —
/// `validate → assign id/dot/HLC → check stream version → insert → apply projections → commit` — and only
/// then notifies observers, so a crash at any instant leaves all of it or none of it, and whatever a reader
/// sees is already queued for sync. No write transaction ever waits on the network.
///
/// Canonical order (rebuilds, replays, exports): confirmed events by `(scope, seq)`, then pending events by
/// local position. Rejected events are kept for the user but never reach projections.
public final class EventStore: Sendable {
    public let database: SyncDatabase
    /// This database's replica id, created with the file.
    public let replica: ReplicaID
    public let projections: [any Projection]
    let validators: [any EventValidator]
    let clock: HybridLogicalClock
    let wallClock: @Sendable () -> UInt64
    let ids = Mutex(EventIDGenerator())
    let broadcaster = ChangeBroadcaster()
    /// Versions of pulled pages not yet in `streams` (see `DeferredVersions`).
    let deferredVersions = Mutex(DeferredVersions())
    /// Whether no other store (in another process, or another `EventStore` of this one) had the file open when
    /// this one opened it, so that it ran the crash recovery: the streams' versions a process left deferred
    /// written from the log, projections caught up from their checkpoints, the cursor moved back before
    /// folded events a process lost. A later opener skips those steps (what they would repair may be what
    /// the first one holds in memory) and only builds projections it finds unbuilt or of another version.
    /// Always true for a database without a file of its own. See `StoreOpenLock`.
    public let openedFirst: Bool
    /// The lock on the file's `SyncDatabase.lockSuffix` companion, held for the store's lifetime (nil: no file).
    let openLock: StoreOpenLock?

    /// The canonical order as SQL.
    static let canonicalOrder = "seq IS NULL, scope, seq, position"

    /// Opens the store on `database`: applies the store's and the projections' migrations, loads (or creates)
    /// the replica id and clock, and rebuilds projections never built or whose version changed. When no other
    /// store has the file open (`openedFirst`), also recovers from a process that ended: writes the streams'
    /// versions it deferred, catches the projections up from their checkpoints, and moves the cursor back
    /// before folded events it held in memory.
    /// - Throws: `EventStoreError` `store.lock` when the lock file beside the database cannot be opened or
    ///   locked, or what the migrations and the recovery throw.
    public init(
        database: SyncDatabase, projections: [any Projection] = [], validators: [any EventValidator] = [],
        wallClock: @escaping @Sendable () -> UInt64 = HybridLogicalClock.systemMilliseconds
    ) throws {
        precondition(Set(projections.map(\.name)).count == projections.count, "projection names must be unique")
        // Before anything touches the file: a later opener waits here while a first one recovers.
        let openLock = try StoreOpenLock.acquire(databasePath: database.path)
        let openedFirst = openLock?.exclusive ?? true
        var migrations = SchemaMigrations()
        EventStoreSchema.register(into: &migrations)
        for projection in projections { projection.registerMigrations(into: &migrations) }
        try database.migrate(migrations)

        let (replica, lastHLC) = try database.writer.write { db -> (ReplicaID, HLCTimestamp) in
            let replica: ReplicaID
            if let text = try Self.meta("replica", db) {
                replica = try ReplicaID(text)
            } else {
                replica = ReplicaID.random()
                try Self.setMeta("replica", replica.description, db)
            }
            let last = try Self.meta("hlc", db).map(HLCTimestamp.init) ?? .zero
            return (replica, last)
        }
        self.database = database
        self.replica = replica
        self.projections = projections
        self.validators = validators
        self.wallClock = wallClock
        self.clock = HybridLogicalClock(replica: replica, resumingAfter: lastHLC, wallClock: wallClock)
        self.openLock = openLock
        self.openedFirst = openedFirst
        if openedFirst {
            try database.writer.write { db in
                try self.catchUpDeferredVersions(db)
                try self.catchUpProjections(db)
                try self.rewindFoldedAtOpen(db)
            }
        } else if try database.writer.read({ db in try self.hasProjectionsToBuild(db) }) {
            // Another store has the file open: what recovery would repair may be what it holds in memory (the
            // deferred versions of its pull, the records and folded events it has not written yet, and the
            // cursor before them). Only projections it cannot be keeping are built: never built, or of another
            // version, which this store could not read.
            try database.writer.write { db in try self.catchUpProjections(db, catchingUp: false) }
        }
        try openLock?.share()
    }

    /// Opens (creating if needed) a store on the SQLite file at `path`.
    public convenience init(
        path: String, projections: [any Projection] = [], validators: [any EventValidator] = [],
        configuration: StorageConfiguration = StorageConfiguration(),
        wallClock: @escaping @Sendable () -> UInt64 = HybridLogicalClock.systemMilliseconds
    ) throws {
        try self.init(
            database: SyncDatabase(path: path, configuration: configuration), projections: projections,
            validators: validators, wallClock: wallClock)
    }

    // MARK: - Append

    /// Appends events atomically: all drafts are written and applied to every projection in one transaction,
    /// or none are.
    /// - Returns: the stored events, with their ids, dots, HLCs and stream versions.
    /// - Throws: `EventStoreError` `conflict.version` when a draft's expected version does not hold,
    ///   `validation.failed` or `event.invalid` when a draft is refused; nothing is written then.
    @discardableResult
    public func append(_ drafts: [EventDraft]) async throws -> [StoredEvent] {
        let stored = try await database.writer.write { db in try self.append(drafts, in: db) }
        publish(.appended, stored)
        return stored
    }

    /// The synchronous form of `append(_:)`, for callers without an async context.
    @discardableResult
    public func appendNow(_ drafts: [EventDraft]) throws -> [StoredEvent] {
        let stored = try database.writer.write { db in try self.append(drafts, in: db) }
        publish(.appended, stored)
        return stored
    }

    /// Appends the drafts that `build` makes from the current state, read in the same write transaction, so
    /// no other write can slip between reading and appending (a command that diffs text or removes the tags
    /// it saw needs this).
    @discardableResult
    public func append(building build: @escaping @Sendable (Database) throws -> [EventDraft]) async throws
        -> [StoredEvent]
    {
        let stored = try await database.writer.write { db in try self.append(build(db), in: db) }
        publish(.appended, stored)
        return stored
    }

    func append(_ drafts: [EventDraft], in db: Database) throws -> [StoredEvent] {
        guard !drafts.isEmpty else { return [] }
        let positionBefore = try Self.lastPosition(db)
        var dotCounter = try Self.meta("dot", db).flatMap { UInt64($0) } ?? 0
        try catchUpOthersDeferredVersions(db)
        var versions: [String: Int64] = [:]
        var stored: [StoredEvent] = []
        stored.reserveCapacity(drafts.count)
        for draft in drafts {
            for validator in validators { try validator.validate(draft, in: db) }
            let current: Int64
            if let known = versions[draft.stream] {
                current = known
            } else {
                // `streams`, or a pulled page's version not written there yet.
                let deferred = try deferredVersion(of: draft.stream, db)
                current = max(
                    deferred,
                    try Int64.fetchOne(
                        db.cachedStatement(sql: "SELECT version FROM streams WHERE stream = ?"),
                        arguments: [draft.stream])
                        ?? 0)
            }
            try draft.expectedVersion.check(stream: draft.stream, actual: current)
            dotCounter += 1
            let wall = wallClock()
            let event = Event(
                id: ids.withLock { $0.next(wall: wall) }, scope: draft.scope, stream: draft.stream,
                streamVersion: current + 1, type: draft.type, schemaVersion: draft.schemaVersion, hlc: clock.now(),
                dot: Dot(replica: replica, counter: dotCounter), payload: draft.payload)
            do {
                try event.validate()
            } catch let error as SyncModelsError {
                throw EventStoreError.from(error)
            }
            versions[draft.stream] = current + 1
            let inserted = try Self.insert(event, status: .pending, db)
            if !draft.blobs.isEmpty { try Self.holdForBlobs(inserted.position, draft.scope, draft.blobs, db) }
            stored.append(inserted)
        }
        try Self.count(.pending, stored.count, db)
        try Self.markOutbox(from: stored[0].position, db)
        try Self.setMeta("dot", String(dotCounter), db)
        try Self.setMeta("hlc", clock.last.description, db)
        try applyToProjections(stored, after: positionBefore, db)
        return stored
    }

    // MARK: - Reading

    /// Events of one stream in canonical order (rejected ones included, marked). A scan of the log (see
    /// `EventStoreSchema`): for tools and support, not for a hot path.
    public func events(stream: String) async throws -> [StoredEvent] {
        try await database.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT \(StoredEvent.columns) FROM events WHERE stream = ? ORDER BY \(Self.canonicalOrder)",
                arguments: [stream]
            ).map(StoredEvent.init(row:))
        }
    }

    /// Pending events (the outbox) in local order, oldest first; with `position`, only those written after
    /// it (the engine plans its next push while the previous one is still being acknowledged). Walks the
    /// outbox's own index: the cost does not grow with the log.
    public func pendingEvents(after position: Int64 = 0, limit: Int = .max) async throws -> [StoredEvent] {
        try await database.read { db in try Self.pendingEvents(after: position, limit: limit, db) }
    }

    static func pendingEvents(after position: Int64, limit: Int, _ db: Database) throws -> [StoredEvent] {
        try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT \(StoredEvent.columns) FROM events
                    WHERE status = 'pending' AND position > ? ORDER BY position LIMIT ?
                    """),
            arguments: [position, min(limit, Int(Int32.max))]
        ).map(StoredEvent.init(row:))
    }

    /// Rejected events, most recent first, for showing the user what the server refused.
    public func rejectedEvents() async throws -> [StoredEvent] {
        try await database.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT \(StoredEvent.columns) FROM events WHERE status = 'rejected' ORDER BY position DESC"
            ).map(StoredEvent.init(row:))
        }
    }

    /// Counts of events by sync status: three rows the store keeps current (`event_counts`), so the cost does
    /// not grow with the log.
    public func counts() async throws -> [SyncStatus: Int] {
        try await database.read { db in
            var counts: [SyncStatus: Int] = [.pending: 0, .confirmed: 0, .rejected: 0]
            for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT status, n FROM event_counts")) {
                if let status = SyncStatus(rawValue: row["status"]) { counts[status] = row["n"] }
            }
            return counts
        }
    }

    /// The streams whose record holds an open conflict in some projection (`Projection.streamsInConflict`),
    /// as the tables show them now: a record still waiting in memory (write-behind during a long pull)
    /// counts once it is written.
    public func streamsInConflict() async throws -> Set<String> {
        try await database.read { db in try self.streamsInConflict(in: db) }
    }

    /// `streamsInConflict()` inside the caller's transaction.
    public func streamsInConflict(in db: Database) throws -> Set<String> {
        var streams: Set<String> = []
        for projection in projections { streams.formUnion(try projection.streamsInConflict(in: db)) }
        return streams
    }

    /// What a sync round trip needs from the store, read at once: pending events after `position` (at most
    /// `limit`), the stored cursor and the acknowledged cursor (`acknowledgedCursor()`).
    public func outboxSnapshot(after position: Int64, limit: Int) async throws -> (
        pending: [StoredEvent], cursor: String?, acknowledged: String?
    ) {
        try await database.read { db in
            var pending = limit > 0 ? try Self.pendingEvents(after: position, limit: limit, db) : []
            // Nothing from the first event whose blobs the server does not hold yet on (`EventStore+Blobs`).
            if let held = try Self.firstHeldForBlobs(db), let cut = pending.firstIndex(where: { $0.position >= held }) {
                pending.removeSubrange(cut...)
            }
            return (pending, try Self.meta("cursor", db), try Self.acknowledgedCursor(db))
        }
    }

    /// The pull cursor last stored with a confirmed page (nil before the first pull).
    public func cursor() async throws -> String? {
        try await database.read { db in try Self.meta("cursor", db) }
    }

    /// The cursor this replica held when it wrote its oldest pending event: what it vouches for to the
    /// server while that event waits (`SyncRequest.acknowledged`), so that compaction never folds or purges
    /// past the state an offline edit was made against. Nil when the outbox is empty (the cursor itself is
    /// then acknowledged); the empty cursor for pending events older than the marks (written before the
    /// store kept them).
    public func acknowledgedCursor() async throws -> String? {
        try await database.read { db in try Self.acknowledgedCursor(db) }
    }

    /// Also no further than the cursor stored before folded events still held in memory (see
    /// `EventStore+FoldOnArrival.swift`): a crash would take the replica back there.
    static func acknowledgedCursor(_ db: Database) throws -> String? {
        let folded = try foldedCursor(db)
        guard let oldest = try Self.oldestPending(db) else { return folded?.cursor }
        let mark = try Row.fetchOne(
            db.cachedStatement(
                sql: "SELECT position, cursor FROM outbox_marks WHERE position <= ? ORDER BY position DESC LIMIT 1"),
            arguments: [oldest])
        guard let mark else { return "" }
        // Of two cursors stored at different times, the earlier is no further in any scope.
        if let folded, folded.position < mark[0] as Int64 { return folded.cursor }
        return mark[1] as String
    }

    static func oldestPending(_ db: Database) throws -> Int64? {
        try Int64.fetchOne(
            db.cachedStatement(
                sql: "SELECT position FROM events WHERE status = 'pending' ORDER BY position LIMIT 1"))
    }

    /// Records the cursor local events starting at `position` are written under, unless the last mark
    /// already holds it.
    static func markOutbox(from position: Int64, _ db: Database) throws {
        let cursor = try meta("cursor", db) ?? ""
        let last = try String.fetchOne(
            db.cachedStatement(sql: "SELECT cursor FROM outbox_marks ORDER BY position DESC LIMIT 1"))
        guard last != cursor else { return }
        try db.cachedStatement(sql: "INSERT INTO outbox_marks (position, cursor) VALUES (?, ?)")
            .execute(arguments: [position, cursor])
    }

    /// Drops the marks no pending event needs any more: all of them when the outbox is empty, otherwise
    /// those before the one covering the oldest pending event.
    static func trimOutboxMarks(_ db: Database) throws {
        if let oldest = try oldestPending(db) {
            try db.cachedStatement(
                sql: """
                    DELETE FROM outbox_marks
                    WHERE position < (SELECT max(position) FROM outbox_marks WHERE position <= ?)
                    """
            ).execute(arguments: [oldest])
        } else {
            try db.cachedStatement(sql: "DELETE FROM outbox_marks").execute()
        }
    }

    /// Every change after it commits. Each subscriber gets its own sequence.
    public func changes() -> AsyncStream<StoreChange> {
        broadcaster.subscribe()
    }

    /// Changes that may affect one projection.
    public func changes(of projection: String) -> AsyncFilterSequence<AsyncStream<StoreChange>> {
        broadcaster.subscribe().filter { $0.projections.contains(projection) }
    }

    func publish(_ kind: StoreChange.Kind, _ events: [StoredEvent], projections names: Set<String>? = nil) {
        guard !events.isEmpty || [.rebuilt, .pruned, .imported].contains(kind) else { return }
        broadcaster.publish(
            StoreChange(
                kind: kind, streams: Set(events.map(\.event.stream)),
                projections: names ?? Set(projections.map(\.name))))
    }

    // MARK: - Rows

    /// Inserts one event row and raises its stream's version. The caller adds the row to `event_counts`
    /// (`count`), once for all the rows of its transaction.
    /// - Returns: the row as stored, with the payload bytes written (`StoredEvent.withPayloadBytes`).
    @discardableResult
    static func insert(_ event: Event, status: SyncStatus, _ db: Database) throws -> StoredEvent {
        let payload = PayloadCodec.encode(event)
        var insertRow = try EventRowInsert(db, ifNew: false)
        guard let position = try insertRow(event, payload: payload, status: status, db) else {
            preconditionFailure("an insert without ON CONFLICT inserts or throws")
        }
        try StreamVersionRaise(db)(event.stream, in: event.scope.name, to: event.streamVersion)
        return StoredEvent(position: position, event: event, status: status, payloadBytes: payload)
    }

    /// Adds `delta` inserted rows of `status` to `event_counts`.
    static func count(_ status: SyncStatus, _ delta: Int, _ db: Database) throws {
        guard delta != 0 else { return }
        try db.cachedStatement(sql: "UPDATE event_counts SET n = n + ? WHERE status = ?")
            .execute(arguments: [delta, status.rawValue])
    }

    static func lastPosition(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT seq FROM sqlite_sequence WHERE name = 'events'")) ?? 0
    }

    static func meta(_ key: String, _ db: Database) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM store_meta WHERE key = ?"), arguments: [key])
    }

    static func removeMeta(_ key: String, _ db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM store_meta WHERE key = ?").execute(arguments: [key])
    }

    static func setMeta(_ key: String, _ value: String, _ db: Database) throws {
        try db.cachedStatement(
            sql:
                "INSERT INTO store_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        ).execute(arguments: [key, value])
    }
}
