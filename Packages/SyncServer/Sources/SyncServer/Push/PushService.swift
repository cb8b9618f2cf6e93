import Foundation
import Logging
import PostgresNIO
import SyncModels
import SyncProtocol

/// Appends pushed events (docs/ARCHITECTURE.md, "Ordering"): one transaction per push that locks the head rows of the
/// scopes involved in sorted order, sets aside stored ids as duplicates (with their original seq), checks stream
/// versions, runs the domain rules, assigns `head+1…head+n`, and writes everything with one statement.
/// Later pushes to the same scopes wait for the lock, so seq order is commit order and has no gaps.
struct PushService: Sendable {
    let database: Database
    let repository = EventRepository()
    let rules: [any EventRule]
    let limits: ProtocolLimits
    /// Whether events of a type are CRDT operations that skip the stream-version check (`SyncDomain`).
    let isCommutative: @Sendable (String) -> Bool
    let hub: LongPollHub
    let metrics: ServerMetrics
    let sightings = ReplicaSightings()

    /// How often a push is retried after a deadlock, serialization failure or id race before giving up.
    static let maxAttempts = 5

    /// Appends `events` for `identity`, returning one result per event in request order.
    /// - Throws: `SyncProtocolError` `request.tooLarge` for too many events or an oversized payload,
    ///   `server.unavailable` when the database cannot serve.
    func push(_ events: [Event], replica: ReplicaID, identity: TokenIdentity, logger: Logger) async throws
        -> [PushResult]
    {
        guard events.count <= limits.maxEventsPerPush else {
            throw SyncProtocolError.tooLarge("a push carries at most \(limits.maxEventsPerPush) events")
        }
        var plan = PushPlan(events: events, allowedScopes: identity.scopes)
        var payloads: [Int: String] = [:]
        for index in plan.pendingIndexes {
            do {
                payloads[index] = try PayloadEncoder.encode(events[index].payload, maxBytes: limits.maxPayloadBytes)
            } catch .tooLarge {
                throw SyncProtocolError.tooLarge(
                    "the payload of events[\(index)] is larger than \(limits.maxPayloadBytes) bytes")
            } catch {
                plan.reject(index, EventRejection(.eventInvalid, "payload strings must not contain U+0000"))
            }
        }
        if !plan.pendingIndexes.isEmpty {
            plan = try await append(plan, payloads: payloads, replica: replica, logger: logger)
            hub.signal(heads: plan.acceptedHeads)
        }
        let results = plan.results
        metrics.recordPush(results)
        return results
    }

    /// Runs the push transaction, first optimistically, then carefully if needed, retrying deadlocks and
    /// serialization failures.
    ///
    /// The optimistic attempt skips looking up which ids are already stored: retries are rare, and the
    /// insert's `ON CONFLICT (scope, event_id) DO NOTHING` count tells whether any was. If one was, or if any event
    /// was rejected (a retried event could look like a stale version or a second creation before it is
    /// recognised as a duplicate), the attempt is rolled back and the careful attempt looks them up first.
    private func append(_ plan: PushPlan, payloads: [Int: String], replica: ReplicaID, logger: Logger)
        async throws -> PushPlan
    {
        var attempt = 1
        var careful = false
        while true {
            do {
                let decided = try await database.withConnection { [self, careful] connection in
                    try await connection.transaction(logger: logger) { connection in
                        try await self.decide(
                            plan, payloads: payloads, replica: replica, careful: careful, on: connection,
                            logger: logger)
                    }
                }
                try await recordSighting(of: replica, in: decided.acceptedScopes, logger: logger)
                return decided
            } catch  where Self.needsCareful(error) && !careful {
                careful = true
            } catch  where Database.isRetryable(error) && attempt < Self.maxAttempts {
                attempt += 1
                logger.debug("push retried", metadata: ["sync.push.attempt": "\(attempt)"])
            } catch {
                throw Database.classify(error)
            }
        }
    }

    /// Marks `replica` as active in `scopes` (for compaction's stable point), at most once a minute per
    /// replica and scope, outside the push transaction.
    private func recordSighting(of replica: ReplicaID, in scopes: [Scope], logger: Logger) async throws {
        let due = sightings.due(replica: replica, scopes: scopes)
        guard !due.isEmpty else { return }
        try await database.withConnection { [repository] connection in
            try await repository.recordProgress(
                replica: replica, positions: Dictionary(uniqueKeysWithValues: due.map { ($0, 0) }), on: connection,
                logger: logger)
        }
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

    static func needsCareful(_ error: any Error) -> Bool {
        error is NeedsCarefulAppend
    }

    /// The body of the push transaction.
    private func decide(
        _ plan: PushPlan, payloads: [Int: String], replica: ReplicaID, careful: Bool, on connection: PostgresConnection,
        logger: Logger
    ) async throws -> PushPlan {
        var plan = plan
        let heads = try await repository.lockScopes(plan.pendingScopes, on: connection, logger: logger)
        try await refuseIfBehindPurge(replica, heads: heads, on: connection, logger: logger)
        let candidates = plan.pendingIndexes.count
        if careful {
            let keys = plan.pendingIndexes.map { (scope: plan.events[$0].scope, id: plan.events[$0].id) }
            plan.markStored(try await repository.storedSeqs(keys, on: connection, logger: logger))
        }

        let checked = plan.versionCheckedStreams(isCommutative: isCommutative)
        let current = try await repository.streamVersions(checked, on: connection, logger: logger)
        let newVersions = plan.checkVersions(current: current, isCommutative: isCommutative)

        var decisions: [([Int], RuleDecision)] = []
        for rule in rules {
            let indexes = plan.pendingIndexes.filter { rule.applies(to: plan.events[$0].type) }
            guard !indexes.isEmpty else { continue }
            let decision = try await rule.evaluate(
                indexes.map { plan.events[$0] }, connection: connection, logger: logger)
            for (position, rejection) in decision.rejections { plan.reject(indexes[position], rejection) }
            decisions.append((indexes, decision))
        }

        let rejectedStreams = Set(
            plan.events.indices.compactMap { index -> PushPlan.StreamKey? in
                guard case .rejected = plan.outcomes[index] else { return nil }
                return PushPlan.StreamKey(scope: plan.events[index].scope, stream: plan.events[index].stream)
            })
        if !careful && plan.pendingIndexes.count < candidates { throw NeedsCarefulAppend() }
        let newHeads = plan.assignSeqs(heads: heads.mapValues(\.head))
        let accepted = plan.acceptedIndexes
        guard !accepted.isEmpty else { return plan }

        // Versions of streams whose events were all accepted; recomputed if a rule rejected one of them.
        var versions = newVersions
        for key in newVersions.keys where rejectedStreams.contains(key) {
            versions[key] =
                accepted.filter {
                    plan.events[$0].scope == key.scope && plan.events[$0].stream == key.stream
                        && !isCommutative(plan.events[$0].type)
                }.map { plan.events[$0].streamVersion }.max()
        }

        let rows = accepted.map { index -> EventRepository.NewEvent in
            guard case .accepted(let seq) = plan.outcomes[index] else { preconditionFailure("accepted without seq") }
            return EventRepository.NewEvent(event: plan.events[index], seq: seq, payloadJSON: payloads[index]!)
        }
        let inserted = try await repository.write(
            rows, heads: newHeads, streams: versions, on: connection, logger: logger)
        guard inserted == rows.count else { throw careful ? AppendRace() : NeedsCarefulAppend() }

        let acceptedSet = Set(accepted)
        for (indexes, decision) in decisions {
            let kept = indexes.filter { acceptedSet.contains($0) }.map { plan.events[$0] }
            for query in decision.effects(kept) {
                try await connection.checkedQuery(query, logger: logger)
            }
        }
        return plan
    }
}

/// The optimistic attempt met a stored id or a rejection: redo the push carefully.
struct NeedsCarefulAppend: Error {}

extension PushPlan {
    /// The scopes that received accepted events.
    var acceptedScopes: [Scope] {
        Array(Set(acceptedIndexes.map { events[$0].scope })).sorted()
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
