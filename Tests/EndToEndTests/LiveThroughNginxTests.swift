import Foundation
import NotesStore
import SyncEngine
import SyncEngineHTTPClient
import SyncModels
import SyncProtocol
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
        let token = try stack.token(scopes: ["live-1"])

        // Six subscribers through nginx: its round-robin gives each server some of them.
        let front = HTTPClientTransport(baseURL: URL(string: nginx.url)!, token: token)
        var subscribers: [Subscriber] = []
        for _ in 0..<6 {
            let messages = try await front.live(PullRequest(cursor: ScopeCursor(), scopes: ["live-1"]))
            subscribers.append(Subscriber(messages: messages))
        }
        for index in subscribers.indices {
            guard case .subscribed? = try await subscribers[index].next() else {
                Issue.record("a subscriber's first message was not `live`")
                return
            }
        }
        let held = try [stack.serverURL, second.url].map { try Self.gauge("sync_live_subscribers", of: $0) }
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
            try await SyncEngine(store: device.store, transport: transport, configuration: configuration).syncNow()
            pushed += 3
        }
        let logged = try stack.sql("SELECT event_id::text FROM events WHERE scope = 'live-1' ORDER BY seq")
        #expect(logged.count >= pushed)

        // Every subscriber has every event once, in order, as the log has them.
        for index in subscribers.indices {
            var ids: [String] = []
            var position: Int64 = 0
            while position < Int64(logged.count) {
                guard let message = try await subscribers[index].next() else {
                    Issue.record("subscriber \(index)'s stream ended at \(position) of \(logged.count)")
                    break
                }
                guard case .frame(let frame) = message else { continue }
                #expect(frame.placement(at: position) == .next, "subscriber \(index): \(frame.after) at \(position)")
                #expect(frame.events.map { $0.seq ?? -1 } == Array(frame.after + 1...frame.head))
                ids += frame.events.map { $0.id.description }
                position = frame.head
            }
            #expect(ids == logged, "subscriber \(index)")
        }
    }

    /// An unlabelled gauge of a server's `/metrics` page.
    static func gauge(_ name: String, of server: String) throws -> Int {
        let page = try Stack.run("/usr/bin/env", ["curl", "-sf", server + "/metrics"])
        for line in page.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Int(Double(line.split(separator: " ").last ?? "") ?? 0)
        }
        return 0
    }

    /// One stream's messages, read in order, heartbeats skipped.
    struct Subscriber {
        let messages: LiveMessages
        var iterator: LiveMessages.AsyncIterator

        init(messages: LiveMessages) {
            self.messages = messages
            iterator = messages.makeAsyncIterator()
        }

        /// The next message other than a heartbeat; nil when the stream ended.
        /// - Throws: after six heartbeats in a row (a frame comes within milliseconds of its push).
        mutating func next() async throws -> LiveMessage? {
            var heartbeats = 0
            while let message = try await iterator.next() {
                guard message == .heartbeat else { return message }
                heartbeats += 1
                if heartbeats == 6 { throw Stack.StackError("six heartbeats and no message") }
            }
            return nil
        }
    }
}
