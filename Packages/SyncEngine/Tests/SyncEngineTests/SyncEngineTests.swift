import Foundation
import SyncEngineTesting
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import SyncProtocol
import Testing

@testable import SyncEngine

@Suite struct SyncEngineTests {
    struct Replica {
        let store: EventStore
        let transport: InMemoryTransport
        let engine: SyncEngine
    }

    static func replica(_ directory: TemporaryDirectory, _ name: String, server: InMemorySyncServer) throws -> Replica {
        let store = try EventStore(path: directory.path("\(name).sqlite"), projections: [TitleProjection()])
        let transport = InMemoryTransport(server: server)
        var configuration = SyncEngine.Configuration()
        configuration.pageSize = 7  // small pages exercise paging
        configuration.batch = PushBatchPolicy(maxEvents: 5)
        return Replica(
            store: store, transport: transport,
            engine: try SyncEngine(store: store, transport: transport, configuration: configuration))
    }

    /// Waits until `condition` holds, or two minutes have gone by: a bound against a hang, not a measure (a
    /// loaded machine can take seconds for what takes milliseconds alone). The caller's expectations then say
    /// what did not happen.
    static func until(_ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while try await !condition(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
    }

    @Test func twoReplicasConvergeThroughTheServer() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let a = try Self.replica(directory, "a", server: server)
        let b = try Self.replica(directory, "b", server: server)
        try await a.store.append((0..<12).map { title("note:\($0 % 4)", "a\($0)") })
        try await b.store.append((0..<9).map { tag("note:\($0 % 4)", "b\($0)") })
        try await a.engine.syncNow()
        try await b.engine.syncNow()
        try await a.engine.syncNow()
        #expect(try await TitleProjection.dump(a.store) == TitleProjection.dump(b.store))
        #expect(try await a.store.counts() == [.pending: 0, .confirmed: 21, .rejected: 0])
        #expect(try await b.store.counts() == [.pending: 0, .confirmed: 21, .rejected: 0])
        #expect(await server.events(in: "team-1").map(\.seq) == (1...21).map { Int64($0) })
        let status = a.engine.status
        #expect(status.pending == 0 && status.lastSuccess != nil && status.traffic.sentRaw > 0)
        let kinds = try await a.engine.journal.entries().map(\.kind)
        #expect(kinds.contains("push.ok") && kinds.contains("pull.ok") && kinds.first == "start")
    }

    /// Told to reset, the engine drops what the server sent, pulls it all again without pushing, re-bases its
    /// pending events and pushes them; an engine started on the store between the reset and the end of the
    /// bootstrap carries on from where it was, still without pushing first.
    @Test func aResetBootstrapsWithoutPushingThenRebasesAndSurvivesARestart() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let a = try Self.replica(directory, "a", server: server)
        let b = try Self.replica(directory, "b", server: server)
        try await b.store.append((0..<10).map { title("note:\($0 % 3)", "b\($0)") })
        try await b.engine.syncNow()
        try await a.engine.syncNow()
        try await a.store.append((0..<3).map { title("note:\($0)", "offline \($0)") })
        // The reset, then the bootstrap's first request is lost.
        a.transport.inject([.resetRequired, .dropRequest])
        await #expect(throws: SyncFailure.self) { try await a.engine.syncNow() }
        #expect(try await a.store.isBootstrapping())
        #expect(try await a.store.counts() == [.pending: 3, .confirmed: 0, .rejected: 0], "the server's part dropped")
        #expect(try await a.store.cursor() == nil)
        #expect(await server.events(in: "team-1").count == 10, "nothing pushed")
        // A new engine on the same store: it pulls first, re-bases, then pushes.
        let restarted = try SyncEngine(store: a.store, transport: a.transport, configuration: a.engine.configuration)
        try await restarted.syncNow()
        #expect(try await !a.store.isBootstrapping())
        #expect(try await a.store.counts() == [.pending: 0, .confirmed: 13, .rejected: 0])
        #expect(await server.events(in: "team-1").count == 13)
        try await b.engine.syncNow()
        #expect(try await TitleProjection.dump(a.store) == TitleProjection.dump(b.store))
        let kinds = try await a.engine.journal.entries().map(\.kind)
        #expect(kinds.contains("reset") && kinds.contains("rebase"))
    }

    @Test func aLostResponseAfterCommitIsRetriedWithoutDuplicates() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let a = try Self.replica(directory, "a", server: server)
        let events = try await a.store.append((0..<3).map { title("note:\($0)", "x\($0)") })
        a.transport.inject([.dropResponse, .duplicate])
        await #expect(throws: SyncFailure.retryable(reason: "network: response lost", retryAfter: nil)) {
            try await a.engine.syncNow()
        }
        #expect(await server.events(in: "team-1").count == 3, "the server committed")
        #expect(try await a.store.pendingEvents().count == 3, "the client does not know yet")
        try await a.engine.syncNow()
        #expect(await server.events(in: "team-1").map(\.id) == events.map(\.event.id), "no duplicates")
        let local = try await a.store.events(stream: "note:1")
        #expect(local.map(\.event.seq) == [2] && local[0].status == .confirmed)
    }

    @Test func aDelayedRequestArrivingAfterANewerOneChangesNothing() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let a = try Self.replica(directory, "a", server: server)
        let first = try await a.store.append([title("note:1", "old")])
        a.transport.inject([.reorder])
        await #expect(throws: SyncFailure.self) { try await a.engine.syncNow() }
        #expect(await server.events(in: "team-1").isEmpty, "held back")
        try await a.store.append([title("note:1", "new")])
        try await a.engine.syncNow()  // the late request lands first, then the retry as a duplicate
        let stored = await server.events(in: "team-1")
        #expect(stored.count == 2 && stored[0].id == first[0].event.id)
        #expect(try await TitleProjection.dump(a.store) == ["note:1=new"])
        #expect(try await a.store.pendingEvents().isEmpty)
    }

    @Test func serverErrorsAndRateLimitsAreRetryable() async throws {
        let directory = try TemporaryDirectory()
        let a = try Self.replica(directory, "a", server: InMemorySyncServer())
        try await a.store.append([title("note:1", "x")])
        a.transport.inject([.serverError, .rateLimited(retryAfter: .seconds(7)), .dropRequest])
        await #expect(throws: SyncFailure.self) { try await a.engine.syncNow() }
        await #expect(throws: SyncFailure.retryable(reason: "rate.limited: injected", retryAfter: .seconds(7))) {
            try await a.engine.syncNow()
        }
        await #expect(throws: SyncFailure.self) { try await a.engine.syncNow() }
        #expect(a.engine.status.lastError != nil && a.engine.status.pending == 1)
        try await a.engine.syncNow()
        #expect(a.engine.status.lastError == nil && a.engine.status.pending == 0)
        #expect(try await a.engine.journal.entries().filter { $0.kind == "retry" }.count == 3)
    }

    @Test func rejectedEventsRollBackAndShowInStatus() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer(rule: { event in
            event.payload["title"]?.stringValue == "forbidden"
                ? EventRejection(ErrorCode(rawValue: "validation.failed"), "the quota is full") : nil
        })
        let a = try Self.replica(directory, "a", server: server)
        try await a.store.append([title("note:1", "fine")])
        try await a.engine.syncNow()
        try await a.store.append([title("note:1", "forbidden"), tag("note:1", "kept")])
        #expect(try await TitleProjection.dump(a.store).contains("note:1=forbidden"))
        try await a.engine.syncNow()
        #expect(try await TitleProjection.dump(a.store) == ["note:1=fine", "note:1#kept"])
        #expect(a.engine.status.rejected == 1 && a.engine.status.pending == 0)
        let rejected = try await a.store.rejectedEvents()
        #expect(rejected.first?.rejection == .init(code: "validation.failed", message: "the quota is full"))
        #expect(try await a.engine.journal.entries().contains { $0.kind == "rejection" })
    }

    @Test func anExpiredTokenPausesWithoutTouchingLocalData() async throws {
        let directory = try TemporaryDirectory()
        let a = try Self.replica(directory, "a", server: InMemorySyncServer())
        try await a.store.append([title("note:1", "offline edit")])
        a.transport.inject([.tokenExpired])
        await #expect(throws: SyncFailure.authentication(code: "auth.expired", message: "the token has expired")) {
            try await a.engine.syncNow()
        }
        #expect(a.engine.status.pausedForAuthentication)
        #expect(try await a.store.pendingEvents().count == 1)
        #expect(try await TitleProjection.dump(a.store) == ["note:1=offline edit"])
        try await a.engine.syncNow()
        #expect(!a.engine.status.pausedForAuthentication && a.engine.status.pending == 0)
    }

    @Test func runSyncsLocalWritesInTheBackground() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let a = try Self.replica(directory, "a", server: server)
        let running = Task { await a.engine.run() }
        defer { running.cancel() }
        try await a.store.append([title("note:1", "typed offline")])
        try await Self.until { await !server.events(in: "team-1").isEmpty }
        #expect(await server.events(in: "team-1").count == 1)
        running.cancel()
        await running.value
    }

    /// With `longPoll` (and the live stream off), a running engine that has no other trigger (no interval, no
    /// local write) sees another replica's event within a round trip of its push, and applies the poll's page
    /// without a cycle of its own; its own pushes wake the poll without any sync.
    @Test func longPollAppliesAnotherReplicasEventsWithoutACycle() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let a = try Self.replica(directory, "a", server: server)
        let store = try EventStore(path: directory.path("b.sqlite"), projections: [TitleProjection()])
        var configuration = SyncEngine.Configuration()
        configuration.interval = nil
        configuration.live = false
        configuration.longPoll = .seconds(5)
        let b = try SyncEngine(
            store: store, transport: InMemoryTransport(server: server), configuration: configuration)
        let running = Task { await b.run() }
        defer { running.cancel() }
        // The first cycle (run's explicit start) ends before a's push.
        try await Self.until { b.status.cycles > 0 }
        let cycles = b.status.cycles
        try #require(cycles > 0, "b's first cycle has not ended")
        try await a.store.append([title("note:1", "from a")])
        try await a.engine.syncNow()
        try await Self.until { try await store.counts()[.confirmed] != 0 }
        #expect(try await TitleProjection.dump(store) == TitleProjection.dump(a.store))
        #expect(try await store.cursor() == a.store.cursor())
        #expect(b.status.cycles == cycles)
        // b's own edit is pushed (local write: one cycle) and wakes b's poll, which makes no other.
        try await store.append([title("note:2", "from b")])
        try await Self.until { await server.events(in: "team-1").count >= 2 }
        // The cycle is counted once its answer is applied, which a loaded machine may delay past the push:
        // wait for it, then long enough for a second one to show if the poll made one.
        try await Self.until { b.status.cycles >= cycles + 1 }
        try await Task.sleep(for: .milliseconds(300))
        #expect(b.status.cycles == cycles + 1)
        running.cancel()
        await running.value
    }

    /// Replicas that sync only by long-poll and local writes, writing concurrently, all end with every
    /// event: a poll's page is applied only when it continues the stored cursor, so none is stepped over.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func longPollingReplicasMissNothing(seed: UInt64) async throws {
        var random = SplitMix64(seed: seed)
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        var configuration = SyncEngine.Configuration()
        configuration.interval = nil
        configuration.live = false
        configuration.longPoll = .seconds(5)
        configuration.debounce = .milliseconds(5)
        let stores = try (0..<4).map {
            try EventStore(path: directory.path("r\($0).sqlite"), projections: [TitleProjection()])
        }
        let engines = try stores.map {
            try SyncEngine(store: $0, transport: InMemoryTransport(server: server), configuration: configuration)
        }
        let running = engines.map { engine in Task { await engine.run() } }
        defer { for task in running { task.cancel() } }
        for round in 0..<60 {
            let store = stores[random.int(below: stores.count)]
            try await store.append([title("note:\(random.int(below: 5))", "w\(round)")])
            try await Task.sleep(for: .milliseconds(random.int(0...15)))
        }
        try await Self.until {
            var done = await server.events(in: "team-1").count == 60
            for store in stores where try await store.counts() != [.pending: 0, .confirmed: 60, .rejected: 0] {
                done = false
            }
            return done
        }
        for store in stores {
            #expect(try await store.counts() == [.pending: 0, .confirmed: 60, .rejected: 0])
            #expect(try await TitleProjection.dump(store) == TitleProjection.dump(stores[0]))
        }
        for task in running { task.cancel() }
        for task in running { await task.value }
    }

    /// Three replicas edit and sync through random faults; after a last fault-free round they hold the same
    /// state, the server holds each event once, and nothing local is lost.
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func convergesUnderRandomFaults(seed: UInt64) async throws {
        var random = SplitMix64(seed: seed)
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let replicas = try (0..<3).map { try Self.replica(directory, "r\($0)", server: server) }
        let faults: [InMemoryTransport.Fault] = [
            .dropRequest, .dropResponse, .duplicate, .serverError, .rateLimited(retryAfter: .seconds(1)),
            .tokenExpired, .delay(.milliseconds(1)), .reorder,
        ]
        var made = 0
        for _ in 0..<30 {
            let replica = replicas[Int.random(in: 0..<3, using: &random)]
            if Bool.random(using: &random) {
                let stream = "note:\(Int.random(in: 0..<5, using: &random))"
                let drafts = (0..<Int.random(in: 1...4, using: &random)).map { index in
                    index % 2 == 0 ? title(stream, "s\(seed)-\(made + index)") : tag(stream, "t\(made % 7)")
                }
                made += try await replica.store.append(drafts).count
            } else {
                if Int.random(in: 0..<3, using: &random) > 0 {
                    replica.transport.inject([faults[Int.random(in: 0..<faults.count, using: &random)]])
                }
                try? await replica.engine.syncNow()
            }
        }
        for _ in 0..<2 {
            for replica in replicas {
                replica.transport.inject([])
                try await replica.engine.syncNow()
            }
        }
        let expected = try await TitleProjection.dump(replicas[0].store)
        for replica in replicas {
            #expect(try await TitleProjection.dump(replica.store) == expected, "seed \(seed)")
            #expect(try await replica.store.counts() == [.pending: 0, .confirmed: made, .rejected: 0], "seed \(seed)")
        }
        let stored = await server.events(in: "team-1")
        #expect(stored.count == made && Set(stored.map(\.id)).count == made, "seed \(seed): each event once")
    }
}

/// The pull URL a device sends reads back, on the server's side, as the request it was made from.
@Suite struct PullURLTests {
    @Test(arguments: [
        PullRequest(),
        PullRequest(
            cursor: ScopeCursor([Scope("team:1"): 7, Scope("a.b_c-d"): 123_456_789]),
            scopes: [Scope("team:1"), Scope("a.b_c-d")], limit: 500, wait: 25,
            replica: ReplicaID(high: 0x0123_4567_89ab_cdef, low: 0xfedc_ba98_7654_3210),
            acknowledged: ScopeCursor([Scope("team:1"): 3]),
            exclude: ReplicaID(high: 1, low: 2)),
    ])
    func readsBackAsTheSameRequest(request: PullRequest) throws {
        let url = HTTPTransport.pullURL(base: URL(string: "http://127.0.0.1:8080/")!, request)
        #expect(url.path == "/v1/pull")
        let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        let query = items.map { (name: $0.name, value: $0.value ?? "") }
        #expect(try PullRequest(query: query) == request, "\(url)")
        #expect(!url.absoluteString.contains("+"), "a + may read back as a space: \(url)")
    }
}
