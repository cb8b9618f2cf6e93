import Foundation
import Logging
import PostgresNIO
import SyncModels
import SyncProtocol

/// Appends pushed events (docs/ARCHITECTURE.md, "Ordering" and "Group commit"): a transaction that locks the head
/// rows of the scopes involved in sorted order, sets aside stored ids as duplicates (with their original seq),
/// checks stream versions, runs the domain rules, assigns `head+1…head+n`, and writes everything with one
/// statement. Later pushes to the same scopes wait for the lock, so seq order is commit order and has no gaps.
/// Small pushes that arrive while their lane's transaction is busy share the next transaction (`PushGroups`),
/// decided one after another in queue order inside it.
struct PushService: Sendable {
    let database: Database
    let repository: EventRepository
    let rules: [any EventRule]
    let limits: ProtocolLimits
    /// Whether events of a type are CRDT operations that skip the stream-version check (`SyncDomain`).
    let isCommutative: @Sendable (String) -> Bool
    let hub: LongPollHub
    let metrics: ServerMetrics
    let sightings = ReplicaSightings()
    /// Group commit's queues; nil runs every push in a transaction of its own.
    let groups: PushGroups<PendingPush, Result<PushPlan, any Error>>?
    /// Group commit's lanes on one PostgreSQL, and per node on Citus.
    let groupLanes: Int
    /// On a Citus cluster, where each scope lives and each node's pool: a push of one node's scopes runs its
    /// transaction on that node, in a lane of that node's (`route(of:)`), so that it commits there in one phase.
    let citus: CitusRouting?
    /// The blobs an event refers to (`SyncDomain.blobReferences(in:)`), checked by `BlobReferenceCheck`.
    let blobReferences: @Sendable (Event) -> [BlobReference]
    /// Whether pushes that need nothing decided between statements are appended in one (`OneStatementAppend`);
    /// off, every push runs a transaction of steps (tests compare the two).
    let appendsInOneStatement: Bool

    init(
        database: Database, rules: [any EventRule], limits: ProtocolLimits,
        isCommutative: @escaping @Sendable (String) -> Bool, hub: LongPollHub, metrics: ServerMetrics,
        groupLanes: Int = 2, groupMaxEvents: Int = 256,
        citus: CitusRouting? = nil,
        blobReferences: @escaping @Sendable (Event) -> [BlobReference] = { _ in [] },
        appendsInOneStatement: Bool = true
    ) {
        self.blobReferences = blobReferences
        self.appendsInOneStatement = appendsInOneStatement
        self.database = database
        self.rules = rules
        self.limits = limits
        self.isCommutative = isCommutative
        self.hub = hub
        self.metrics = metrics
        self.citus = citus
        self.repository = EventRepository(prepares: citus == nil)
        self.groupLanes = max(1, groupLanes)
        self.groups = groupMaxEvents > 0 ? PushGroups(maxEvents: groupMaxEvents) : nil
    }

    /// Where a push to `scopes` runs: its lane (nil: alone), one of `groupLanes` by the first scope's hash, and
    /// the database. On Citus, on the node holding the scopes, in that node's one lane; through the coordinator,
    /// alone, when they span nodes or one's node is not known yet.
    func route(of scopes: [Scope]) async -> (lane: Int?, database: Database) {
        guard let first = scopes.first else { return (nil, database) }
        let spread = Int(UInt(bitPattern: first.name.hashValue) % UInt(groupLanes))
        guard let citus else { return (spread, database) }
        guard let node = await citus.node(of: scopes) else { return (nil, database) }
        // One lane per node: its groups are larger (each call of the shard groups' functions costs the node about
        // as much for one push as for several), and the nodes' lanes run side by side. The lane is the node's
        // pool: a node that moved has a new one, and a group led on the old pool never holds pushes of the new.
        return (ObjectIdentifier(node.database).hashValue, node.database)
    }

    /// A push ready for its transaction: its plan (envelopes, scopes and repeats decided), its payloads as JSON
    /// text, who pushed it.
    struct PendingPush: Sendable {
        var plan: PushPlan
        var payloads: [Int: String]
        var replica: ReplicaID
        var logger: Logger
        /// The blobs the pending events refer to, by index; only events that refer to some.
        var references: [Int: [BlobReference]] = [:]
        /// The scopes in which the replica's sighting is due (`ReplicaSightings`): recorded by the push's own
        /// statement or transaction.
        var sighted: [Scope] = []
    }

    /// How often a push is retried after a deadlock, serialization failure or id race before giving up.
    static let maxAttempts = 5

    /// Appends `events` for `identity`, returning one result per event in request order.
    /// - Throws: `SyncProtocolError` `request.tooLarge` for too many events or an oversized payload,
    ///   `server.unavailable` when the database cannot serve.
    func push(_ events: [Event], replica: ReplicaID, identity: TokenIdentity, logger: Logger) async throws
        -> [PushResult]
    {
        var pending = try prepare(events, replica: replica, scopes: identity.scopes, logger: logger)
        var plan = pending.plan
        if !plan.pendingIndexes.isEmpty {
            pending.sighted = sightings.due(replica: replica, scopes: plan.pendingScopes)
            plan = try await commit(pending)
            hub.signal(heads: plan.acceptedHeads)
        }
        let results = plan.results
        metrics.recordPush(results)
        return results
    }

    /// What can be decided before the transaction: the event count, the plan (envelopes, `scopes`, repeated
    /// ids), and each pending event's payload as JSON text within its size limit.
    /// - Throws: `SyncProtocolError` `request.tooLarge` for too many events or an oversized payload.
    func prepare(_ events: [Event], replica: ReplicaID, scopes: Set<Scope>, logger: Logger) throws -> PendingPush {
        guard events.count <= limits.maxEventsPerPush else {
            throw SyncProtocolError.tooLarge("a push carries at most \(limits.maxEventsPerPush) events")
        }
        var plan = PushPlan(events: events, allowedScopes: scopes)
        var payloads: [Int: String] = [:]
        var references: [Int: [BlobReference]] = [:]
        for index in plan.pendingIndexes {
            let blobs = blobReferences(events[index])
            if !blobs.isEmpty { references[index] = blobs }
            do {
                payloads[index] = try PayloadEncoder.encode(events[index].payload, maxBytes: limits.maxPayloadBytes)
            } catch .tooLarge {
                throw SyncProtocolError.tooLarge(
                    "the payload of events[\(index)] is larger than \(limits.maxPayloadBytes) bytes")
            } catch {
                plan.reject(index, EventRejection(.eventInvalid, "payload strings must not contain U+0000"))
            }
        }
        return PendingPush(plan: plan, payloads: payloads, replica: replica, logger: logger, references: references)
    }

    /// Runs `push` in a transaction: alone when group commit is off, when the push is larger than a group, or
    /// when its lane is idle; otherwise with the pushes queued in its lane.
    private func commit(_ push: PendingPush) async throws -> PushPlan {
        let events = push.plan.pendingIndexes.count
        let (lane, database) = await route(of: push.plan.pendingScopes)
        guard let groups, events <= groups.maxEvents, let lane else {
            // Not in one statement through a Citus coordinator (no lane): there each of the function's statements,
            // a row at a time, would be a round trip to a worker, with the scopes' locks held.
            return try await append(push, on: database, oneStatement: lane != nil)
        }
        let answer = await groups.submit(push, events: events, lane: lane) { pushes in
            await self.append(group: pushes, on: database)
        }
        return try answer.get()
    }

    /// Runs a group: in one transaction, or, if that fails for any reason, one push after another in
    /// transactions of their own, so that one push's failure (a rule's error, `reset.required`, …) is its own.
    /// Only when the database cannot serve at all (503 `server.unavailable`) does every push of the group get
    /// that answer at once.
    /// The group's work runs in a task of its own, so that the leader's cancellation (its client gone) does not
    /// cancel its followers.
    func append(group pushes: [PendingPush]) async -> [Result<PushPlan, any Error>] {
        await append(group: pushes, on: database)
    }

    /// `append(group:)` on `database` (on Citus, the pool of the node holding the group's scopes).
    func append(group pushes: [PendingPush], on database: Database) async -> [Result<PushPlan, any Error>] {
        guard pushes.count > 1 else {
            do { return [.success(try await append(pushes[0], on: database))] } catch { return [.failure(error)] }
        }
        return await Task(executorPreference: LoopExecutors.singleton.current) { [self] in
            let logger = pushes[0].logger
            do {
                let plans = try await appendTogether(pushes, on: database, logger: logger)
                metrics.recordPushGroup(pushes: pushes.count, split: false)
                return plans.map { .success($0) }
            } catch {
                // The database cannot serve (down, or no connection in time): no push of the group caused it, and
                // running them one by one would only make each wait as long again.
                if let unavailable = Database.classify(error) as? SyncProtocolError,
                    unavailable.code == .serverUnavailable
                {
                    return pushes.map { _ in .failure(unavailable) }
                }
                logger.debug(
                    "push group failed; its pushes run one by one",
                    metadata: ["sync.push.group": "\(pushes.count)", "sync.error": "\(String(reflecting: error))"])
                metrics.recordPushGroup(pushes: pushes.count, split: true)
                var results: [Result<PushPlan, any Error>] = []
                for push in pushes {
                    do { results.append(.success(try await append(push, on: database))) } catch {
                        results.append(.failure(error))
                    }
                }
                return results
            }
        }.value
    }

    /// The whole group in one statement (`OneStatementAppend`) when it applies, else in one transaction of steps,
    /// optimistic then careful; any other error is the caller's.
    private func appendTogether(_ pushes: [PendingPush], on database: Database, logger: Logger) async throws
        -> [PushPlan]
    {
        try await handingOver(pushes) {
            var careful = false
            do {
                if let appended = try await appendInOneStatement(pushes, on: database, logger: logger) {
                    return appended
                }
            } catch  where Self.needsCareful(error) {
                careful = true
            }
            while true {
                do {
                    return try await database.withConnection { [self, careful] connection in
                        database.pushTransactions.increment()
                        return try await connection.transaction(logger: logger) { connection in
                            try await self.decide(pushes, careful: careful, on: connection, logger: logger)
                        }
                    }
                } catch  where Self.needsCareful(error) && !careful {
                    careful = true
                }
            }
        }
    }

    /// What an append did: the plans, and, for the live stream, each locked scope's head before it and the time
    /// its rows were received at (nil when that time is not known to be the rows' own: the stream reads them).
    struct Appended: Sendable {
        var plans: [PushPlan]
        var headsBefore: [Scope: Int64]
        var receivedAt: Date?

        /// The events `plans` (of `pushes`, in queue order) stored in each of `scopes`, as a read of the log
        /// would give them, for the live stream (`LiveHub.appended`); nil when the time they were received at is
        /// not known.
        func events(of pushes: [PendingPush], in scopes: Set<Scope>) -> [Scope: LiveHub.Appended]? {
            guard let receivedAt else { return nil }
            var appended: [Scope: LiveHub.Appended] = [:]
            for (push, plan) in zip(pushes, plans) {
                for index in plan.acceptedIndexes {
                    let event = plan.events[index]
                    guard scopes.contains(event.scope), case .accepted(let seq) = plan.outcomes[index] else {
                        continue
                    }
                    let stored = StoredEvent(
                        scope: event.scope, seq: seq, id: event.id.uuid, stream: event.stream,
                        streamVersion: event.streamVersion, type: event.type,
                        schemaVersion: Int32(clamping: event.schemaVersion), hlc: event.hlc.description,
                        dotReplica: event.dot.replica.description, dotCounter: Int64(bitPattern: event.dot.counter),
                        payloadJSON: push.payloads[index]!, receivedAt: receivedAt)
                    appended[event.scope, default: LiveHub.Appended(after: headsBefore[event.scope] ?? 0, events: [])]
                        .events.append(stored)
                }
            }
            // Seqs rise in queue order within a scope; kept sorted should a plan list them otherwise.
            for scope in appended.keys { appended[scope]!.events.sort { $0.seq < $1.seq } }
            return appended
        }
    }

    /// Runs `append`, the append of `pushes`, with the live stream told to expect its events (`LiveHub.expect`)
    /// and handed them once committed: its subscribers get them without a read of the database.
    private func handingOver(_ pushes: [PendingPush], _ append: () async throws -> Appended) async throws
        -> [PushPlan]
    {
        let live = hub.live
        let expected = live?.expect(pushes.lazy.flatMap(\.plan.pendingScopes)) ?? []
        guard let live, !expected.isEmpty else { return try await append().plans }
        var events: [Scope: LiveHub.Appended]?
        defer { live.appended(expected, events: events) }
        let appended = try await append()
        events = appended.events(of: pushes, in: Set(expected.map(\.scope)))
        return appended.plans
    }

    /// Runs one push in one statement (`OneStatementAppend`) when that applies, else in a transaction of steps,
    /// first optimistically, then carefully if needed, retrying deadlocks and serialization failures.
    ///
    /// The optimistic attempt skips looking up which ids are already stored: retries are rare, and the
    /// insert's `ON CONFLICT (scope, event_id) DO NOTHING` count tells whether any was. If one was, or if any event
    /// was rejected (a retried event could look like a stale version or a second creation before it is
    /// recognised as a duplicate), the attempt is rolled back and the careful attempt looks them up first.
    private func append(_ push: PendingPush, on database: Database, oneStatement: Bool = true) async throws
        -> PushPlan
    {
        var attempt = 1
        var careful = false
        var oneStatement = oneStatement
        let logger = push.logger
        return try await handingOver([push]) {
            while true {
                do {
                    if oneStatement {
                        oneStatement = false
                        if let appended = try await appendInOneStatement([push], on: database, logger: logger) {
                            return appended
                        }
                    }
                    return try await database.withConnection { [self, careful] connection in
                        database.pushTransactions.increment()
                        return try await connection.transaction(logger: logger) { connection in
                            try await self.decide([push], careful: careful, on: connection, logger: logger)
                        }
                    }
                } catch  where Self.needsCareful(error) && !careful {
                    careful = true
                } catch  where Database.isRetryable(error) && attempt < Self.maxAttempts {
                    attempt += 1
                    logger.debug("push retried", metadata: ["sync.push.attempt": "\(attempt)"])
                } catch {
                    throw Database.classify(error)
                }
            }
        }[0]
    }

    /// A replica whose state predates a purge (it was silent past the eviction horizon when compaction
    /// dropped tombstones it had not seen) made its events against a state that may hold what was purged;
    /// accepted, they could anchor on elements nobody else has any more. It must reset first (410
    /// `reset.required`) and re-base what it made. Replicas that never acknowledged anything in a scope, and
    /// those that bootstrapped since the last purge, pass.
    private func refuseIfBehindPurge(
        _ replica: ReplicaID, heads: [Scope: EventRepository.ScopeHead], on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        let purged = heads.filter { $0.value.retainedFromSeq > 1 }
        guard !purged.isEmpty else { return }
        let progress = try await repository.progress(
            replica: replica, in: purged.keys.map(\.name), on: connection, logger: logger)
        for (scope, head) in purged.sorted(by: { $0.key < $1.key }) {
            guard let known = progress[scope.name] else { continue }
            if known.acknowledged > 0, known.acknowledged < head.retainedFromSeq - 1,
                known.basedOnRetained != head.retainedFromSeq
            {
                throw SyncProtocolError(
                    .resetRequired,
                    "this replica last read scope \(scope) before history that compaction purged; reset, pull from the start and re-base pending events"
                )
            }
        }
    }

    /// Appends `pushes` by one call of `sync_append` (`OneStatementAppend`); nil when that does not apply to them.
    ///
    /// A call refused for any reason is followed by one lookup of which of the pending ids are stored, outside
    /// any transaction (a retry's, most often: a device that never got its answer sends the same events again).
    /// When some are, they become duplicates with their seqs, as the careful steps would mark them, and the call
    /// is made again for the rest; a push with nothing left records its sighting alone. A retry then costs a
    /// lookup and a call where it took the transaction of steps, whose locks hold its lane for many round trips.
    /// - Throws: `NeedsCarefulAppend` when the database refused them for another reason (a stale version, a
    ///   replica behind a purge, a rule, or a stored id the lookup did not see yet: the call undid everything);
    ///   database errors.
    private func appendInOneStatement(_ pushes: [PendingPush], on database: Database, logger: Logger) async throws
        -> Appended?
    {
        guard appendsInOneStatement else { return nil }
        let given = pushes
        var pushes = pushes
        var lookedUp = false
        var onShard = true
        while true {
            if lookedUp, pushes.allSatisfy({ $0.plan.pendingIndexes.isEmpty }) {
                try await answerStored(pushes, given: given, on: database, logger: logger)
                return Appended(plans: pushes.map(\.plan), headsBefore: [:], receivedAt: nil)
            }
            guard pushes.map(\.plan.pendingIndexes.count).reduce(0, +) <= OneStatementAppend.maxEvents,
                let call = OneStatementAppend(pushes, rules: rules, isCommutative: isCommutative)
            else { return nil }
            let answer: (heads: [Scope: Int64], receivedAt: Date)
            let onShards = onShard ? shardStatement(call, on: database) : nil
            do {
                answer = try await database.withConnection { [repository] connection in
                    database.pushTransactions.increment()
                    return try await call.run(
                        on: connection, prepared: repository.prepares, onShards: onShards, logger: logger)
                }
                if onShards != nil { metrics.pushesOnShards.increment() }
            } catch let error as PSQLError where onShards != nil && error.code == .server {
                // The shards are not on this node (moved: `CitusShardAppend.notHere`), this node has no function
                // for them (a shard group made since start-up), or they are gone (split): the statement wrote
                // nothing, and the call runs again as `sync_append`, which Citus routes to wherever they are.
                logger.debug(
                    "the shard groups' call went to the distributed function",
                    metadata: ["sync.error": "\(String(reflecting: error))"])
                citus?.placements.forget(pushes.flatMap { $0.plan.pendingScopes.map(\.name) })
                onShard = false
                continue
            } catch  where Self.needsCareful(error) {
                metrics.recordOneStatement(refused: true)
                guard !lookedUp, try await markStored(&pushes, on: database, logger: logger) else { throw error }
                lookedUp = true
                continue
            }
            metrics.recordOneStatement(refused: false)
            return Appended(
                plans: OneStatementAppend.accepted(pushes, heads: answer.heads), headsBefore: answer.heads,
                receivedAt: answer.receivedAt)
        }
    }

    /// On a Citus worker's pool, `call` as one statement of the functions of its scopes' shard groups
    /// (`CitusShardAppend`), when where each scope is is known from routing the pushes; nil otherwise.
    private func shardStatement(_ call: OneStatementAppend, on database: Database) -> PostgresQuery? {
        guard let citus, database !== self.database else { return nil }
        return call.shardStatement { citus.placements.place(of: $0)?.shard }
    }

    /// What the steps do for pushes whose every pending event turned out stored (`given`, before they were
    /// marked): each replica behind a purge in the scopes it pushed to is refused (`refuseIfBehindPurge`, on
    /// the heads as they stand; nothing is written, so nothing needs their locks), and the sightings due are
    /// recorded.
    private func answerStored(_ pushes: [PendingPush], given: [PendingPush], on database: Database, logger: Logger)
        async throws
    {
        try await database.withConnection { [repository] connection in
            let scopes = Set(given.flatMap(\.plan.pendingScopes))
            let heads = try await repository.selectHeads(scopes.map(\.name), on: connection, logger: logger)
            try await refuseReplicasBehindPurge(of: given, heads: heads, on: connection, logger: logger)
            try await recordSightings(of: pushes, on: connection, logger: logger)
        }
    }

    /// Looks up which pending ids of `pushes` are stored and marks them duplicates with their seqs; whether any
    /// was.
    private func markStored(_ pushes: inout [PendingPush], on database: Database, logger: Logger) async throws
        -> Bool
    {
        let keys = pushes.flatMap(\.plan.pendingKeys)
        let stored = try await database.withConnection { [repository] connection in
            try await repository.storedSeqs(keys, on: connection, logger: logger)
        }
        guard !stored.isEmpty else { return false }
        for slot in pushes.indices { pushes[slot].plan.markStored(among: stored) }
        return true
    }

    static func needsCareful(_ error: any Error) -> Bool {
        error is NeedsCarefulAppend
    }

    /// The body of the push transaction, for one push or a group.
    ///
    /// A group's pushes are decided one after another in queue order, each exactly as it would be in a transaction
    /// of its own that followed the previous one's commit: it sees as stored the ids accepted by the pushes before
    /// it (a duplicate then gets their seq), the stream versions they moved, the effects of their rules, and its
    /// seqs follow theirs. Only the rows are written once for the group, at the end; rules decide from their own
    /// tables (`EventRule`), which the effects of earlier pushes have already updated.
    private func decide(_ pushes: [PendingPush], careful: Bool, on connection: PostgresConnection, logger: Logger)
        async throws -> Appended
    {
        var plans = pushes.map(\.plan)
        let (heads, now) = try await lockHeads(of: pushes, plans: plans, on: connection, logger: logger)
        // Through a Citus coordinator, rows may take the time of another node's transaction: the live stream
        // reads them back.
        func appended() -> Appended {
            Appended(plans: plans, headsBefore: heads.mapValues(\.head), receivedAt: citus == nil ? now : nil)
        }
        // Ids already stored (looked up by the careful attempt), then also those accepted by earlier pushes of
        // the group.
        var stored: [EventRepository.EventKey: Int64] = [:]
        if careful {
            stored = try await repository.storedSeqs(plans.flatMap(\.pendingKeys), on: connection, logger: logger)
        }
        let checked = Array(Set(plans.flatMap { $0.versionCheckedStreams(isCommutative: isCommutative) }))
        var group = DecidedGroup(
            stored: stored, current: try await repository.streamVersions(checked, on: connection, logger: logger),
            running: heads.mapValues(\.head))
        for (slot, push) in pushes.enumerated() {
            try await decide(push, &plans[slot], into: &group, careful: careful, on: connection, logger: logger)
        }
        try await recordSightings(of: pushes, on: connection, logger: logger)
        guard !group.rows.isEmpty else { return appended() }

        // On Citus, one statement for the parts of a single scope's bulk write (its `VALUES` rows would cost
        // more to plan than the CTEs' intermediate results), one per part otherwise (`writeInParts`).
        let inserted =
            citus == nil || (group.newHeads.count == 1 && group.rows.count > EventRepository.valuesRowsLimit)
            ? try await repository.write(
                group.rows, heads: group.newHeads, streams: group.streams, on: connection, logger: logger)
            : try await repository.writeInParts(
                group.rows, heads: group.newHeads, streams: group.streams, on: connection, logger: logger)
        guard inserted == group.rows.count else { throw careful ? AppendRace() : NeedsCarefulAppend() }
        try await run(&group.effects, on: connection, logger: logger)
        return appended()
    }

    /// What the pushes of a transaction decided so far: what the next push sees (stored ids, stream versions,
    /// heads, the effects of rules not run yet) and what the transaction writes at the end.
    private struct DecidedGroup {
        /// Seqs of stored ids: those the careful attempt looked up, then those accepted.
        var stored: [EventRepository.EventKey: Int64]
        /// The versions of the streams whose versions are checked, as stored and then as moved.
        var current: [PushPlan.StreamKey: Int64]
        /// Each locked scope's head, moved past the seqs assigned.
        var running: [Scope: Int64]
        /// The heads to write: of the scopes that got seqs.
        var newHeads: [Scope: Int64] = [:]
        /// The stream versions to write.
        var streams: [PushPlan.StreamKey: Int64] = [:]
        /// The accepted events' rows, in order.
        var rows: [EventRepository.NewEvent] = []
        /// The effects of rules not run yet: before the next push's rules read, or after the write.
        var effects: [PostgresQuery] = []
    }

    /// Locks the head rows of the scopes `pushes` write to, in sorted order, and refuses each push whose
    /// replica is behind a purge in its scopes (`refuseIfBehindPurge`).
    private func lockHeads(
        of pushes: [PendingPush], plans: [PushPlan], on connection: PostgresConnection, logger: Logger
    ) async throws -> (heads: [Scope: EventRepository.ScopeHead], now: Date) {
        let scopes = pushes.count == 1 ? plans[0].pendingScopes : Array(Set(plans.flatMap(\.pendingScopes))).sorted()
        let (heads, now) = try await repository.lockScopes(scopes, on: connection, logger: logger)
        try await refuseReplicasBehindPurge(of: pushes, heads: heads, on: connection, logger: logger)
        return (heads, now)
    }

    /// Refuses each push whose replica is behind a purge in the scopes it pushes to (`refuseIfBehindPurge`), as
    /// `heads` stand.
    private func refuseReplicasBehindPurge(
        of pushes: [PendingPush], heads: [Scope: EventRepository.ScopeHead], on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        guard heads.values.contains(where: { $0.retainedFromSeq > 1 }) else { return }
        for push in pushes {
            let scopes = Set(push.plan.pendingScopes)
            let own = pushes.count == 1 ? heads : heads.filter { scopes.contains($0.key) }
            try await refuseIfBehindPurge(push.replica, heads: own, on: connection, logger: logger)
        }
    }

    /// Decides one push of the transaction into `plan`, as `group` stands after the pushes before it, and adds
    /// what it accepted to `group`: stored ids become duplicates, stream versions are checked, blob references
    /// and rules may reject, the rest get seqs.
    /// - Throws: `NeedsCarefulAppend` when the optimistic attempt met a duplicate or a rejection.
    private func decide(
        _ push: PendingPush, _ plan: inout PushPlan, into group: inout DecidedGroup, careful: Bool,
        on connection: PostgresConnection, logger: Logger
    ) async throws {
        plan.markStored(among: group.stored)
        let candidates = plan.pendingIndexes.count
        let newVersions = plan.checkVersions(current: group.current, isCommutative: isCommutative)
        if !push.references.isEmpty {
            let pending = Set(plan.pendingIndexes)
            let rejections = try await BlobReferenceCheck.rejections(
                push.references.filter { pending.contains($0.key) }, in: plan.events, on: connection,
                logger: logger)
            for (index, rejection) in rejections { plan.reject(index, rejection) }
        }
        let decisions = try await runRules(&plan, effects: &group.effects, on: connection, logger: logger)

        let rejectedStreams = Set(
            plan.events.indices.compactMap { index -> PushPlan.StreamKey? in
                guard case .rejected = plan.outcomes[index] else { return nil }
                return PushPlan.StreamKey(scope: plan.events[index].scope, stream: plan.events[index].stream)
            })
        if !careful && plan.pendingIndexes.count < candidates { throw NeedsCarefulAppend() }
        let pushHeads = plan.assignSeqs(heads: group.running)
        group.running.merge(pushHeads) { $1 }
        group.newHeads.merge(pushHeads) { $1 }
        let accepted = plan.acceptedIndexes
        guard !accepted.isEmpty else { return }

        // Versions of streams whose events were all accepted; recomputed if a rule rejected one of them.
        var versions = newVersions
        for key in newVersions.keys where rejectedStreams.contains(key) {
            versions[key] =
                accepted.filter {
                    plan.events[$0].scope == key.scope && plan.events[$0].stream == key.stream
                        && !isCommutative(plan.events[$0].type)
                }.map { plan.events[$0].streamVersion }.max()
        }
        for (key, version) in versions {
            group.current[key] = max(group.current[key] ?? 0, version)
            group.streams[key] = max(group.streams[key] ?? 0, version)
        }

        for index in accepted {
            guard case .accepted(let seq) = plan.outcomes[index] else {
                preconditionFailure("accepted without seq")
            }
            let event = plan.events[index]
            group.rows.append(EventRepository.NewEvent(event: event, seq: seq, payloadJSON: push.payloads[index]!))
            group.stored[EventRepository.EventKey(scope: event.scope, id: event.id)] = seq
        }
        let acceptedSet = Set(accepted)
        for (indexes, decision) in decisions {
            group.effects += decision.effects(indexes.filter { acceptedSet.contains($0) }.map { plan.events[$0] })
        }
        if !push.references.isEmpty,
            let record = BlobReferenceCheck.record(
                accepted.compactMap { index in push.references[index].map { (plan.events[index], $0) } })
        {
            group.effects.append(record)
        }
    }

    /// Records the sightings due of `pushes`' replicas (for compaction's stable point), in their transaction.
    private func recordSightings(of pushes: [PendingPush], on connection: PostgresConnection, logger: Logger)
        async throws
    {
        var due: [(replica: ReplicaID, scope: Scope)] = []
        var seen: Set<String> = []
        for push in pushes {
            for scope in push.sighted where seen.insert("\(push.replica) \(scope)").inserted {
                due.append((push.replica, scope))
            }
        }
        try await repository.recordSightings(due, on: connection, logger: logger)
    }

    /// Runs each rule on the pending events of `plan` it applies to, after the queued `effects` (run first, so
    /// that the rule reads tables they updated), and marks its rejections; returns each rule's decision with
    /// the indexes it was made on, for its effects once the accepted events are known.
    private func runRules(
        _ plan: inout PushPlan, effects: inout [PostgresQuery], on connection: PostgresConnection, logger: Logger
    ) async throws -> [([Int], RuleDecision)] {
        var decisions: [([Int], RuleDecision)] = []
        for rule in rules {
            let indexes = plan.pendingIndexes.filter { rule.applies(to: plan.events[$0].type) }
            guard !indexes.isEmpty else { continue }
            try await run(&effects, on: connection, logger: logger)
            let decision = try await rule.evaluate(
                indexes.map { plan.events[$0] }, connection: connection, logger: logger)
            for (position, rejection) in decision.rejections { plan.reject(indexes[position], rejection) }
            decisions.append((indexes, decision))
        }
        return decisions
    }

    /// Runs the queued effects of rules, in order, and empties the queue.
    private func run(_ effects: inout [PostgresQuery], on connection: PostgresConnection, logger: Logger)
        async throws
    {
        for query in effects { try await connection.checkedQuery(query, logger: logger) }
        effects.removeAll()
    }
}

/// The optimistic attempt met a stored id or a rejection: redo the push carefully.
struct NeedsCarefulAppend: Error {}

extension PushPlan {
    /// The scope and id of each pending event.
    var pendingKeys: [EventRepository.EventKey] {
        pendingIndexes.map { EventRepository.EventKey(scope: events[$0].scope, id: events[$0].id) }
    }

    /// Marks the pending events found in `stored` as duplicates with their seqs.
    mutating func markStored(among stored: [EventRepository.EventKey: Int64]) {
        guard !stored.isEmpty else { return }
        var known: [EventID: Int64] = [:]
        for key in pendingKeys {
            if let seq = stored[key] { known[key.id] = seq }
        }
        if !known.isEmpty { markStored(known) }
    }

    /// Each scope that received accepted events, with the highest seq accepted into it.
    var acceptedHeads: [Scope: Int64] {
        var heads: [Scope: Int64] = [:]
        for index in acceptedIndexes {
            guard case .accepted(let seq) = outcomes[index] else { continue }
            heads[events[index].scope] = max(heads[events[index].scope] ?? 0, seq)
        }
        return heads
    }
}
