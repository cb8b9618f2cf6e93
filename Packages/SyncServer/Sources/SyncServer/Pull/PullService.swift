import Foundation
import Logging
import PostgresNIO
import SyncModels
import SyncProtocol
import Synchronization

/// Reads pages of events after a cursor, in `(scope, seq)` order, with optional long-polling.
///
/// Because a scope's seqs become visible in order (docs/ARCHITECTURE.md, "Ordering"), reading `seq > position` per
/// scope never skips an event that commits later, and the cursor returned moves each scope to the last seq returned.
struct PullService: Sendable {
    let database: Database
    /// Its statements prepared on one PostgreSQL, unnamed on a Citus cluster (`EventRepository.prepares`).
    var repository: EventRepository { EventRepository(prepares: citus == nil) }
    let limits: ProtocolLimits
    let hub: LongPollHub
    /// Replicas silent for longer do not hold stable points back.
    var evictionHorizonSeconds = 7 * 24 * 3600
    /// Stable points read within the last second, so that a burst of pages (a bootstrap, many devices)
    /// costs one `replica_progress` query per scope and second rather than one per page.
    var stablePoints = StablePointCache()
    /// Identical reads at the same time share one (see `ReadCollapser`).
    let collapser = ReadCollapser()
    /// Where reads and waits are counted (`/metrics`).
    var metrics: ServerMetrics? = nil
    /// On a Citus cluster, where each scope lives: a read of one node's scopes runs on that node
    /// (docs/SCALING.md, "A push on its worker").
    var citus: CitusRouting? = nil

    /// The database a request of `scopes` runs on: on Citus, the node holding them all, when there is one.
    func database(for scopes: [Scope]) async -> Database {
        await citus?.node(of: scopes)?.database ?? database
    }

    /// One page.
    struct Page: Sendable {
        var events: [StoredEvent]
        var cursor: ScopeCursor
        var hasMore: Bool
        /// Events past `cursor` up to each scope's head as read (see `PullResponse.remaining`).
        var remaining: Int64
        /// Each requested scope's stable point (see `PullResponse.stable`).
        var stable: [Scope: Int64]
        /// Each requested scope's stable point among the replicas other than the one the read was made for
        /// (see `PullResponse.othersStable`); nil for a read that names no replica.
        var othersStable: [Scope: Int64]? = nil
        /// Each scope's folded point as read (events at or below it may be snapshots).
        var foldedThrough: [Scope: Int64] = [:]
        /// Each scope's `retained_from_seq` as read with the heads, before the events: what a replica that read
        /// a scope from position 0 has its state based on (see `read`).
        var retainedFrom: [Scope: Int64] = [:]
        /// For each scope read from position 0 whose compaction purged streams, the sum of what they carried
        /// (see `PullResponse.purged`).
        var purged: [Scope: Int64] = [:]
        /// The answer's bodies, shared by everyone this page goes to unchanged (see `ReadCollapser`).
        var body: SharedBody? = nil

        /// The page without the events `replica` made, except folded history (see `PullRequest.exclude`);
        /// the cursor stays where it is, past what was left out.
        func excluding(_ replica: ReplicaID) -> Page {
            let id = replica.description
            var page = self
            page.events.removeAll { $0.dotReplica == id && $0.seq > (foldedThrough[$0.scope] ?? 0) }
            // Another body than the shared one.
            if page.events.count != events.count { page.body = nil }
            return page
        }
    }

    /// The scopes a request reads: those it names (each must be in the token), or all of the token's.
    /// - Throws: `SyncProtocolError` `scope.forbidden` for a named scope the token does not grant.
    static func scopes(requested: [Scope]?, identity: TokenIdentity) throws(SyncProtocolError) -> [Scope] {
        guard let requested else { return identity.scopes.sorted() }
        for scope in requested where !identity.scopes.contains(scope) {
            throw SyncProtocolError(.scopeForbidden, "scope \(scope) is not in the token")
        }
        return requested.sorted()
    }

    /// Reads the page after `request.cursor`, long-polling up to `request.wait` seconds when it is empty.
    ///
    /// **Waiting costs no database.** A long-poll registers with the hub first; when the hub knows the
    /// heads of its scopes (a read found them and no commit was signalled since) and its cursor is at them,
    /// it waits without reading, and when its wait ends with no signal it answers from what is known. A poll
    /// that names its `replica` reads anyway, because the read records the replica's progress.
    /// - Throws: `SyncProtocolError` `scope.forbidden`, `reset.required`, `server.unavailable`.
    func pull(_ request: PullRequest, identity: TokenIdentity, replica: ReplicaID?, logger: Logger) async throws
        -> Page
    {
        let scopes = try Self.scopes(requested: request.scopes, identity: identity)
        let limit = limit(of: request)
        // A long-poll registers before it reads or looks at the known heads: a commit signalled after that
        // wakes the waiter, so none is missed.
        let waiter = request.wait > 0 && !scopes.isEmpty ? hub.register(Set(scopes)) : nil
        defer { if let waiter { hub.unregister(waiter) } }
        var page: Page
        if waiter != nil, replica == nil, let idle = idlePage(scopes: scopes, cursor: request.cursor) {
            metrics?.recordWaitWithoutRead()
            page = idle
        } else {
            // Leaving out `exclude`'s events: in the database when the read is this replica's alone (it
            // records its progress), so that a device pushing a large outbox is not read back its own events;
            // otherwise after a read that identical requests of other replicas can share.
            let sharable = replica == nil
            page = try await sharedRead(
                scopes: scopes, cursor: request.cursor, limit: limit, replica: replica,
                acknowledged: request.acknowledged, exclude: sharable ? nil : request.exclude,
                lane: waiter == nil ? .work : .waiting, logger: logger)
            if sharable, let exclude = request.exclude { page = page.excluding(exclude) }
        }
        guard page.events.isEmpty, let waiter else { return page }

        let deadline = ContinuousClock.now + .seconds(min(request.wait, limits.maxWaitSeconds))
        while true {
            await hub.wait(waiter, until: deadline)
            let over = ContinuousClock.now >= deadline || Task.isCancelled || hub.isClosed
            // Nothing was signalled (the wait timed out): the answer is known without reading.
            if over, let idle = idlePage(scopes: scopes, cursor: request.cursor) { return idle }
            // Woken waiters at the same cursor share one read; each leaves out its own events itself. The
            // shared read names no replica; one that the purge check refuses without it reads as itself.
            do {
                page = try await sharedRead(
                    scopes: scopes, cursor: request.cursor, limit: limit, replica: nil, record: false, lane: .waiting,
                    logger: logger)
            } catch let error as SyncProtocolError where error.code == .resetRequired && replica != nil {
                page = try await sharedRead(
                    scopes: scopes, cursor: request.cursor, limit: limit, replica: replica, record: false,
                    lane: .waiting, logger: logger)
            }
            if let exclude = request.exclude { page = page.excluding(exclude) }
            if !page.events.isEmpty || over { return page }
        }
    }

    /// The most events a page for `request` holds.
    func limit(of request: PullRequest) -> Int {
        min(request.limit ?? limits.defaultPullLimit, limits.maxPullLimit)
    }

    /// `recordProgress` on a connection of its own.
    func recordProgress(
        replica: ReplicaID, scopes: [Scope], cursor: ScopeCursor, acknowledged: ScopeCursor?,
        retainedFrom: [Scope: Int64], logger: Logger
    ) async throws {
        try await database(for: scopes).withConnection { connection in
            try await recordProgress(
                replica: replica, scopes: scopes, cursor: cursor, acknowledged: acknowledged,
                retainedFrom: retainedFrom, on: connection, logger: logger)
        }
    }

    /// The empty answer for a cursor at the heads the hub knows, with each scope's last known stable point;
    /// nil when a head or a stable point is not known, or the cursor is not at the heads.
    func idlePage(scopes: [Scope], cursor: ScopeCursor) -> Page? {
        guard let heads = hub.knownHeads(scopes), scopes.allSatisfy({ cursor[$0] == heads[$0] }) else { return nil }
        // An answer without a read may give a stable point up to a minute old: like the cached one of a
        // read, it is advisory (a device prunes only its own copy of history at or below it).
        let stable = stablePoints.fresh(scopes, maxAge: .seconds(60))
        guard stable.count == scopes.count else { return nil }
        return Page(events: [], cursor: cursor, hasMore: false, remaining: 0, stable: stable)
    }

    /// `read`, shared with identical reads in flight that cannot miss what this caller must see
    /// (`ReadCollapser`).
    func sharedRead(
        scopes: [Scope], cursor: ScopeCursor, limit: Int, replica: ReplicaID?, record: Bool = true,
        acknowledged: ScopeCursor? = nil, exclude: ReplicaID? = nil, lane: Database.Lane = .work, logger: Logger
    ) async throws -> Page {
        let key = ReadCollapser.Key(
            scopes: scopes, cursor: cursor, limit: limit, replica: replica, record: record, acknowledged: acknowledged,
            exclude: exclude)
        let epoch = hub.epoch(scopes)
        let (page, shared) = try await collapser.read(key, epoch: epoch, reuseFinished: hub.isListening) {
            [metrics] in
            metrics?.recordPullRead(shared: false)
            var page = try await read(
                scopes: scopes, cursor: cursor, limit: limit, replica: replica, record: record,
                acknowledged: acknowledged, exclude: exclude, epoch: epoch, lane: lane, logger: logger)
            page.body = SharedBody()
            return page
        }
        if shared { metrics?.recordPullRead(shared: true) }
        return page
    }

    /// One read: head rows (for retention and `hasMore`), then each scope with news in order until the page
    /// is full. Records `replica`'s progress when given and `record`.
    ///
    /// **Retention.** A position below `retained_from_seq - 1` is behind a purge: compaction dropped
    /// tombstones of deletes past it, and a replica that holds the deleted elements would resurrect them by
    /// merging what follows. It may continue only when its state was itself pulled from the folded history
    /// since that purge: it read from position 0 (a new device, or one that reset) while `retained_from_seq`
    /// already had its current value (`replica_progress.based_on_retained`). Any other gets 410
    /// `reset.required`, and so does a request that does not name its replica.
    func read(
        scopes: [Scope], cursor: ScopeCursor, limit: Int, replica: ReplicaID?, record: Bool = true,
        acknowledged: ScopeCursor? = nil, exclude: ReplicaID? = nil, epoch: ScopeEpoch? = nil,
        lane: Database.Lane = .work, logger: Logger
    ) async throws -> Page {
        let epoch = epoch ?? hub.epoch(scopes)
        return try await database(for: scopes).withConnection(lane: lane) { [repository, hub] connection in
            let heads = try await repository.selectHeads(
                scopes.map(\.name), on: connection, logger: logger)
            hub.learn(heads.mapValues(\.head), of: scopes, at: epoch)
            try await refuseIfCannotContinue(
                scopes: scopes, cursor: cursor, heads: heads, replica: replica, on: connection, logger: logger)
            let (events, next) = try await readEvents(
                scopes: scopes, cursor: cursor, heads: heads, limit: limit, exclude: exclude, on: connection,
                logger: logger)
            let hasMore = scopes.contains { scope in (heads[scope]?.head ?? 0) > next[scope] }
            let left = try await remaining(scopes: scopes, after: next, heads: heads, on: connection, logger: logger)
            let retainedFrom = Dictionary(
                uniqueKeysWithValues: scopes.map { ($0, heads[$0]?.retainedFromSeq ?? 1) })
            if let replica, record {
                try await recordProgress(
                    replica: replica, scopes: scopes, cursor: cursor, acknowledged: acknowledged,
                    retainedFrom: retainedFrom, on: connection, logger: logger)
            }
            let (stable, othersStable) = try await freshStablePoints(
                scopes: scopes, heads: heads, replica: replica, on: connection, logger: logger)
            var purged: [Scope: Int64] = [:]
            for scope in scopes where cursor[scope] == 0 {
                if let sum = heads[scope]?.purgedChecksum, sum != 0 { purged[scope] = sum }
            }
            return Page(
                events: events, cursor: next, hasMore: hasMore, remaining: left, stable: stable,
                othersStable: othersStable, foldedThrough: heads.mapValues(\.compactedThrough),
                retainedFrom: retainedFrom, purged: purged)
        }
    }

    /// Refuses a read from `cursor` that cannot continue (see `read`, "Retention"): a position behind a
    /// purge, unless `replica` based its state on the purge level in `heads`, then a position ahead of its
    /// scope's head.
    /// - Throws: `SyncProtocolError` `reset.required`.
    private func refuseIfCannotContinue(
        scopes: [Scope], cursor: ScopeCursor, heads: [Scope: EventRepository.ScopeHead], replica: ReplicaID?,
        on connection: PostgresConnection, logger: Logger
    ) async throws {
        // A position of 0 holds nothing yet (a new device, or one that reset): it reads the folded history
        // from the start.
        let behind = scopes.filter { scope in
            let position = cursor[scope]
            return position > 0 && position < (heads[scope]?.retainedFromSeq ?? 1) - 1
        }
        if !behind.isEmpty {
            var bases: [String: (acknowledged: Int64, basedOnRetained: Int64)] = [:]
            if let replica {
                bases = try await repository.progress(
                    replica: replica, in: behind.map(\.name), on: connection, logger: logger)
            }
            for scope in behind where bases[scope.name]?.basedOnRetained != heads[scope]?.retainedFromSeq {
                throw SyncProtocolError(
                    .resetRequired,
                    "the cursor for scope \(scope) is older than history compaction purged; reset and pull from the start"
                )
            }
        }
        for scope in scopes {
            let position = cursor[scope]
            let head = heads[scope] ?? EventRepository.ScopeHead(head: 0, retainedFromSeq: 1)
            if position > head.head {
                throw SyncProtocolError(
                    .resetRequired, "the cursor for scope \(scope) is ahead of the server's history")
            }
        }
    }

    /// The page's events: each scope with news after `cursor`, in order, until `limit` events are read, with
    /// the cursor past them.
    private func readEvents(
        scopes: [Scope], cursor: ScopeCursor, heads: [Scope: EventRepository.ScopeHead], limit: Int,
        exclude: ReplicaID?, on connection: PostgresConnection, logger: Logger
    ) async throws -> (events: [StoredEvent], next: ScopeCursor) {
        var events: [StoredEvent] = []
        var next = cursor
        var remaining = limit
        for scope in scopes where remaining > 0 {
            guard let head = heads[scope], head.head > cursor[scope] else { continue }
            // Events `exclude` made are left out, except folded history (snapshots carry the dot of the
            // last event they fold, which may be anyone's). A batch short of the limit still read every
            // row up to the head, so the position moves to the head below as before.
            let batch = try await repository.events(
                in: scope, after: cursor[scope], limit: remaining, foldedThrough: head.compactedThrough,
                excluding: exclude.map { ($0.description, head.compactedThrough) }, on: connection,
                logger: logger)
            if let last = batch.last { next.advance(scope, to: last.seq) }
            // The scope ran out of rows before the page did: every row up to the head as read was returned
            // (seqs commit in order), and compaction may have dropped the last ones (a deleted note), so
            // the position moves to the head itself.
            if batch.count < remaining { next.advance(scope, to: max(next[scope], head.head)) }
            remaining -= batch.count
            events += batch
        }
        return (events, next)
    }

    /// How many events are stored past `next` up to each scope's head in `heads` (`Page.remaining`).
    private func remaining(
        scopes: [Scope], after next: ScopeCursor, heads: [Scope: EventRepository.ScopeHead],
        on connection: PostgresConnection, logger: Logger
    ) async throws -> Int64 {
        var left: Int64 = 0
        for scope in scopes {
            guard let head = heads[scope] else { continue }
            let position = next[scope]
            left += max(0, head.head - max(position, head.compactedThrough))
            // Below `compacted_through` seqs have gaps where history was folded: count what is stored.
            if position < head.compactedThrough {
                left += try await repository.count(
                    in: scope, after: position, through: head.compactedThrough, on: connection, logger: logger)
            }
        }
        return left
    }

    /// Each scope's stable point and, for a read that names `replica`, its stable point among the other
    /// replicas (`Page.stable`, `Page.othersStable`), from readings of the last second (`stablePoints`) or
    /// read now for the scopes without one.
    private func freshStablePoints(
        scopes: [Scope], heads: [Scope: EventRepository.ScopeHead], replica: ReplicaID?,
        on connection: PostgresConnection, logger: Logger
    ) async throws -> (stable: [Scope: Int64], othersStable: [Scope: Int64]?) {
        var floors = stablePoints.freshFloors(scopes)
        let missing = scopes.filter { floors[$0] == nil }
        if !missing.isEmpty {
            let read = try await repository.lowestAcknowledgements(
                in: missing.map(\.name), activeWithinSeconds: evictionHorizonSeconds, on: connection,
                logger: logger)
            let readings = Dictionary(
                uniqueKeysWithValues: missing.map { ($0, StablePointCache.Reading(floor: read[$0.name])) })
            stablePoints.store(readings)
            floors.merge(readings) { $1 }
        }
        // Never past the head as read now. With no active replica, the stable point is 0 (nobody has
        // said what it holds) and, among the others, the head (nobody else is left to hold it back).
        var stable: [Scope: Int64] = [:]
        var othersStable: [Scope: Int64]? = replica == nil ? nil : [:]
        for scope in scopes {
            let head = heads[scope]?.head ?? 0
            let floor = floors[scope]?.floor
            stable[scope] = min(floor?.lowest ?? 0, head)
            if let replica {
                othersStable?[scope] = min(floor?.excluding(replica.description) ?? head, head)
            }
        }
        return (stable, othersStable)
    }

    /// Records `replica`'s progress for a read from `cursor` whose heads gave `retainedFrom`: the position it
    /// vouches for in each scope is its cursor, held back to what it knew when it made the oldest event still
    /// in its outbox (`acknowledged`); a scope it read from position 0 has its state based on the purge level
    /// read with the heads, before the events.
    func recordProgress(
        replica: ReplicaID, scopes: [Scope], cursor: ScopeCursor, acknowledged: ScopeCursor?,
        retainedFrom: [Scope: Int64], on connection: PostgresConnection, logger: Logger
    ) async throws {
        let positions = Dictionary(
            uniqueKeysWithValues: scopes.map { ($0, min(cursor[$0], acknowledged?[$0] ?? cursor[$0])) })
        var bases: [Scope: Int64] = [:]
        for scope in scopes where cursor[scope] == 0 { bases[scope] = retainedFrom[scope] ?? 1 }
        try await repository.recordProgress(
            replica: replica, positions: positions, bases: bases, on: connection, logger: logger)
    }
}

/// Each scope's lowest acknowledged positions as last read, kept for `maxAge`. A stable point in an answer is
/// advisory (a replica prunes only its own copy of history at or below it), so one up to a second old is as
/// good; compaction reads its own.
final class StablePointCache: Sendable {
    /// One scope's reading: its two lowest acknowledged positions, or nil when no replica was active.
    struct Reading: Sendable, Hashable {
        var floor: AcknowledgedFloor?
    }

    private let entries = Mutex<[Scope: (reading: Reading, at: ContinuousClock.Instant)]>([:])
    let maxAge: Duration

    init(maxAge: Duration = .seconds(1)) {
        self.maxAge = maxAge
    }

    /// The scopes' stable points read less than `maxAge` (by default the cache's) ago (0 where no replica was
    /// active).
    func fresh(_ scopes: [Scope], maxAge: Duration? = nil) -> [Scope: Int64] {
        freshFloors(scopes, maxAge: maxAge).mapValues { $0.floor?.lowest ?? 0 }
    }

    /// The scopes' readings made less than `maxAge` (by default the cache's) ago.
    func freshFloors(_ scopes: [Scope], maxAge: Duration? = nil) -> [Scope: Reading] {
        let now = ContinuousClock.now
        let maxAge = maxAge ?? self.maxAge
        return entries.withLock { entries in
            var found: [Scope: Reading] = [:]
            for scope in scopes {
                if let entry = entries[scope], now - entry.at < maxAge { found[scope] = entry.reading }
            }
            return found
        }
    }

    func store(_ readings: [Scope: Reading]) {
        let now = ContinuousClock.now
        entries.withLock { entries in
            for (scope, reading) in readings { entries[scope] = (reading, now) }
        }
    }
}
