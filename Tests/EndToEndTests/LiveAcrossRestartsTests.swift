import Foundation
import NotesStore
import SyncEngine
import SyncEngineHTTPClient
import SyncModels
import Testing

/// A device that only follows (`SyncEngine.run()` on the live stream, with no interval sync and no
/// long-poll to fall back on) gets every event another device pushes exactly once, across a `kill -9` of the
/// real `sync-server` and its restart: the stream ends, the engine reconnects from its cursor, and what was
/// pushed while it was away comes with the next frames or the catch-up before them.
@Suite struct LiveAcrossRestartsTests {
    @Test func aFollowingDeviceHasEveryEventOnceAcrossAServerKillAndRestart() async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: ["team-1"])
        let url = URL(string: stack.serverURL)!

        let reader = try NotesClient.open(path: stack.directory.appendingPathComponent("reader.sqlite").path)
        var following = SyncEngine.Configuration()
        following.interval = nil
        following.longPoll = nil
        following.backoff = BackoffPolicy(base: .milliseconds(100), cap: .seconds(1))
        let engine = try SyncEngine(
            store: reader.store, transport: HTTPClientTransport(baseURL: url, token: token), configuration: following)
        let running = Task { await engine.run() }
        defer { running.cancel() }

        let writer = try NotesClient.open(path: stack.directory.appendingPathComponent("writer.sqlite").path)
        var pushing = SyncEngine.Configuration()
        pushing.live = false
        let push = try SyncEngine(
            store: writer.store, transport: HTTPClientTransport(baseURL: url, token: token), configuration: pushing)

        for round in 0..<3 {
            for index in 0..<5 { _ = try await writer.create(scope: "team-1", title: "round \(round) note \(index)") }
            try await again { try await push.syncNow() }
            let onServer = try #require(Int(try await stack.sql("SELECT count(*) FROM events").first ?? ""))
            #expect(
                try await Self.reaches(onServer, reader), "round \(round): the follower has all \(onServer) events")
            if round < 2 {
                // The stream breaks with the server; events pushed while it is down come after the restart.
                await stack.killServer()
                try await stack.startServer()
            }
        }
        #expect(try await reader.exportState() == writer.exportState())
    }

    /// Whether `reader` holds `count` confirmed events within 60 s (a hang guard: a frame comes within
    /// milliseconds, a reconnection within the engine's backoff of a second).
    static func reaches(_ count: Int, _ reader: NotesClient) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let confirmed = try await reader.store.counts()[.confirmed] ?? 0
            if confirmed == count { return true }
            if confirmed > count { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }
}
