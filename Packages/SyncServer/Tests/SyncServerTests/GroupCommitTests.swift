import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Prometheus
import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Synchronization
import Testing

@testable import SyncServer

/// Group commit (docs/ARCHITECTURE.md, "Group commit") on real PostgreSQL: pushes that share a transaction are
/// decided exactly as if they had run one after another in queue order, and one push's failure is its own.
@Suite struct GroupCommitTests {
    /// A rule whose evaluation fails (as a rule's query might): the push carrying `doc.fail` cannot be decided.
    struct FailingRule: EventRule {
        struct Failure: Error {}
        var name: String { "failing" }
        func applies(to type: String) -> Bool { type == "doc.fail" }
        func evaluate(_ events: [Event], connection: PostgresConnection, logger: Logger) async throws -> RuleDecision {
            throw Failure()
        }
    }

    static let alice = ReplicaID(high: 0xA1, low: 1)
    static let bob = ReplicaID(high: 0xB0, low: 2)

    /// A push service on a fresh, migrated database (no HTTP), and its metrics; with `rules` (`TestRule` and
    /// `FailingRule` by default), appending in one statement when it applies unless `oneStatement` is false.
    static func withService(
        rules: [any EventRule] = [TestRule(), FailingRule()], oneStatement: Bool = true,
        _ body: @Sendable (PushService, TestDatabase, PrometheusCollectorRegistry) async throws -> Void
    ) async throws {
        try await TestDatabase.with { database in
            try await TestServer.withClient(database) { client in
                let migrator = Migrator(
                    migrations: Migration.generic + TestRule().migrations
                        + rules.filter { !($0 is TestRule) }.flatMap(\.migrations))
                _ = try await migrator.migrate(client, logger: TestDatabase.logger)
                let registry = PrometheusCollectorRegistry()
                let metrics = ServerMetrics(factory: PrometheusMetricsFactory(registry: registry))
                let service = PushService(
                    database: Database(client: client, queueLimit: 64, acquireTimeout: .seconds(20), metrics: metrics),
                    rules: rules, limits: .standard, isCommutative: TestDomain().isCommutative,
                    hub: LongPollHub(client: client, logger: TestDatabase.logger, metrics: metrics), metrics: metrics,
                    appendsInOneStatement: oneStatement)
                try await body(service, database, registry)
            }
        }
    }

    static func pending(_ service: PushService, _ events: [Event], replica: ReplicaID = alice) throws
        -> PushService.PendingPush
    {
        try service.prepare(
            events, replica: replica, scopes: Set(events.map(\.scope)), logger: TestDatabase.logger)
    }

    /// Everything a push writes, as text: the log with checksums and payloads, heads and scope checksums, stream
    /// versions, the rule's counts, the replicas seen.
    static func contents(_ database: TestDatabase) async throws -> [String] {
        try await database.connection { connection in
            var lines: [String] = []
            for query: PostgresQuery in [
                """
                SELECT scope || ' ' || seq || ' ' || event_id || ' ' || type || ' ' || stream_version || ' '
                       || checksum || ' ' || payload::text FROM events ORDER BY scope, seq
                """,
                "SELECT scope || ' ' || head || ' ' || checksum FROM scopes ORDER BY scope",
                "SELECT scope || ' ' || stream || ' ' || version FROM streams ORDER BY scope, stream",
                "SELECT scope || ' ' || n FROM test_counts ORDER BY scope",
                "SELECT replica || ' ' || scope || ' ' || acknowledged_seq FROM replica_progress ORDER BY 1",
            ] {
                for try await line in try await connection.query(query, logger: TestDatabase.logger).decode(String.self)
                {
                    lines.append(line)
                }
            }
            return lines
        }
    }

    static func metric(_ registry: PrometheusCollectorRegistry, _ line: String) -> Bool {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self).contains(line)
    }

    /// A group's outcome, pushes and database alike, is what the same pushes get one after another: ids stored
    /// by an earlier push of the group are duplicates with its seq, stream versions moved by an earlier push
    /// make a later one stale, a rule's rejection stays in its push, the rule's effects add up, seqs follow
    /// queue order with no gaps.
    @Test func aGroupIsDecidedAsItsPushesOneAfterAnother() async throws {
        let order = "order:1"
        let first = EventFixtures.event(scope: "g1", stream: order, version: 1, type: "order.placed")
        let counted = EventFixtures.event(scope: "g1", stream: EventFixtures.stream(), type: "doc.counted")
        let stale = EventFixtures.event(scope: "g1", stream: order, version: 1, type: "order.paid", replica: Self.bob)
        let next = EventFixtures.event(scope: "g1", stream: order, version: 2, type: "order.paid", replica: Self.bob)
        let other = EventFixtures.event(scope: "g2", type: "doc.counted", replica: Self.bob)
        let rejected = EventFixtures.event(scope: "g1", type: "doc.rejected")
        let lone = EventFixtures.event(scope: "g2")
        let batches: [[Event]] = [
            [first, counted],
            // `counted` again (a retry racing the first push), a stale version, then other scopes' events.
            [counted, stale, other],
            [rejected, next, lone],
            [EventFixtures.event(scope: "g1", type: "doc.counted"), other],
        ]
        let replicas = [Self.alice, Self.bob, Self.alice, Self.bob]

        let grouped = try await Self.decide(batches, replicas: replicas, together: true)
        let alone = try await Self.decide(batches, replicas: replicas, together: false)
        #expect(grouped.results == alone.results)
        #expect(grouped.contents == alone.contents)
        #expect(grouped.groupCommitted, "the four pushes shared one transaction")

        // And what that is, spelled out.
        let results = grouped.results
        #expect(results[0] == [.accepted(first.id, seq: 1), .accepted(counted.id, seq: 2)])
        #expect(results[1][0] == .duplicate(counted.id, seq: 2))
        #expect(results[1][1].code == .conflictVersion && results[1][1].currentVersion == 1)
        #expect(results[1][2] == .accepted(other.id, seq: 1))
        #expect(results[2][0].code == .validationFailed && results[2][0].message == TestRule.rejectedMessage)
        #expect(results[2][1] == .accepted(next.id, seq: 3))
        #expect(results[2][2] == .accepted(lone.id, seq: 2))
        #expect(results[3][0].status == .accepted && results[3][0].seq == 4)
        #expect(results[3][1] == .duplicate(other.id, seq: 1))
        #expect(
            grouped.contents.contains("g1 2") && grouped.contents.contains("g2 1"), "test_counts: \(grouped.contents)")
    }

    /// Runs `batches` on a fresh database, as one group or one after another.
    static func decide(_ batches: [[Event]], replicas: [ReplicaID], together: Bool) async throws -> (
        results: [[PushResult]], contents: [String], groupCommitted: Bool
    ) {
        let outcome = Mutex<([[PushResult]], [String], Bool)>(([], [], false))
        try await withService { service, database, registry in
            let pushes = try zip(batches, replicas).map { try Self.pending(service, $0, replica: $1) }
            var answers: [Result<PushPlan, any Error>] = []
            if together {
                answers = await service.append(group: pushes)
            } else {
                for push in pushes { answers += await service.append(group: [push]) }
            }
            let results = try answers.map { try $0.get().results }
            let contents = try await Self.contents(database)
            let committed = Self.metric(registry, #"sync_push_groups_total{outcome="committed"} 1"#)
            outcome.withLock { $0 = (results, contents, committed) }
        }
        return outcome.withLock { $0 }
    }

    /// A push whose transaction cannot succeed (a rule fails; the replica must reset first) fails alone: the
    /// group runs again one push at a time, and the others are accepted in queue order, gap-free.
    @Test func aPushThatMustFailDoesNotFailItsGroup() async throws {
        try await Self.withService { service, database, registry in
            let history = (0..<5).map { _ in EventFixtures.event(scope: "f") }
            _ = try await service.append(group: [try Self.pending(service, history)])[0].get()
            // Compaction purged up to seq 3; bob last read seq 1, before that: his pushes must reset.
            try await database.execute("UPDATE scopes SET retained_from_seq = 4 WHERE scope = 'f'")
            try await database.execute(
                """
                INSERT INTO replica_progress (replica, scope, acknowledged_seq, seen_at, based_on_retained)
                VALUES (\(Self.bob.description), 'f', 1, now(), 0)
                """)
            let ok1 = EventFixtures.event(scope: "f")
            let failing = [EventFixtures.event(scope: "f"), EventFixtures.event(scope: "f", type: "doc.fail")]
            let ok2 = EventFixtures.event(scope: "f", type: "doc.counted")
            let behind = EventFixtures.event(scope: "f", replica: Self.bob)
            let ok3 = EventFixtures.event(scope: "f")
            let answers = await service.append(group: [
                try Self.pending(service, [ok1]), try Self.pending(service, failing), try Self.pending(service, [ok2]),
                try Self.pending(service, [behind], replica: Self.bob), try Self.pending(service, [ok3]),
            ])
            #expect(try answers[0].get().results == [.accepted(ok1.id, seq: 6)])
            #expect(throws: FailingRule.Failure.self) { try answers[1].get() }
            #expect(try answers[2].get().results == [.accepted(ok2.id, seq: 7)])
            #expect(throws: SyncProtocolError.self) { try answers[3].get() }
            if case .failure(let error as SyncProtocolError) = answers[3] { #expect(error.code == .resetRequired) }
            #expect(try answers[4].get().results == [.accepted(ok3.id, seq: 8)])
            #expect(
                try await database.integers("SELECT seq FROM events WHERE scope = 'f' ORDER BY seq") == Array(1...8))
            #expect(try await database.integers("SELECT n FROM test_counts WHERE scope = 'f'") == [1])
            #expect(Self.metric(registry, #"sync_push_groups_total{outcome="split"} 1"#))
        }
    }

    /// Many one-event pushes in flight to few scopes, through HTTP, on one lane (so they queue and share
    /// transactions), some of them the same event pushed twice at once: every scope's seqs run 1…n with no gap,
    /// every event is stored once, and the two pushes of one event are both answered with its seq. Both with each
    /// connection served on its own event loop (`requestsOnTheirLoops`, where a group's pushes come in on
    /// different loops and are answered from the one that ran the group) and on the concurrency pool.
    @Test(arguments: [false, true]) func concurrentOneEventPushesStayGapFreeAndIdempotent(onTheirLoops: Bool)
        async throws
    {
        try await TestServer.run(
            live: true,
            configure: {
                $0.pushGroupLanes = 1
                $0.databasePoolSize = 4
                $0.requestsOnTheirLoops = onTheirLoops
            }
        ) { server in
            let scopes = ["c0", "c1", "c2"]
            let token = try await server.token(scopes)
            let events = (0..<240).map { index in
                EventFixtures.event(
                    scope: try! Scope(scopes[index % scopes.count]),
                    replica: ReplicaID(high: UInt64(index % 7 + 1), low: 9))
            }
            // Every fifth event is pushed twice, by two pushes side by side in the order, so in flight together.
            let pushes = events.enumerated().flatMap { $0.offset % 5 == 0 ? [$0.element, $0.element] : [$0.element] }
            // 32 pushes in flight at a time, each on its own connection: none waits in the client's queue
            // (where, on a loaded machine, the wait for a free connection outlasted the client's timeout).
            let inFlight = 32
            let http = HTTPClient(
                eventLoopGroupProvider: .singleton,
                configuration: .init(
                    connectionPool: .init(
                        idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: inFlight)))
            let base = "http://127.0.0.1:\(server.client.port!)"
            let answers: [(Event, PushResult)]
            do {
                answers = try await withThrowingTaskGroup(of: (Event, PushResult).self) { group in
                    func push(_ event: Event) {
                        group.addTask {
                            var request = HTTPClientRequest(url: base + "/v1/push")
                            request.method = .POST
                            request.headers.add(name: "Authorization", value: "Bearer \(token)")
                            request.headers.add(name: "Content-Type", value: "application/json")
                            request.body = .bytes(
                                ByteBuffer(
                                    data: try WireCodec().encode(
                                        PushRequest(replica: event.dot.replica, events: [event]))))
                            let response = try await http.execute(request, timeout: .seconds(60))
                            let body = try await response.body.collect(upTo: 1 << 20)
                            guard response.status == .ok else {
                                throw TestServerError("push answered \(response.status): \(String(buffer: body))")
                            }
                            return (
                                event, try WireCodec().decode(PushResponse.self, from: Data(buffer: body)).results[0]
                            )
                        }
                    }
                    var next = 0
                    while next < min(inFlight, pushes.count) {
                        push(pushes[next])
                        next += 1
                    }
                    var answers: [(Event, PushResult)] = []
                    for try await answer in group {
                        answers.append(answer)
                        if next < pushes.count {
                            push(pushes[next])
                            next += 1
                        }
                    }
                    return answers
                }
                try await http.shutdown()
            } catch {
                try? await http.shutdown()
                throw error
            }

            for scope in scopes {
                let seqs = try await server.database.integers(
                    "SELECT seq FROM events WHERE scope = \(scope) ORDER BY seq")
                #expect(seqs == Array(1...Int64(events.count / scopes.count)), "scope \(scope) is gap-free")
            }
            #expect(try await server.database.integers("SELECT count(DISTINCT event_id) FROM events") == [240])
            // Every answer carries the seq the event is stored at; of each event's answers exactly one accepted it.
            var stored: [EventID: Int64] = [:]
            try await server.database.connection { connection in
                let rows = try await connection.query("SELECT event_id, seq FROM events", logger: TestDatabase.logger)
                for try await (id, seq) in rows.decode((UUID, Int64).self) { stored[EventID(uuid: id)] = seq }
            }
            var accepted: [EventID: Int] = [:]
            for (event, result) in answers {
                #expect(result.id == event.id)
                #expect(result.seq == stored[event.id], "\(result)")
                #expect(result.status == .accepted || result.status == .duplicate)
                if result.status == .accepted { accepted[event.id, default: 0] += 1 }
            }
            #expect(accepted.count == 240 && accepted.values.allSatisfy { $0 == 1 })
            let metrics = try await server.send(.get, "/metrics")
            #expect(
                String(buffer: metrics.body).contains(#"sync_push_groups_total{outcome="committed"}"#),
                "pushes shared transactions")
        }
    }
}
