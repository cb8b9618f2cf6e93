import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import SyncCompression
import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Synchronization
import Testing

@testable import SyncServer

/// Real loopback HTTP against a real server process and PostgreSQL.
@Suite struct LiveTests {
    /// A protocol client over AsyncHTTPClient for one live server.
    struct LiveClient: Sendable {
        let http: HTTPClient
        let base: String
        let token: String
        let codec = WireCodec()

        func push(_ events: [Event], gzip: Bool = false) async throws -> [PushResult] {
            var request = HTTPClientRequest(url: base + "/v1/push")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            var body = try codec.encode(PushRequest(replica: EventFixtures.replica, events: events))
            if gzip {
                body = Gzip.compress(body)
                request.headers.add(name: "Content-Encoding", value: "gzip")
            }
            request.body = .bytes(ByteBuffer(bytes: body))
            let (response, bytes) = try await execute(request)
            guard response.status == .ok else {
                throw SyncProtocolError(.serverInternal, "push: \(response.status) \(String(buffer: bytes))")
            }
            return try codec.decode(PushResponse.self, from: Data(buffer: bytes)).results
        }

        func pull(_ pull: PullRequest, acceptGzip: Bool = false) async throws -> (PullResponse, HTTPHeaders) {
            var request = HTTPClientRequest(url: base + TestServer.uri(pull))
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            if acceptGzip { request.headers.add(name: "Accept-Encoding", value: "gzip") }
            let (response, bytes) = try await execute(request)
            var data = Data(buffer: bytes)
            guard response.status == .ok else {
                throw SyncProtocolError(
                    .serverInternal, "pull: \(response.status) \(String(decoding: data, as: UTF8.self))")
            }
            if response.headers["Content-Encoding"].first == "gzip" { data = try Gzip.decompress(data) }
            return (try codec.decode(PullResponse.self, from: data), response.headers)
        }

        /// Sends `request`, again after a pause when the answer is 503 `server.unavailable`, as the protocol
        /// tells clients to: a machine running every test at once can keep a request queued past the
        /// server's acquire timeout. Pushes are idempotent and a pull at the same cursor reads the same
        /// page, so what the tests check is unchanged. Sent again too when the client gave up before sending
        /// it (connecting, or waiting for a connection of its pool: 60 s once did not suffice with a second
        /// test run beside this one), as the sync engine does after a transport failure.
        func execute(_ request: HTTPClientRequest) async throws -> (HTTPClientResponse, ByteBuffer) {
            var attempt = 0
            while true {
                attempt += 1
                let response: HTTPClientResponse
                do {
                    response = try await http.execute(request, timeout: .seconds(60))
                } catch let error as HTTPClientError
                    where (error == .connectTimeout || error == .getConnectionFromPoolTimeout) && attempt < 20
                {
                    continue
                }
                let bytes = try await response.body.collect(upTo: 64 << 20)
                guard response.status == .serviceUnavailable, attempt < 20 else { return (response, bytes) }
                try await Task.sleep(for: .milliseconds(250 * min(attempt, 4)))
            }
        }
    }

    static func withLiveClient(
        scopes: [String], configure: @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (LiveClient, TestServer) async throws -> Void
    ) async throws {
        try await TestServer.run(live: true, configure: configure) { server in
            // A connection per concurrent task (the default pool has 8 per host: requests past them queue in
            // the client, and on a loaded machine time out there), and a generous time to connect.
            var configuration = HTTPClient.Configuration()
            configuration.timeout = .init(connect: .seconds(60))
            configuration.connectionPool = .init(
                idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 32)
            let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            do {
                let client = LiveClient(
                    http: http, base: "http://127.0.0.1:\(server.client.port!)", token: try await server.token(scopes))
                try await body(client, server)
                try await http.shutdown()
            } catch {
                try? await http.shutdown()
                throw error
            }
        }
    }

    /// 16 pushers append to 3 scopes while 4 pullers page through them; every puller must see, per scope,
    /// exactly seqs 1...n in order (no gap, repeat or reordering), and the pulled ids must be the pushed ones.
    @Test func gapFreeUnderConcurrentPushersAndPullers() async throws {
        let scopes: [Scope] = ["g1", "g2", "g3"]
        let pushers = 16
        let batchesPerPusher = 12
        let batchSize = 20
        try await Self.withLiveClient(scopes: scopes.map(\.name), configure: { $0.databasePoolSize = 12 }) {
            client, server in
            let total = pushers * batchesPerPusher * batchSize
            let pushersDone = Counter()
            let (pushed, pulls) = try await withThrowingTaskGroup(of: Outcome.self) { group in
                for pusher in 0..<pushers {
                    group.addTask {
                        var accepted: [EventID: (Scope, Int64)] = [:]
                        for batch in 0..<batchesPerPusher {
                            let events = (0..<batchSize).map { index in
                                EventFixtures.event(scope: scopes[(pusher + batch + index) % scopes.count])
                            }
                            let results = try await client.push(events)
                            for (event, result) in zip(events, results) {
                                #expect(result.status == .accepted)
                                accepted[event.id] = (event.scope, result.seq ?? -1)
                            }
                        }
                        pushersDone.increment()
                        return .pushed(accepted)
                    }
                }
                for _ in 0..<4 {
                    group.addTask {
                        var seen: [Scope: [Int64]] = [:]
                        var ids: [EventID] = []
                        var cursor = ScopeCursor()
                        // Until a pull that began after every push was answered finds nothing new: then it
                        // has all there is, however long the pushes took (no deadline to miss on a loaded
                        // machine), and a missing event is a failed expectation below, not a hang.
                        while true {
                            let pushed = pushersDone.value == pushers
                            let (page, _) = try await client.pull(PullRequest(cursor: cursor, limit: 97, wait: 1))
                            for event in page.events {
                                seen[event.scope, default: []].append(event.seq ?? -1)
                                ids.append(event.id)
                            }
                            cursor = try ScopeCursor(encoded: page.cursor)
                            if pushed && page.events.isEmpty { break }
                        }
                        return .pulled(seen, ids)
                    }
                }
                var pushed: [EventID: (Scope, Int64)] = [:]
                var pulls: [([Scope: [Int64]], [EventID])] = []
                for try await outcome in group {
                    switch outcome {
                    case .pushed(let accepted): pushed.merge(accepted) { first, _ in first }
                    case .pulled(let seen, let ids): pulls.append((seen, ids))
                    }
                }
                return (pushed, pulls)
            }
            #expect(pushed.count == total)
            var perScope: [Scope: Int] = [:]
            for (_, (scope, _)) in pushed { perScope[scope, default: 0] += 1 }
            for scope in scopes {
                let seqs = pushed.values.filter { $0.0 == scope }.map(\.1).sorted()
                #expect(seqs == Array(1...Int64(perScope[scope]!)), "pushed seqs of \(scope) are not 1...n")
            }
            #expect(pulls.count == 4)
            for (seen, ids) in pulls {
                for scope in scopes {
                    #expect(
                        seen[scope] == Array(1...Int64(perScope[scope]!)),
                        "a puller saw a gap, repeat or reorder in \(scope)")
                }
                #expect(Set(ids) == Set(pushed.keys) && ids.count == total)
            }
            let heads = try await server.database.integers("SELECT head FROM scopes ORDER BY scope")
            #expect(heads == scopes.map { Int64(perScope[$0]!) })
        }
    }

    /// A count shared by concurrent tasks.
    final class Counter: Sendable {
        private let count = Atomic<Int>(0)

        func increment() { count.add(1, ordering: .sequentiallyConsistent) }
        var value: Int { count.load(ordering: .sequentiallyConsistent) }
    }

    enum Outcome: Sendable {
        case pushed([EventID: (Scope, Int64)])
        case pulled([Scope: [Int64]], [EventID])
    }

    @Test func longPollWakesWhenAnEventArrives() async throws {
        // A long wait (the server is set to allow it), under the client's 60-s request timeout.
        let wait = 50
        try await Self.withLiveClient(scopes: ["lp", "quiet"], configure: { $0.limits.maxWaitSeconds = wait }) {
            client, _ in
            // Nothing new: the pull waits its full time.
            let started = ContinuousClock.now
            let (empty, _) = try await client.pull(PullRequest(scopes: ["quiet"], wait: 1))
            #expect(empty.events.isEmpty)
            #expect(ContinuousClock.now - started >= .milliseconds(900))

            let event = EventFixtures.event(scope: "lp")
            let polled = ContinuousClock.now
            let waiting = Task {
                let (page, _) = try await client.pull(PullRequest(scopes: ["lp"], wait: wait))
                return page
            }
            try await Task.sleep(for: .milliseconds(500))
            _ = try await client.push([event])
            let pushed = ContinuousClock.now - polled
            let page = try await waiting.value
            let elapsed = ContinuousClock.now - polled
            // Woken, not answered at its deadline. The push took over 19 s once, with a whole suite creating
            // databases on a Citus cluster on two cores: when it ended within a second of the deadline, the
            // answer tells nothing.
            if pushed < .seconds(wait - 1) {
                #expect(page.events.map(\.id) == [event.id])
                #expect(
                    elapsed < .seconds(wait - 1), "the long-poll was not woken: \(elapsed), the push took \(pushed)")
            }
        }
    }

    @Test func longPollIsWokenByAnotherServersCommitThroughNotify() async throws {
        // A long wait (the server is set to allow it), so that a loaded machine's slow answer is not taken for
        // one at the deadline; under the client's 60-s request timeout, so that an answer at the deadline fails
        // the expectation below rather than the request.
        let wait = 50
        try await Self.withLiveClient(scopes: ["nx"], configure: { $0.limits.maxWaitSeconds = wait }) {
            client, server in
            // A NOTIFY before the hub listens is heard by no one: wait for it to listen (it begins at start-up).
            while try await FanoutTests.metric("sync_longpoll_listening", http: client.http, base: client.base) < 1 {
                try await Task.sleep(for: .milliseconds(20))
            }
            let start = ContinuousClock.now
            let waiting = Task {
                let (page, _) = try await client.pull(PullRequest(scopes: ["nx"], wait: wait))
                return page
            }
            // And for the poll to be parked, past its first read: a commit before that is read, not woken for.
            while try await FanoutTests.metric("sync_longpolls_parked", http: client.http, base: client.base) < 1 {
                try await Task.sleep(for: .milliseconds(20))
            }
            // Another server's commit: written straight into the database, announced only by NOTIFY.
            try await server.database.execute(
                """
                WITH s AS (INSERT INTO scopes (scope, head) VALUES ('nx', 1) RETURNING scope)
                INSERT INTO events (scope, seq, event_id, stream, stream_version, type, schema_version, hlc,
                                    dot_replica, dot_counter, payload)
                VALUES ('nx', 1, '018f4e3a-5b7c-7d8e-9f00-112233445566', 'doc:x', 1, 'doc.edited', 1,
                        '0000018f4e3a5b7c:0003:6d2c1f0e9a8b4c7d', '6d2c1f0e9a8b4c7d8e9f001122334455', 1, '{}')
                """)
            try await server.database.execute("NOTIFY sync_events, 'nx'")
            let page = try await waiting.value
            let elapsed = ContinuousClock.now - start
            #expect(page.events.map(\.seq) == [1])
            // Woken by the NOTIFY: the server set the poll's deadline `wait` seconds after the request reached
            // it, which is after `start`, so an answer within `wait` of `start` came before the deadline.
            #expect(elapsed < .seconds(wait), "the long-poll was not woken: \(elapsed)")
        }
    }

    /// A 1 GiB gzip bomb (64 concatenated members of 16 MiB of zeros, about 1 MiB on the wire) gets 413
    /// without the process growing by anything like its decompressed size.
    @Test func gzipBombGets413WithoutGrowingTheProcess() async throws {
        let member = Gzip.compress(Data(count: 16 << 20), level: 9)
        let bomb = Data((0..<64).map { _ in member }.joined())
        #expect(bomb.count < 2 << 20)
        try await Self.withLiveClient(scopes: ["b"]) { client, _ in
            let before = Self.residentBytes()
            var request = HTTPClientRequest(url: client.base + "/v1/push")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(client.token)")
            request.headers.add(name: "Content-Encoding", value: "gzip")
            request.body = .bytes(ByteBuffer(bytes: bomb))
            let response = try await client.http.execute(request, timeout: .seconds(60))
            let body = try await response.body.collect(upTo: 1 << 20)
            #expect(response.status.code == 413)
            #expect(String(buffer: body).contains("request.tooLarge"))
            let grown = Self.residentBytes() - before
            #expect(grown < 256 << 20, "the process grew by \(grown >> 20) MiB")
        }
    }

    /// The resident set size of this process (Linux), 0 where unknown.
    static func residentBytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }

    @Test func gzipBothWaysOverHTTP() async throws {
        try await Self.withLiveClient(scopes: ["z"]) { client, _ in
            let events = (0..<50).map { _ in
                EventFixtures.event(
                    scope: "z", payload: .object(["title": .string(String(repeating: "lorem ipsum ", count: 16))]))
            }
            let results = try await client.push(events, gzip: true)
            #expect(results.allSatisfy { $0.status == .accepted })
            let (page, headers) = try await client.pull(PullRequest(), acceptGzip: true)
            #expect(headers["Content-Encoding"].first == "gzip")
            #expect(headers["Vary"].first == "Accept-Encoding")
            #expect(page.events.map(\.id) == events.map(\.id))
            let (plain, plainHeaders) = try await client.pull(PullRequest())
            #expect(plainHeaders["Content-Encoding"].isEmpty)
            #expect(plain.events.count == 50)
        }
    }
}
