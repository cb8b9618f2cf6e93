import Foundation
import Logging
import PostgresNIO
import Prometheus
import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Synchronization
import Testing

@testable import SyncServer

/// A push in one statement (`OneStatementAppend`, `sync_append`) on real PostgreSQL: what it appends is what the
/// transaction of steps appends, event for event, head for head, checksum for checksum; what it cannot decide
/// alone (a stored id, a stale version, a replica behind a purge, a rule that reads the database) is refused
/// whole and decided by the steps.
@Suite struct OneStatementAppendTests {
    /// A rule that decides from the events alone: it rejects `order.bad`.
    struct PureRule: EventRule {
        static let message = "a bad order"
        var name: String { "pure" }
        func applies(to type: String) -> Bool { type.hasPrefix("order.") }
        func evaluate(_ events: [Event], connection: PostgresConnection, logger: Logger) async throws -> RuleDecision {
            RuleDecision(rejections: rejectionsFromEventsAlone(events)!, effects: { _ in [] })
        }
        func rejectionsFromEventsAlone(_ events: [Event]) -> [Int: EventRejection]? {
            var rejections: [Int: EventRejection] = [:]
            for (index, event) in events.enumerated() where event.type == "order.bad" {
                rejections[index] = EventRejection(.validationFailed, Self.message)
            }
            return rejections
        }
    }

    /// A rule that reads the database and also decides inside the one statement (`EventRule.appendFunction`): at
    /// most `limit` `limit.used` events per scope.
    struct LimitRule: EventRule {
        static let limit: Int64 = 12
        static let message = "past the limit"
        var name: String { "limit" }
        var migrations: [Migration] {
            [
                Migration(
                    id: "limit-rule-0001",
                    statements: [
                        "CREATE TABLE limit_counts (scope text PRIMARY KEY, n bigint NOT NULL)",
                        """
                        CREATE FUNCTION limit_append(p_scope text[], p_stream text[], p_type text[], p_limit text)
                        RETURNS void LANGUAGE plpgsql AS $$
                        DECLARE
                            at int;
                            now_n int8;
                        BEGIN
                            FOR at IN 1 .. coalesce(array_length(p_type, 1), 0) LOOP
                                CONTINUE WHEN p_type[at] <> 'limit.used';
                                INSERT INTO limit_counts (scope, n) VALUES (p_scope[at], 1)
                                ON CONFLICT (scope) DO UPDATE SET n = limit_counts.n + 1 RETURNING n INTO now_n;
                                IF now_n > p_limit::int8 THEN
                                    RAISE EXCEPTION 'past the limit' USING ERRCODE = 'SY003';
                                END IF;
                            END LOOP;
                        END
                        $$
                        """,
                    ])
            ]
        }
        func applies(to type: String) -> Bool { type == "limit.used" }
        func evaluate(_ events: [Event], connection: PostgresConnection, logger: Logger) async throws -> RuleDecision {
            var counts: [String: Int64] = [:]
            let scopes = Array(Set(events.map(\.scope.name)))
            let rows = try await connection.checkedQuery(
                "SELECT scope, n FROM limit_counts WHERE scope = ANY(\(scopes))", logger: logger)
            for try await (scope, n) in rows.decode((String, Int64).self) { counts[scope] = n }
            var rejections: [Int: EventRejection] = [:]
            for (index, event) in events.enumerated() {
                if counts[event.scope.name, default: 0] >= Self.limit {
                    rejections[index] = EventRejection(.validationFailed, Self.message)
                } else {
                    counts[event.scope.name, default: 0] += 1
                }
            }
            return RuleDecision(rejections: rejections) { accepted in
                Dictionary(grouping: accepted, by: \.scope).map { scope, events in
                    let n = Int64(events.count)
                    return """
                        INSERT INTO limit_counts (scope, n) VALUES (\(scope.name), \(n))
                        ON CONFLICT (scope) DO UPDATE SET n = limit_counts.n + EXCLUDED.n
                        """
                }
            }
        }
        var appendFunction: AppendFunction? { AppendFunction(name: "limit_append", argument: String(Self.limit)) }
    }

    static let alice = ReplicaID(high: 0xA1, low: 1)
    static let bob = ReplicaID(high: 0xB0, low: 2)
    static let carol = ReplicaID(high: 0xC0, low: 3)

    /// A push service with `TestRule` and `PureRule` (`GroupCommitTests.withService`).
    static func withService(
        oneStatement: Bool = true,
        _ body: @Sendable (PushService, TestDatabase, PrometheusCollectorRegistry) async throws -> Void
    ) async throws {
        try await GroupCommitTests.withService(
            rules: [TestRule(), PureRule(), LimitRule()], oneStatement: oneStatement, body)
    }

    /// A prepared push whose replica's sighting is due in each of its scopes, as `PushService.push` makes it.
    static func pending(_ service: PushService, _ events: [Event], replica: ReplicaID = alice) throws
        -> PushService.PendingPush
    {
        var push = try service.prepare(
            events, replica: replica, scopes: Set(events.map(\.scope)), logger: TestDatabase.logger)
        push.sighted = push.plan.pendingScopes
        return push
    }

    static func metric(_ registry: PrometheusCollectorRegistry, _ name: String) -> Int {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        for line in String(decoding: buffer, as: UTF8.self).split(separator: "\n") where line.hasPrefix(name + " ") {
            return Int(Double(line.split(separator: " ").last!) ?? 0)
        }
        return 0
    }

    static let appended = #"sync_push_one_statement_total{outcome="appended"}"#
    static let refused = #"sync_push_one_statement_total{outcome="refused"}"#

    /// Runs `groups` of pushes (each group one `append(group:)`) on a fresh database.
    static func run(_ groups: [[([Event], ReplicaID)]], oneStatement: Bool) async throws -> (
        results: [[PushResult]], contents: [String], appended: Int, refused: Int
    ) {
        let outcome = Mutex<([[PushResult]], [String], Int, Int)>(([], [], 0, 0))
        try await withService(oneStatement: oneStatement) { service, database, registry in
            var results: [[PushResult]] = []
            for group in groups {
                let pushes = try group.map { try Self.pending(service, $0.0, replica: $0.1) }
                for answer in await service.append(group: pushes) { results.append(try answer.get().results) }
            }
            let contents =
                try await GroupCommitTests.contents(database)
                + database.integers("SELECT n FROM limit_counts ORDER BY scope").map { "limit \($0)" }
            outcome.withLock {
                $0 = (results, contents, Self.metric(registry, Self.appended), Self.metric(registry, Self.refused))
            }
        }
        return outcome.withLock { $0 }
    }

    /// The oracle: 300 random pushes in random groups, with what the one statement must refuse mixed in (retried
    /// events, stale and repeated versions, rejections by a rule from the events alone and by one that reads the
    /// database, ids repeated within a push and across a group), give the same answers and leave the same rows
    /// as the transaction of steps alone.
    @Test func oneStatementAppendsWhatTheStepsAppend() async throws {
        var random = SplitMix64(seed: 0x5EED_0001)
        let scopes: [Scope] = ["o1", "o2", "o3"]
        let streams = (0..<2).map { "order:\($0)" }
        var versions: [String: Int64] = [:]
        var sent: [Event] = []
        var groups: [[([Event], ReplicaID)]] = []
        while groups.map(\.count).reduce(0, +) < 300 {
            var group: [([Event], ReplicaID)] = []
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                var events: [Event] = []
                let replica = Bool.random(using: &random) ? Self.alice : Self.bob
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    let scope = scopes.randomElement(using: &random)!
                    let roll = Int.random(in: 0..<100, using: &random)
                    let event: Event
                    if roll < 8, let old = sent.randomElement(using: &random) {
                        event = old  // a retry
                    } else if roll < 45 {
                        let stream = streams.randomElement(using: &random)!
                        let key = "\(scope.name) \(stream)"
                        // Mostly the next version; sometimes stale, sometimes a jump.
                        let next = (versions[key] ?? 0) + Int64([1, 1, 1, 1, 0, -1, 3].randomElement(using: &random)!)
                        versions[key] = max(versions[key] ?? 0, next)
                        event = EventFixtures.event(
                            scope: scope, stream: stream, version: max(1, next), type: "order.placed", replica: replica)
                    } else if roll < 50 {
                        event = EventFixtures.event(scope: scope, type: "order.bad", replica: replica)
                    } else if roll < 56 {
                        event = EventFixtures.event(scope: scope, type: "doc.counted", replica: replica)
                    } else if roll < 61 {
                        event = EventFixtures.event(
                            scope: scope, stream: EventFixtures.stream(), type: "limit.used", replica: replica)
                    } else {
                        event = EventFixtures.event(
                            scope: scope, stream: EventFixtures.stream(), type: "doc.edited",
                            payload: .object(["n": .int(Int64(roll))]), replica: replica)
                    }
                    events.append(event)
                    if Int.random(in: 0..<40, using: &random) == 0 { events.append(event) }  // twice in one push
                }
                sent += events
                group.append((events, replica))
            }
            groups.append(group)
        }

        let fast = try await Self.run(groups, oneStatement: true)
        let steps = try await Self.run(groups, oneStatement: false)
        #expect(fast.results == steps.results)
        #expect(fast.contents == steps.contents)
        #expect(steps.appended == 0 && steps.refused == 0)
        // Both paths ran: many groups in one statement, some refused by the database, others never tried.
        #expect(fast.appended > groups.count / 6, "appended \(fast.appended) of \(groups.count) groups")
        #expect(fast.refused > 0, "refused \(fast.refused)")
        #expect(fast.appended + fast.refused < groups.count, "some groups needed the steps from the start")
    }

    /// What only the database can tell, each refused whole: a retried id is a duplicate with its seq and the new
    /// event beside it is appended without a gap by a second call (what the first inserted before it met the
    /// stored id was undone); decided by the steps, a stale version is `conflict.version` with the current one,
    /// and a replica behind a purge must reset.
    @Test func whatTheStatementCannotDecideIsDecidedByTheSteps() async throws {
        try await Self.withService { service, database, registry in
            let first = EventFixtures.event(scope: "r", stream: "order:1", version: 1, type: "order.placed")
            #expect(
                try await service.append(group: [Self.pending(service, [first])])[0].get().results == [
                    .accepted(first.id, seq: 1)
                ])
            #expect(Self.metric(registry, Self.appended) == 1)

            let edited = EventFixtures.event(scope: "r")
            #expect(
                try await service.append(group: [Self.pending(service, [edited])])[0].get().results == [
                    .accepted(edited.id, seq: 2)
                ])
            // The call inserts `fresh` at seq 3, meets `edited` stored, and undoes it all; a lookup finds `edited`,
            // and a second call appends `fresh`.
            let fresh = EventFixtures.event(scope: "r")
            let retried = try await service.append(group: [Self.pending(service, [fresh, edited])])[0].get().results
            #expect(retried == [.accepted(fresh.id, seq: 3), .duplicate(edited.id, seq: 2)])
            #expect(Self.metric(registry, Self.appended) == 3 && Self.metric(registry, Self.refused) == 1)

            let stale = EventFixtures.event(scope: "r", stream: "order:1", version: 1, type: "order.placed")
            let results = try await service.append(group: [Self.pending(service, [stale])])[0].get().results
            #expect(results[0].code == .conflictVersion && results[0].currentVersion == 1)
            #expect(Self.metric(registry, Self.refused) == 2)

            // Compaction purged below seq 2. Bob has acknowledged nothing in the scope: he passes.
            try await database.execute("UPDATE scopes SET retained_from_seq = 2 WHERE scope = 'r'")
            let bobs = EventFixtures.event(scope: "r", replica: Self.bob)
            let bobsResults = try await service.append(group: [Self.pending(service, [bobs], replica: Self.bob)])[0]
                .get().results
            #expect(bobsResults == [.accepted(bobs.id, seq: 4)])
            #expect(Self.metric(registry, Self.appended) == 4)
            // Now he has read seq 1 of a history purged below seq 4: he must reset.
            try await database.execute("UPDATE scopes SET retained_from_seq = 4 WHERE scope = 'r'")
            try await database.execute(
                "UPDATE replica_progress SET acknowledged_seq = 1 WHERE replica = \(Self.bob.description)")
            let behind = EventFixtures.event(scope: "r", replica: Self.bob)
            let answer = await service.append(group: [try Self.pending(service, [behind], replica: Self.bob)])[0]
            #expect(throws: SyncProtocolError.self) { try answer.get() }
            if case .failure(let error as SyncProtocolError) = answer { #expect(error.code == .resetRequired) }
            #expect(Self.metric(registry, Self.refused) == 3)

            #expect(
                try await database.integers("SELECT seq FROM events WHERE scope = 'r' ORDER BY seq") == [1, 2, 3, 4])
            #expect(
                try await database.integers(
                    "SELECT ((SELECT sum(checksum) FROM events WHERE scope = 'r') - checksum)::int8 FROM scopes WHERE scope = 'r'"
                )
                    == [0])
            #expect(
                try await database.integers("SELECT version FROM streams WHERE scope = 'r' AND stream = 'order:1'")
                    == [1])
        }
    }

    static let transactions = #"sync_push_transactions_total{node="database"}"#

    /// A retry costs a lookup and calls, never the transaction of steps: pushes whose events are all stored
    /// (the answer to the first was lost) are answered with their seqs and record their replicas' sightings,
    /// and one of a group that repeats a stored id leaves the others appended by the second call. A replica
    /// behind a purge is refused even when all it sent is stored, as the steps refuse it.
    @Test func aRetryIsLookedUpAndCalledAgainWithoutTheSteps() async throws {
        try await Self.withService { service, database, registry in
            let first = EventFixtures.event(scope: "t")
            let second = EventFixtures.event(scope: "t", stream: "order:1", version: 1, type: "order.placed")
            _ = try await service.append(group: [Self.pending(service, [first, second])])[0].get()
            #expect(Self.metric(registry, Self.transactions) == 1)

            // Bob sends Alice's events again (as a relay would): all stored, his sighting recorded.
            let again = try await service.append(group: [Self.pending(service, [second, first], replica: Self.bob)])
            #expect(try again[0].get().results == [.duplicate(second.id, seq: 2), .duplicate(first.id, seq: 1)])
            #expect(Self.metric(registry, Self.refused) == 1 && Self.metric(registry, Self.appended) == 1)
            #expect(
                try await database.integers(
                    "SELECT count(*) FROM replica_progress WHERE replica = \(Self.bob.description) AND scope = 't'")
                    == [1])

            // A group of three, the second (Carol's) repeating a stored id beside a new event of another scope.
            let a = EventFixtures.event(scope: "t")
            let b = EventFixtures.event(scope: "u", replica: Self.carol)
            let c = EventFixtures.event(scope: "t")
            let group = try await service.append(group: [
                Self.pending(service, [a]), Self.pending(service, [first, b], replica: Self.carol),
                Self.pending(service, [c]),
            ])
            #expect(
                try group.map { try $0.get().results } == [
                    [.accepted(a.id, seq: 3)], [.duplicate(first.id, seq: 1), .accepted(b.id, seq: 1)],
                    [.accepted(c.id, seq: 4)],
                ])
            #expect(Self.metric(registry, Self.refused) == 2 && Self.metric(registry, Self.appended) == 2)
            // Two refused calls and two that appended: no transaction of steps.
            #expect(Self.metric(registry, Self.transactions) == 4)
            #expect(
                try await database.integers("SELECT seq FROM events WHERE scope = 't' ORDER BY seq") == [1, 2, 3, 4])
            // Carol was seen in both scopes, also in the one where all she sent was stored.
            #expect(
                try await database.strings(
                    "SELECT scope FROM replica_progress WHERE replica = \(Self.carol.description) ORDER BY scope")
                    == ["t", "u"])

            // Bob read seq 1 of a history now purged below seq 4: even his retry must reset.
            try await database.execute("UPDATE scopes SET retained_from_seq = 4 WHERE scope = 't'")
            try await database.execute(
                "UPDATE replica_progress SET acknowledged_seq = 1 WHERE replica = \(Self.bob.description)")
            let answer = await service.append(group: [try Self.pending(service, [first], replica: Self.bob)])[0]
            if case .failure(let error as SyncProtocolError) = answer {
                #expect(error.code == .resetRequired)
            } else {
                Issue.record("a replica behind a purge got \(answer)")
            }
        }
    }

    /// A rule that reads the database and has an append function decides in the one statement: up to its limit
    /// the pushes are appended by the call, which also records the rule's count; past it, the call is refused
    /// whole and the steps reject the event with the rule's message, leaving the count as it was.
    @Test func aRuleWithAnAppendFunctionDecidesInTheStatement() async throws {
        try await Self.withService { service, database, registry in
            for seq in 1...LimitRule.limit {
                let used = EventFixtures.event(scope: "l", stream: EventFixtures.stream(), type: "limit.used")
                let results = try await service.append(group: [Self.pending(service, [used])])[0].get().results
                #expect(results == [.accepted(used.id, seq: seq)])
            }
            #expect(Self.metric(registry, Self.appended) == Int(LimitRule.limit))
            let past = EventFixtures.event(scope: "l", stream: EventFixtures.stream(), type: "limit.used")
            let edited = EventFixtures.event(scope: "l", stream: EventFixtures.stream())
            let results = try await service.append(group: [Self.pending(service, [past, edited])])[0].get().results
            #expect(results[0].code == .validationFailed && results[0].message == LimitRule.message)
            #expect(results[1] == .accepted(edited.id, seq: LimitRule.limit + 1))
            #expect(Self.metric(registry, Self.refused) == 1)
            #expect(try await database.integers("SELECT n FROM limit_counts WHERE scope = 'l'") == [LimitRule.limit])
        }
    }

    /// A push that concerns a rule reading the database, or refers to a blob, never tries the one statement.
    @Test func aRuleThatReadsTheDatabaseTakesTheSteps() async throws {
        try await Self.withService { service, database, registry in
            let counted = EventFixtures.event(scope: "c", type: "doc.counted")
            let results = try await service.append(group: [Self.pending(service, [counted])])[0].get().results
            #expect(results == [.accepted(counted.id, seq: 1)])
            #expect(Self.metric(registry, Self.appended) == 0 && Self.metric(registry, Self.refused) == 0)
            let counts = try await database.integers("SELECT n FROM test_counts WHERE scope = 'c'")
            #expect(counts == [1])
        }
    }

    /// The statement queues one notification per scope with its new head, as the steps do (`LongPollHub` wakes
    /// long-polls with it), and records the replica's sighting.
    @Test func theStatementNotifiesEachScopeAndRecordsTheSighting() async throws {
        try await Self.withService { service, database, _ in
            let notifications = try await database.connection { listener in
                try await listener.listen(on: EventRepository.channel) { notifications in
                    let events = [
                        EventFixtures.event(scope: "n1"), EventFixtures.event(scope: "n2"),
                        EventFixtures.event(scope: "n1"),
                    ]
                    _ = try await service.append(group: [Self.pending(service, events)])[0].get()
                    var payloads: [String] = []
                    for try await notification in notifications {
                        payloads.append(notification.payload)
                        if payloads.count == 2 { break }
                    }
                    return payloads.sorted()
                }
            }
            #expect(notifications == ["n1 2", "n2 1"])
            #expect(
                try await database.integers(
                    "SELECT count(*) FROM replica_progress WHERE replica = \(Self.alice.description) AND seen_at > now() - interval '1 minute'"
                ) == [2])
        }
    }
}
