import Foundation
import SyncEngineTesting
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import SyncProtocol
import Synchronization
import Testing

@testable import SyncEngine

/// The live stream in `SyncEngine.run()`, against `InMemoryTransport`'s stream (frames as the in-memory
/// server commits).
@Suite struct LiveSyncTests {
    /// What a device applied, in order, from its rounds (frames and cycles alike).
    final class Received: Sendable {
        let events = Mutex<[Event]>([])
        var seqs: [Int64] { events.withLock { $0.map { $0.seq ?? 0 } } }
    }

    struct Device {
        let store: EventStore
        let transport: InMemoryTransport
        let engine: SyncEngine
        let received: Received
    }

    /// A device that syncs only by its stream (no interval), with short backoffs.
    static func device(
        _ directory: TemporaryDirectory, _ name: String, server: InMemorySyncServer,
        configure: (inout SyncEngine.Configuration) -> Void = { _ in }
    ) throws -> Device {
        let store = try EventStore(path: directory.path("\(name).sqlite"), projections: [TitleProjection()])
        let transport = InMemoryTransport(server: server)
        let received = Received()
        var configuration = SyncEngine.Configuration()
        configuration.interval = nil
        configuration.backoff = BackoffPolicy(base: .milliseconds(10), cap: .milliseconds(200))
        configuration.onRound = { round in received.events.withLock { $0 += round.events } }
        configure(&configuration)
        return Device(
            store: store, transport: transport,
            engine: try SyncEngine(store: store, transport: transport, configuration: configuration), received: received
        )
    }

    /// Whether `condition` comes to hold, looking every 10 ms. The conditions are waited for, not timed: the
    /// bound only keeps a broken engine from hanging the run. It is wide because `make test` runs about a
    /// hundred suites at once on two cores, where an engine's few hops to its stream can wait tens of seconds
    /// for a thread.
    static func eventually(_ seconds: Int = 180, _ condition: () async throws -> Bool) async rethrows -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return try await condition()
    }

    static func confirmed(_ store: EventStore) async throws -> Int { try await store.counts()[.confirmed] ?? 0 }

    /// Starts `device`'s run loop and waits for its stream.
    static func start(_ device: Device) async throws -> Task<Void, Never> {
        let engine = device.engine
        let running = Task { await engine.run() }
        #expect(await eventually { engine.status.liveConnected }, "the stream connects")
        return running
    }

    static func stop(_ running: Task<Void, Never>) async {
        running.cancel()
        await running.value
    }

    @Test func aSubscribedDeviceGetsEveryEventOfAnotherOnceAndInOrderWithoutACycle() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let a = try SyncEngineTests.replica(directory, "a", server: server)
        let b = try Self.device(directory, "b", server: server)
        let running = try await Self.start(b)
        let cycles = b.engine.status.cycles
        for round in 0..<5 {
            try await a.store.append((0..<3).map { title("note:\($0)", "r\(round)-\($0)") })
            try await a.engine.syncNow()
        }
        #expect(try await Self.eventually { try await Self.confirmed(b.store) == 15 })
        #expect(try await TitleProjection.dump(b.store) == TitleProjection.dump(a.store))
        #expect(try await b.store.cursor() == a.store.cursor())
        // A frame's round is reported after its transaction commits, with an await between: wait for the report.
        #expect(await Self.eventually { b.received.seqs.count >= 15 })
        #expect(b.received.seqs == (1...15).map { Int64($0) }, "each event once, in order")
        #expect(b.engine.status.cycles == cycles, "frames need no cycle")
        #expect(b.transport.liveRequests.count == 1)
        #expect(try await b.engine.journal.entries().contains { $0.kind == "live.connect" })
        await Self.stop(running)
        #expect(!b.engine.status.liveConnected)
        #expect(await Self.eventually { b.transport.openLiveStreams == 0 })
    }

    /// A device's own events come back in frames: the store knows them, and its pushes cost no cycle beyond
    /// their own.
    @Test func ownEventsInFramesChangeNothing() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let b = try Self.device(directory, "b", server: server)
        let running = try await Self.start(b)
        try await b.store.append([title("note:1", "mine")])
        #expect(try await Self.eventually { try await b.store.counts() == [.pending: 0, .confirmed: 1, .rejected: 0] })
        try await Task.sleep(for: .milliseconds(100))
        #expect(try await b.store.counts() == [.pending: 0, .confirmed: 1, .rejected: 0])
        #expect(try await b.store.cursor() == ScopeCursor([Scope("team-1"): 1]).encoded)
        #expect(b.engine.status.liveConnected)
        await Self.stop(running)
    }

    @Test func aGapMakesItCatchUpAndSubscribeAgain() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let a = try SyncEngineTests.replica(directory, "a", server: server)
        let b = try Self.device(directory, "b", server: server)
        let running = try await Self.start(b)
        let cycles = b.engine.status.cycles
        b.transport.dropLiveFrames(1)
        try await a.store.append([title("note:1", "lost on the way")])
        try await a.engine.syncNow()
        try await a.store.append([title("note:2", "after the gap")])
        try await a.engine.syncNow()
        #expect(try await Self.eventually { try await Self.confirmed(b.store) == 2 })
        #expect(await Self.eventually { b.transport.liveRequests.count == 2 && b.engine.status.liveConnected })
        #expect(b.engine.status.cycles == cycles + 1, "one cycle caught up")
        let drops = try await b.engine.journal.entries().filter { $0.kind == "live.drop" }
        #expect(drops.contains { $0.detail.contains("catching up") })
        // The new subscription carries on.
        try await a.store.append([title("note:3", "live again")])
        try await a.engine.syncNow()
        #expect(try await Self.eventually { try await Self.confirmed(b.store) == 3 })
        #expect(b.engine.status.cycles == cycles + 1)
        #expect(try await TitleProjection.dump(b.store) == TitleProjection.dump(a.store))
        await Self.stop(running)
    }

    @Test func behindMakesItCatchUpAndSubscribeAgainFromItsCursor() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let a = try SyncEngineTests.replica(directory, "a", server: server)
        let b = try Self.device(directory, "b", server: server)
        let running = try await Self.start(b)
        try await a.store.append([title("note:1", "first")])
        try await a.engine.syncNow()
        #expect(try await Self.eventually { try await Self.confirmed(b.store) == 1 })
        let cycles = b.engine.status.cycles
        b.transport.endLiveStreams(with: .behind)
        #expect(await Self.eventually { b.transport.liveRequests.count == 2 && b.engine.status.liveConnected })
        #expect(b.engine.status.cycles == cycles + 1)
        #expect(b.transport.liveRequests.last?.cursor == ScopeCursor([Scope("team-1"): 1]))
        #expect(b.transport.liveRequests.last?.replica == b.store.replica)
        try await a.store.append([title("note:2", "second")])
        try await a.engine.syncNow()
        #expect(try await Self.eventually { try await Self.confirmed(b.store) == 2 })
        #expect(b.engine.status.cycles == cycles + 1)
        await Self.stop(running)
    }

    /// A stream that just ends (a server restart) subscribes again from the cursor, after a short backoff
    /// and without a cycle.
    @Test func anEndedStreamSubscribesAgainFromItsCursor() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let a = try SyncEngineTests.replica(directory, "a", server: server)
        let b = try Self.device(directory, "b", server: server)
        let running = try await Self.start(b)
        try await a.store.append([title("note:1", "before the restart")])
        try await a.engine.syncNow()
        #expect(try await Self.eventually { try await Self.confirmed(b.store) == 1 })
        let cycles = b.engine.status.cycles
        b.transport.endLiveStreams()
        #expect(await Self.eventually { b.transport.liveRequests.count == 2 && b.engine.status.liveConnected })
        #expect(b.transport.liveRequests.last?.cursor == ScopeCursor([Scope("team-1"): 1]))
        try await a.store.append([title("note:2", "after the restart")])
        try await a.engine.syncNow()
        #expect(try await Self.eventually { try await Self.confirmed(b.store) == 2 })
        #expect(b.engine.status.cycles == cycles)
        // The round is reported after the store commits it (`eventually` above saw the store).
        #expect(await Self.eventually { b.received.seqs.count >= 2 })
        #expect(b.received.seqs == [1, 2])
        await Self.stop(running)
    }

    /// `auth.expired` on the stream pauses sync as the same answer to a request would: no push, no
    /// subscription, until `tokenRefreshed()`; then the engine syncs from where it was (pulling only what it
    /// missed) and subscribes again.
    @Test func anExpiredTokenOnTheStreamPausesUntilANewTokenWithoutLosingItsPlace() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let a = try SyncEngineTests.replica(directory, "a", server: server)
        let b = try Self.device(directory, "b", server: server)
        let running = try await Self.start(b)
        try await a.store.append([title("note:1", "seen live")])
        try await a.engine.syncNow()
        #expect(try await Self.eventually { try await Self.confirmed(b.store) == 1 })
        b.transport.endLiveStreams(with: .error(.init(code: .authExpired, message: "the token has expired")))
        #expect(await Self.eventually { b.engine.status.pausedForAuthentication })
        #expect(!b.engine.status.liveConnected)
        try await b.store.append([title("note:2", "written while paused")])
        try await a.store.append([title("note:3", "missed while paused")])
        try await a.engine.syncNow()
        try await Task.sleep(for: .milliseconds(300))
        #expect(await server.events(in: "team-1").count == 2, "nothing pushed while paused")
        #expect(b.transport.liveRequests.count == 1, "no subscription while paused")
        #expect(try await b.store.counts() == [.pending: 1, .confirmed: 1, .rejected: 0])
        let pulled = b.engine.status.pulledEvents
        b.engine.tokenRefreshed()
        #expect(try await Self.eventually { try await b.store.counts() == [.pending: 0, .confirmed: 3, .rejected: 0] })
        #expect(await Self.eventually { b.transport.liveRequests.count == 2 && b.engine.status.liveConnected })
        #expect(!b.engine.status.pausedForAuthentication)
        #expect(b.engine.status.pulledEvents == pulled + 1, "only the missed event was pulled")
        #expect(try await b.engine.journal.entries().contains { $0.kind == "pause" })
        try await a.store.append([title("note:4", "live again")])
        try await a.engine.syncNow()
        #expect(try await Self.eventually { try await Self.confirmed(b.store) == 4 })
        #expect(try await TitleProjection.dump(b.store) == TitleProjection.dump(a.store))
        await Self.stop(running)
    }

    /// A server (or transport) without the stream answers 404: the engine long-polls instead, by itself,
    /// and tries the stream again the next time the app comes to the foreground.
    @Test func withoutAStreamItLongPolls() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let a = try SyncEngineTests.replica(directory, "a", server: server)
        let b = try Self.device(directory, "b", server: server) { $0.longPoll = .seconds(5) }
        b.transport.setLiveSupported(false)
        let running = Task { await b.engine.run() }
        #expect(await Self.eventually { b.engine.status.longPolling })
        #expect(!b.engine.status.liveConnected && b.transport.liveRequests.count == 1)
        let cycles = b.engine.status.cycles
        try await a.store.append([title("note:1", "polled")])
        try await a.engine.syncNow()
        #expect(try await Self.eventually { try await Self.confirmed(b.store) == 1 })
        #expect(b.engine.status.cycles == cycles, "a poll's page needs no cycle")
        #expect(try await b.engine.journal.entries().contains { $0.kind == "live.unsupported" })
        // Background: no poll either. Foreground: the stream again (now there).
        b.engine.setLive(false)
        #expect(await Self.eventually { !b.engine.status.longPolling })
        b.transport.setLiveSupported(true)
        b.engine.setLive(true)
        #expect(await Self.eventually { b.engine.status.liveConnected })
        #expect(b.transport.liveRequests.count == 2 && !b.engine.status.longPolling)
        await Self.stop(running)
    }

    /// `setLive(false)` (the app went to the background) drops the stream at once; the engine keeps pushing
    /// local writes. `setLive(true)` syncs and subscribes again.
    @Test func closingTheStreamInTheBackgroundStopsIt() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let a = try SyncEngineTests.replica(directory, "a", server: server)
        let b = try Self.device(directory, "b", server: server)
        let running = try await Self.start(b)
        b.engine.setLive(false)
        #expect(await Self.eventually { b.transport.openLiveStreams == 0 }, "closed")
        #expect(await Self.eventually { !b.engine.status.liveConnected })
        try await a.store.append([title("note:1", "while b is in the background")])
        try await a.engine.syncNow()
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await Self.confirmed(b.store) == 0, "no stream, no poll")
        #expect(b.transport.liveRequests.count == 1 && b.transport.openLiveStreams == 0)
        let drops = try await b.engine.journal.entries().filter { $0.kind == "live.drop" }
        #expect(drops.contains { $0.detail.contains("background") })
        // Local writes are still pushed (and their cycle pulls what others pushed).
        try await b.store.append([title("note:2", "b still pushes")])
        #expect(await Self.eventually { await server.events(in: "team-1").count == 2 })
        #expect(try await Self.eventually { try await Self.confirmed(b.store) == 2 })
        b.engine.setLive(true)
        #expect(await Self.eventually { b.engine.status.liveConnected && b.transport.liveRequests.count == 2 })
        let cycles = b.engine.status.cycles
        try await a.store.append([title("note:3", "live again")])
        try await a.engine.syncNow()
        #expect(try await Self.eventually { try await Self.confirmed(b.store) == 3 })
        #expect(b.engine.status.cycles == cycles)
        await Self.stop(running)
    }

    /// Devices that sync only by their streams and their local writes, writing concurrently, all end with
    /// every event once.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func liveDevicesMissNothing(seed: UInt64) async throws {
        var random = SplitMix64(seed: seed)
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let devices = try (0..<4).map { try Self.device(directory, "r\($0)", server: server) }
        var running: [Task<Void, Never>] = []
        for device in devices { running.append(try await Self.start(device)) }
        for round in 0..<60 {
            let store = devices[random.int(below: devices.count)].store
            try await store.append([title("note:\(random.int(below: 5))", "w\(round)")])
            try await Task.sleep(for: .milliseconds(random.int(0...15)))
        }
        for device in devices {
            #expect(
                try await Self.eventually {
                    try await device.store.counts() == [.pending: 0, .confirmed: 60, .rejected: 0]
                })
        }
        #expect(await server.events(in: "team-1").count == 60)
        let expected = try await TitleProjection.dump(devices[0].store)
        for device in devices {
            #expect(try await TitleProjection.dump(device.store) == expected)
            let seqs = device.received.seqs
            #expect(Set(seqs).count == seqs.count, "no event applied twice")
        }
        for task in running { await Self.stop(task) }
    }
}

/// The live stream's URL and refusals, as `HTTPClientTransport` reads them.
@Suite struct LiveHTTPTests {
    @Test func theLiveURLReadsBackAsTheSameRequest() throws {
        let request = PullRequest(
            cursor: ScopeCursor([Scope("team:1"): 7]), scopes: [Scope("team:1")],
            replica: ReplicaID(high: 1, low: 2))
        let url = HTTPTransport.liveURL(base: URL(string: "http://127.0.0.1:8080/")!, request)
        #expect(url.path == "/v1/live")
        let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        #expect(try PullRequest(query: items.map { (name: $0.name, value: $0.value ?? "") }) == request)
    }

    @Test func refusalsMeanWhatTheyMeanForAPull() throws {
        let unsupported = SyncFailure.permanent(code: SyncFailure.transportUnsupported, message: "")
        for status in [404, 405, 200] {
            guard
                case .permanent(let code, _) = HTTPTransport.liveFailure(status: status, retryAfter: nil, body: Data())
            else {
                Issue.record("HTTP \(status): not permanent")
                continue
            }
            #expect(code == SyncFailure.transportUnsupported, "HTTP \(status) is \(unsupported)")
        }
        let expired = try WireCodec().encode(ErrorBody(error: .init(code: .authExpired, message: "expired")))
        #expect(
            HTTPTransport.liveFailure(status: 401, retryAfter: nil, body: expired)
                == .authentication(code: "auth.expired", message: "expired"))
        #expect(
            HTTPTransport.liveFailure(status: 503, retryAfter: "7", body: Data())
                == .retryable(reason: "HTTP 503 http.503", retryAfter: .seconds(7)))
        #expect(
            SyncFailure.from(ErrorBody.Detail(code: .authExpired, message: "m"))
                == .authentication(code: "auth.expired", message: "m"))
    }
}
