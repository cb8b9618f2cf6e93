import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Testing

@testable import SyncServer

/// The live stream (`GET /v1/live`) over real loopback HTTP against a real server and PostgreSQL.
@Suite struct LiveStreamTests {
    /// One subscription read as a client reads it: the SSE body fed through `ServerSentEventParser`, each
    /// message decoded as `LiveMessage`.
    final class Subscriber: Sendable {
        let messages: AsyncThrowingStream<LiveMessage, any Error>
        let status: Int
        private let task: Task<Void, Never>

        private init(messages: AsyncThrowingStream<LiveMessage, any Error>, status: Int, task: Task<Void, Never>) {
            self.messages = messages
            self.status = status
            self.task = task
        }

        /// Opens the stream; returns once the answer's head is in.
        static func open(
            _ client: LiveTests.LiveClient, cursor: ScopeCursor, scopes: [Scope]? = nil, token: String? = nil
        )
            async throws -> Subscriber
        {
            var query = "cursor=\(cursor.encoded)"
            if let scopes { query += "&scopes=" + scopes.map(\.name).joined(separator: ",") }
            var request = HTTPClientRequest(url: client.base + "/v1/live?" + query)
            request.headers.add(name: "Authorization", value: "Bearer \(token ?? client.token)")
            let response = try await client.http.execute(request, timeout: .seconds(30))
            let (messages, continuation) = AsyncThrowingStream<LiveMessage, any Error>.makeStream()
            let task = Task {
                var parser = ServerSentEventParser()
                do {
                    for try await chunk in response.body {
                        for item in try parser.feed(chunk.readableBytesView) {
                            switch item {
                            case .comment: continuation.yield(.heartbeat)
                            case .event(let event):
                                if let message = try LiveMessage(event: event.name, data: event.data) {
                                    continuation.yield(message)
                                }
                            }
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            return Subscriber(messages: messages, status: Int(response.status.code), task: task)
        }

        func close() { task.cancel() }
    }

    /// Reads frames until `cursor` reaches `heads` in every scope, applying each by the protocol's rule;
    /// returns the events in the order they came and the messages other than frames and heartbeats.
    static func collect(
        _ subscriber: Subscriber, from cursor: inout ScopeCursor, until heads: [Scope: Int64],
        within limit: Duration = .seconds(60)
    ) async throws -> (events: [Event], others: [LiveMessage]) {
        var events: [Event] = []
        var others: [LiveMessage] = []
        let deadline = ContinuousClock.now + limit
        var iterator = subscriber.messages.makeAsyncIterator()
        while heads.contains(where: { cursor[$0.key] < $0.value }) {
            guard ContinuousClock.now < deadline, let message = try await iterator.next() else { break }
            switch message {
            case .frame(let frame):
                switch frame.placement(at: cursor[frame.scope]) {
                case .next:
                    events += frame.events
                    cursor.advance(frame.scope, to: frame.head)
                case .known: continue
                case .gap: Issue.record("a gap: at \(cursor[frame.scope]), a frame after \(frame.after)")
                }
            case .heartbeat, .subscribed: continue
            default: others.append(message)
            }
        }
        return (events, others)
    }

    @Test func aSubscriberReceivesEveryPushedEventExactlyOnceAndInOrder() async throws {
        let scopes: [Scope] = ["ls1", "ls2"]
        try await LiveTests.withLiveClient(scopes: scopes.map(\.name)) { client, _ in
            var cursor = ScopeCursor()
            let subscriber = try await Subscriber.open(client, cursor: cursor)
            defer { subscriber.close() }
            #expect(subscriber.status == 200)
            var iterator = subscriber.messages.makeAsyncIterator()
            guard case .subscribed(let heartbeat) = try await iterator.next() else {
                Issue.record("the stream opens with `live`")
                return
            }
            #expect(heartbeat == 15)
            // Four pushers, 25 batches each of 1-3 events, into both scopes at once.
            let pushed = try await withThrowingTaskGroup(of: [Event].self) { group in
                for pusher in 0..<4 {
                    group.addTask {
                        var events: [Event] = []
                        for batch in 0..<25 {
                            let batchEvents = (0...(batch % 3)).map { index in
                                EventFixtures.event(scope: scopes[(pusher + batch + index) % 2])
                            }
                            let results = try await client.push(batchEvents)
                            #expect(results.allSatisfy { $0.status == .accepted })
                            events += batchEvents
                        }
                        return events
                    }
                }
                return try await group.reduce(into: [Event]()) { $0 += $1 }
            }
            var heads: [Scope: Int64] = [:]
            for event in pushed { heads[event.scope, default: 0] += 1 }
            let (events, others) = try await Self.collect(subscriber, from: &cursor, until: heads)
            #expect(others.isEmpty)
            #expect(events.count == pushed.count, "every pushed event, once")
            #expect(Set(events.map(\.id)) == Set(pushed.map(\.id)))
            for scope in scopes {
                #expect(
                    events.filter { $0.scope == scope }.map { $0.seq ?? -1 } == Array(1...(heads[scope] ?? 0)),
                    "\(scope): seqs in order, no gap, no repeat")
            }
        }
    }

    /// This server's own commits are handed to the live stream rather than read back (`LiveHub.expect`): their
    /// frames carry exactly what a pull reads, `receivedAt` included, and one pusher's commits make no tail
    /// read. Then four pushers, some of whose pushes take the transaction of steps (a retried event makes the
    /// one statement refuse), and another server's commits, which are read: every event still arrives once,
    /// in order, as a pull reads it.
    @Test func framesOfThisServersCommitsAreWhatAPullReads() async throws {
        try await LiveTests.withLiveClient(scopes: ["hv"]) { client, server in
            // The LISTEN connection's start makes every feed read (commits may have been missed before it): wait
            // for it before subscribing.
            let deadline = ContinuousClock.now + .seconds(30)
            while try await FanoutTests.metric("sync_longpoll_listening ", http: client.http, base: client.base) < 1,
                ContinuousClock.now < deadline
            {
                try await Task.sleep(for: .milliseconds(50))
            }
            var cursor = ScopeCursor()
            let subscriber = try await Subscriber.open(client, cursor: cursor)
            defer { subscriber.close() }
            func reads() async throws -> Double {
                try await FanoutTests.metric("sync_live_reads_total", http: client.http, base: client.base)
            }
            let readsBefore = try await reads()
            var head: Int64 = 0
            for batch in 0..<20 {
                let events = (0...(batch % 3)).map { index in
                    EventFixtures.event(
                        scope: "hv", stream: "doc:\(index)", version: Int64(batch + 1),
                        payload: .object([
                            "title": .string("é \(batch) \"q\""), "n": .int(Int64(batch)), "x": .double(0.5),
                        ]))
                }
                #expect(try await client.push(events).allSatisfy { $0.status == .accepted })
                head += Int64(events.count)
            }
            var (live, _) = try await Self.collect(subscriber, from: &cursor, until: ["hv": head])
            #expect(try await reads() == readsBefore, "one pusher's commits are handed over, not read")

            let retried = live
            let counts = try await withThrowingTaskGroup(of: Int64.self) { group in
                for pusher in 0..<4 {
                    group.addTask {
                        var count: Int64 = 0
                        for batch in 0..<15 {
                            var events = [EventFixtures.event(scope: "hv", stream: "p\(pusher):\(batch)")]
                            if batch % 4 == pusher % 4 { events.append(retried[(pusher * 7 + batch) % retried.count]) }
                            let results = try await client.push(events)
                            #expect(results[0].status == .accepted)
                            count += 1
                        }
                        return count
                    }
                }
                group.addTask {
                    // Another server's commits: a row and its head straight into the database, then the NOTIFY.
                    for index in 0..<10 {
                        let event = EventFixtures.event(scope: "hv", stream: "other:\(index)")
                        try await server.database.execute(
                            """
                            WITH s AS (UPDATE scopes SET head = head + 1 WHERE scope = 'hv' RETURNING head)
                            INSERT INTO events (scope, seq, event_id, stream, stream_version, type, schema_version,
                                                hlc, dot_replica, dot_counter, payload)
                            SELECT 'hv', s.head, \(event.id.uuid), \(event.stream), 1, 'doc.edited', 1,
                                   \(event.hlc.description), \(event.dot.replica.description),
                                   \(Int64(event.dot.counter)), '{}' FROM s
                            """)
                        try await server.database.execute(
                            "SELECT pg_notify('sync_events', 'hv ' || head) FROM scopes WHERE scope = 'hv'")
                    }
                    return 10
                }
                return try await group.reduce(0, +)
            }
            head += counts
            let (more, _) = try await Self.collect(subscriber, from: &cursor, until: ["hv": head])
            live += more
            #expect(try await reads() > readsBefore, "another server's commits are read")
            let (pulled, _) = try await client.pull(
                PullRequest(cursor: ScopeCursor(), scopes: ["hv"], limit: 1_000, wait: 0))
            #expect(pulled.events.count == Int(head) && live.count == Int(head))
            let differing = zip(live, pulled.events).first { $0 != $1 }
            #expect(
                differing == nil,
                "the live stream's events are the pull's, field for field: \(String(describing: differing))")
        }
    }

    @Test func reconnectingWithTheCursorMissesNothingAndRepeatsNothing() async throws {
        try await LiveTests.withLiveClient(scopes: ["rc"]) { client, _ in
            var cursor = ScopeCursor()
            let first = try await Subscriber.open(client, cursor: cursor)
            _ = try await client.push((0..<5).map { _ in EventFixtures.event(scope: "rc") })
            let (before, _) = try await Self.collect(first, from: &cursor, until: ["rc": 5])
            #expect(before.map { $0.seq ?? -1 } == Array(1...5))
            // The connection dies; events keep coming meanwhile.
            first.close()
            for _ in 0..<4 { _ = try await client.push((0..<3).map { _ in EventFixtures.event(scope: "rc") }) }
            let second = try await Subscriber.open(client, cursor: cursor)
            defer { second.close() }
            _ = try await client.push([EventFixtures.event(scope: "rc")])
            let (after, others) = try await Self.collect(second, from: &cursor, until: ["rc": 18])
            #expect(others.isEmpty)
            #expect(after.map { $0.seq ?? -1 } == Array(6...18))
        }
    }

    @Test func aCommitOfAnotherServerArrivesThroughNotify() async throws {
        try await LiveTests.withLiveClient(scopes: ["nt"]) { client, server in
            var cursor = ScopeCursor()
            _ = try await client.push([EventFixtures.event(scope: "nt")])
            cursor.advance("nt", to: 1)
            let subscriber = try await Subscriber.open(client, cursor: cursor)
            defer { subscriber.close() }
            // Another server's push: the row and the head written straight into the database, then its NOTIFY.
            try await server.database.execute(
                """
                WITH s AS (UPDATE scopes SET head = 2 WHERE scope = 'nt' RETURNING scope)
                INSERT INTO events (scope, seq, event_id, stream, stream_version, type, schema_version, hlc,
                                    dot_replica, dot_counter, payload)
                SELECT 'nt', 2, '018f4e3a-5b7c-7d8e-9f00-112233445566', 'doc:other', 1, 'doc.edited', 1,
                        '0000018f4e3a5b7c:0003:6d2c1f0e9a8b4c7d', '6d2c1f0e9a8b4c7d8e9f001122334455', 1, '{}'
                FROM s
                """)
            try await server.database.execute("SELECT pg_notify('sync_events', 'nt 2')")
            let (events, _) = try await Self.collect(subscriber, from: &cursor, until: ["nt": 2], within: .seconds(30))
            #expect(events.map(\.stream) == ["doc:other"])
        }
    }

    @Test func aTokenThatExpiresEndsTheStreamWithAuthExpired() async throws {
        try await LiveTests.withLiveClient(scopes: ["ex"]) { client, server in
            // A token of a few seconds, open while the stream starts: on a loaded machine the request can reach
            // the server after a short one expired (401, no stream), then a longer one is tried.
            var ttl: TimeInterval = 2
            var subscriber = try await Subscriber.open(
                client, cursor: ScopeCursor(),
                token: try await server.tokens.mint(subject: "alice", scopes: ["ex"], ttl: ttl))
            while subscriber.status == 401 && ttl < 16 {
                subscriber.close()
                ttl *= 2
                subscriber = try await Subscriber.open(
                    client, cursor: ScopeCursor(),
                    token: try await server.tokens.mint(subject: "alice", scopes: ["ex"], ttl: ttl))
            }
            try #require(subscriber.status == 200, "the stream did not open (\(subscriber.status))")
            defer { subscriber.close() }
            // Read until the stream ends. The server checks expiries every second; closing it a minute past the
            // token's life only keeps a stream that would not end from hanging the test.
            let reading = Task { [subscriber] in
                var messages: [LiveMessage] = []
                for try await message in subscriber.messages { messages.append(message) }
                return messages
            }
            let watchdog = Task { [subscriber] in
                try await Task.sleep(for: .seconds(ttl + 60))
                subscriber.close()
            }
            let messages = try await reading.value
            watchdog.cancel()
            guard case .error(let detail) = messages.last else {
                Issue.record("the stream should end with an error message; it sent \(messages)")
                return
            }
            #expect(detail.code == .authExpired)
        }
    }

    @Test func requestsAreCheckedBeforeTheStreamStarts() async throws {
        try await LiveTests.withLiveClient(scopes: ["ok"]) { client, _ in
            for (query, token, status) in [
                ("cursor=ok", client.token, 400), ("scopes=other", client.token, 403), ("", "nonsense", 401),
            ] {
                var request = HTTPClientRequest(url: client.base + "/v1/live?" + query)
                request.headers.add(name: "Authorization", value: "Bearer \(token)")
                let (response, body) = try await client.execute(request)
                #expect(Int(response.status.code) == status, "\(query): \(String(buffer: body))")
                #expect(response.headers["Content-Type"].first == "application/json")
            }
        }
    }

    /// A client that closes its connection is unsubscribed as the connection closes, not at the next write
    /// (heartbeats an hour apart here, so that no write finds it).
    @Test func aClientThatGoesAwayIsUnsubscribedAsItsConnectionCloses() async throws {
        try await LiveTests.withLiveClient(scopes: ["gone"], configure: { $0.liveHeartbeatSeconds = 3600 }) {
            client, server in
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: "127.0.0.1", port: server.client.port!).get()
            let request =
                "GET /v1/live?cursor=\(ScopeCursor().encoded) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(client.token)\r\n\r\n"
            try await channel.writeAndFlush(ByteBuffer(string: request)).get()
            #expect(try await Self.gaugeBecomes("sync_live_subscribers", 1, client), "the stream was held")
            try await channel.close()
            #expect(try await Self.gaugeBecomes("sync_live_subscribers", 0, client), "the subscription ended")
        }
    }

    /// A subscriber that stops reading is dropped back to catch-up once its frames leave the buffer; the
    /// server's memory stays bounded meanwhile; reading again it gets `behind`, pulls, subscribes again and
    /// has every event.
    @Test func aSubscriberThatStopsReadingIsDroppedBackToCatchUp() async throws {
        try await LiveTests.withLiveClient(scopes: ["sl"], configure: { $0.liveBufferBytes = 256 * 1024 }) {
            client, server in
            // A raw connection that sends its request and then reads nothing.
            let group = MultiThreadedEventLoopGroup.singleton
            let channel = try await ClientBootstrap(group: group)
                .channelOption(ChannelOptions.socketOption(.so_rcvbuf), value: 4096)
                .connect(host: "127.0.0.1", port: server.client.port!).get()
            defer { channel.close(promise: nil) }
            try await channel.setOption(ChannelOptions.autoRead, value: false).get()
            let request =
                "GET /v1/live?cursor=\(ScopeCursor().encoded) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(client.token)\r\n\r\n"
            try await channel.writeAndFlush(ByteBuffer(string: request)).get()
            try await Task.sleep(for: .milliseconds(500))

            // Pushes of 10 events with 4 KiB payloads until the server drops the subscriber (at most 32 MiB).
            // What it keeps for the subscriber meanwhile is the scope's ring (bounded, shared) and its channel's
            // outbound buffer, which back-pressure bounds: its writes wait while the socket does not drain. How
            // much goes out before the drop depends on the kernel's socket buffers (a few MiB on loopback), so
            // the test pushes until the drop is counted rather than a fixed amount: 400 pushes took over eight
            // minutes on two cores shared with the whole suite.
            let payload = JSONValue.object(["text": .string(String(repeating: "x", count: 4096))])
            var mostBuffered = 0
            var pushes = 0
            var dropped = false
            while !dropped && pushes < 800 {
                _ = try await client.push((0..<10).map { _ in EventFixtures.event(scope: "sl", payload: payload) })
                pushes += 1
                let (_, metrics) = try await client.execute(HTTPClientRequest(url: client.base + "/metrics"))
                let page = String(buffer: metrics)
                mostBuffered = max(mostBuffered, Self.gauge("sync_live_buffered_bytes", in: page))
                dropped = Self.gauge("sync_live_dropped_total", in: page) == 1
            }
            // The ring's bound, plus the one frame that may exceed it.
            #expect(mostBuffered > 0 && mostBuffered <= 256 * 1024 + 64 * 1024, "buffered \(mostBuffered) bytes")
            try #require(dropped, "not dropped after \(pushes) pushes")

            // Reading again: what was in flight, then `behind`, then the end of the stream.
            let read = try await RawStreamReader.read(channel)
            #expect(read.end == .behind, "\(read)")
            // It catches up by pulling, then subscribes again and follows.
            var cursor = ScopeCursor()
            var pulled = 0
            while true {
                let (page, _) = try await client.pull(PullRequest(cursor: cursor, limit: 1000))
                pulled += page.events.count
                cursor = try ScopeCursor(encoded: page.cursor)
                if !page.hasMore { break }
            }
            #expect(pulled == pushes * 10)
            let again = try await Subscriber.open(client, cursor: cursor)
            defer { again.close() }
            _ = try await client.push([EventFixtures.event(scope: "sl")])
            let next = Int64(pushes * 10 + 1)
            let (events, _) = try await Self.collect(again, from: &cursor, until: ["sl": next])
            #expect(events.map { $0.seq ?? -1 } == [next])
        }
    }
}

extension LiveStreamTests {
    /// Whether the server's gauge `name` reads `value` within 30 s (it is read every 20 ms; the bound only
    /// catches what never happens).
    static func gaugeBecomes(_ name: String, _ value: Int, _ client: LiveTests.LiveClient) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let (_, metrics) = try await client.execute(HTTPClientRequest(url: client.base + "/metrics"))
            if gauge(name, in: String(buffer: metrics)) == value { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// The value of an unlabelled gauge in a Prometheus text page.
    static func gauge(_ name: String, in page: String) -> Int {
        for line in page.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Int(Double(line.split(separator: " ").last ?? "") ?? 0)
        }
        return 0
    }
}

/// Reads what a raw channel has been sent until a `behind` message, the channel's close, or 30 s of its event
/// loop's time without a byte: bounded by progress, not by a time for the whole read (a loaded machine sends
/// the megabytes in flight slowly, but it sends them). The 30 s are counted in ticks of a 100 ms task on the
/// channel's event loop, not on the wall clock: with a second test run beside this one, the process's event
/// loops (the server's too, in the same process) went without a turn for over 30 s, and a wall-clock bound
/// then counted the machine's load as the server's silence.
enum RawStreamReader {
    enum End: Equatable {
        /// The stream's last message (the server closes the connection after it).
        case behind
        case closed
        case idle
    }

    /// What was read and how it ended; described by its length and its last bytes (the whole is megabytes).
    struct Read: CustomStringConvertible {
        var end: End
        var bytes: Int
        var head: String
        var tail: String
        var description: String { "ended \(end) after \(bytes) bytes: \(head) … \(tail)" }
    }

    static let behind = "event: behind\ndata: {}\n\n"

    final class Collector: ChannelInboundHandler, @unchecked Sendable {
        // @unchecked: touched only on the channel's event loop, then read after `done` completes.
        typealias InboundIn = ByteBuffer
        var head: [UInt8] = []
        /// The last bytes read: enough to hold the `behind` message across reads.
        var tail: [UInt8] = []
        var bytes = 0
        var finished = false
        let done: EventLoopPromise<Read>
        var ticker: RepeatedTask?
        /// Ticks of the loop since the last byte.
        var quiet = 0
        static let idleTicks = 300

        init(done: EventLoopPromise<Read>) { self.done = done }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            bytes += buffer.readableBytes
            let chunk = buffer.readableBytesView
            if head.count < 200 { head += chunk.prefix(200 - head.count) }
            tail += chunk.suffix(512)
            if tail.count > 512 { tail.removeFirst(tail.count - 512) }
            quiet = 0
            // The stream's last message (followed by the chunked body's end).
            if String(decoding: tail, as: UTF8.self).contains(RawStreamReader.behind) { finish(.behind) }
        }

        /// Starts counting the loop's ticks; 300 in a row without a byte end the read.
        func startTicking(on loop: any EventLoop) {
            ticker = loop.scheduleRepeatedTask(initialDelay: .milliseconds(100), delay: .milliseconds(100)) { _ in
                self.quiet += 1
                if self.quiet >= Self.idleTicks { self.finish(.idle) }
            }
        }

        func channelInactive(context: ChannelHandlerContext) { finish(.closed) }

        func finish(_ end: End) {
            guard !finished else { return }
            finished = true
            ticker?.cancel()
            done.succeed(
                Read(
                    end: end, bytes: bytes, head: String(decoding: head, as: UTF8.self),
                    tail: String(decoding: tail, as: UTF8.self)))
        }
    }

    static func read(_ channel: any Channel) async throws -> Read {
        let done = channel.eventLoop.makePromise(of: Read.self)
        let collector = Collector(done: done)
        try await channel.pipeline.addHandler(collector).get()
        try await channel.setOption(ChannelOptions.autoRead, value: true).get()
        channel.read()
        channel.eventLoop.execute { collector.startTicking(on: channel.eventLoop) }
        return try await done.futureResult.get()
    }
}
