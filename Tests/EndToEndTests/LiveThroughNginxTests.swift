import Foundation
import NotesStore
import SyncEngine
import SyncEngineHTTPClient
import SyncModels
import SyncProtocol
import Synchronization
import Testing

/// The live stream through nginx (`deploy/nginx/sync.conf`) in front of two `sync-server` processes on one
/// PostgreSQL: a push taken by either server reaches the subscribers held by both. A server learns of the
/// other's commits through PostgreSQL `NOTIFY` and reads their events before it writes the frame.
@Suite struct LiveThroughNginxTests {
    @Test func aPushToEitherServerReachesTheSubscribersOfBoth() async throws {
        // Heartbeats every 5 s: a subscriber that hears six in a row without the frame it waits for is stuck
        // (a frame comes within milliseconds of its push). Shorter ones would make the transport's own
        // watchdog (three silent heartbeats) trip on a machine busy with the whole test suite.
        let stack = try await Stack(serverEnvironment: ["SYNC_LIVE_HEARTBEAT_SECONDS": "5"])
        let second = try await ServerProcess(stack: stack)
        let nginx = try await Nginx(upstreams: [stack.port, second.port], directory: stack.directory)
        let token = try await stack.token(scopes: ["live-1"])

        // Six subscribers through nginx: its round-robin gives each server some of them.
        let front = HTTPClientTransport(baseURL: URL(string: nginx.url)!, token: token)
        var subscribers: [Subscriber] = []
        defer { for subscriber in subscribers { subscriber.reader.cancel() } }
        for _ in 0..<6 {
            let stream = try await again {
                try await front.live(PullRequest(cursor: ScopeCursor(), scopes: ["live-1"]))
            }
            subscribers.append(Subscriber(stream, through: front, scope: "live-1"))
        }
        for subscriber in subscribers {
            let first = try await subscriber.wait { !$0.isEmpty }.first
            guard case .subscribed? = first else {
                Issue.record("a subscriber's first message was \(String(describing: first)), not `live`")
                return
            }
        }
        var held: [Int] = []
        for url in [stack.serverURL, second.url] { held.append(try await Self.gauge("sync_live_subscribers", of: url)) }
        try #require(held.allSatisfy { $0 >= 1 } && held.reduce(0, +) == 6, "subscribers per server: \(held)")

        // Notes pushed to each server directly, then through nginx.
        var pushed = 0
        for (index, url) in [stack.serverURL, second.url, nginx.url].enumerated() {
            let device = try NotesClient.open(
                path: stack.directory.appendingPathComponent("device-\(index).sqlite").path)
            for note in 0..<3 { _ = try await device.create(scope: "live-1", title: "note \(note) via \(url)") }
            let transport = HTTPClientTransport(baseURL: URL(string: url)!, token: token)
            var configuration = SyncEngine.Configuration()
            configuration.live = false
            let engine = try SyncEngine(store: device.store, transport: transport, configuration: configuration)
            try await again { try await engine.syncNow() }
            pushed += 3
        }
        let logged = try await stack.sql("SELECT event_id::text FROM events WHERE scope = 'live-1' ORDER BY seq")
        #expect(logged.count >= pushed)

        // Every subscriber has every event once, in order, as the log has them.
        for (index, subscriber) in subscribers.enumerated() {
            let messages = try await subscriber.wait { messages in
                messages.last.map { Self.head(of: $0) >= Int64(logged.count) || Self.ends($0) } ?? false
            }
            var ids: [String] = []
            var position: Int64 = 0
            for message in messages.dropFirst() {
                guard case .frame(let frame) = message else {
                    Issue.record("subscriber \(index) got \(message) at \(position) of \(logged.count)")
                    break
                }
                #expect(frame.placement(at: position) == .next, "subscriber \(index): \(frame.after) at \(position)")
                #expect(frame.events.map { $0.seq ?? -1 } == Array(frame.after + 1...frame.head))
                ids += frame.events.map { $0.id.description }
                position = frame.head
            }
            #expect(ids == logged, "subscriber \(index)")
        }
    }

    /// The head a message reaches: a frame's, or 0.
    static func head(of message: LiveMessage) -> Int64 {
        if case .frame(let frame) = message { return frame.head }
        return 0
    }

    /// Whether the server ends the stream after this message.
    static func ends(_ message: LiveMessage) -> Bool {
        switch message {
        case .behind, .error: true
        default: false
        }
    }

    /// An unlabelled gauge of a server's `/metrics` page.
    static func gauge(_ name: String, of server: String) async throws -> Int {
        let page = try await Stack.run("/usr/bin/env", ["curl", "-sf", server + "/metrics"])
        for line in page.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Int(Double(line.split(separator: " ").last ?? "") ?? 0)
        }
        return 0
    }

    /// One stream, read by a task of its own from the moment it opens. Messages never wait in a buffer
    /// while the test pushes, so the heartbeats counted while waiting are heartbeats that arrived while
    /// waiting (read later from a buffer, those queued during a slow push would pass for silence).
    ///
    /// A stream that fails with a retryable failure (the transport's watchdog: no byte for three heartbeats,
    /// which a machine loaded by a second test run has caused) is opened again from the head of the last
    /// frame, as an app's engine does: the frames then follow on from where they stopped, and the test still
    /// checks that every event arrives once and in order. Its `subscribed` message is not kept.
    struct Subscriber {
        /// The messages read so far, heartbeats apart; how many heartbeats; whether the stream ended; how many
        /// times it was opened again.
        struct Read {
            var messages: [LiveMessage] = []
            var heartbeats = 0
            var ended: (any Error)?
            var closed = false
            var reopened = 0
        }

        let read: SharedRead
        let reader: Task<Void, Never>

        final class SharedRead: Sendable {
            let state = Mutex(Read())
        }

        init(_ messages: LiveMessages, through transport: HTTPClientTransport, scope: Scope) {
            let read = SharedRead()
            self.read = read
            reader = Task {
                var stream = messages
                var cursor = ScopeCursor()
                while true {
                    do {
                        for try await message in stream {
                            if case .frame(let frame) = message { cursor.advance(scope, to: frame.head) }
                            read.state.withLock {
                                switch message {
                                case .heartbeat: $0.heartbeats += 1
                                case .subscribed where $0.reopened > 0 && !$0.messages.isEmpty: break
                                default: $0.messages.append(message)
                                }
                            }
                        }
                        read.state.withLock { $0.closed = true }
                        return
                    } catch let failure as SyncFailure where failure.isRetryable && !Task.isCancelled {
                        read.state.withLock { $0.reopened += 1 }
                        do {
                            stream = try await again {
                                try await transport.live(PullRequest(cursor: cursor, scopes: [scope]))
                            }
                        } catch {
                            read.state.withLock {
                                $0.ended = error
                                $0.closed = true
                            }
                            return
                        }
                    } catch {
                        read.state.withLock {
                            $0.ended = error
                            $0.closed = true
                        }
                        return
                    }
                }
            }
        }

        /// The messages read once `done` holds for them.
        /// - Throws: when six heartbeats arrive while waiting (a frame comes within milliseconds of its push),
        ///   or when the stream closes first.
        func wait(until done: @Sendable ([LiveMessage]) -> Bool) async throws -> [LiveMessage] {
            let start = read.state.withLock { $0.heartbeats }
            while true {
                let now = read.state.withLock { $0 }
                if done(now.messages) { return now.messages }
                if now.closed {
                    let reason = now.ended.map { "\($0)" } ?? "by the server"
                    throw Stack.StackError("the stream closed after \(now.messages.count) messages: \(reason)")
                }
                if now.heartbeats - start >= 6 {
                    throw Stack.StackError("six heartbeats and no message; so far: \(now.messages)")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }
}
