import AsyncHTTPClient
import Foundation
import NotesStore
import SyncEngine
import SyncEngineHTTPClient
import SyncModels
import Testing

/// Both HTTP transports against a real `sync-server`: the same answers, the same failures. The agent uses
/// `HTTPClientTransport`; apps on Apple platforms use `HTTPTransport`.
@Suite struct TransportTests {
    static func transports(_ stack: Stack, token: String?) -> [(String, any SyncTransport)] {
        let url = URL(string: stack.serverURL)!
        return [
            ("URLSession", HTTPTransport(baseURL: url, token: token)),
            ("AsyncHTTPClient", HTTPClientTransport(baseURL: url, token: token)),
        ]
    }

    @Test func bothTransportsSyncTheSameStateIncludingBodiesThatCompressALot() async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: ["team-1"])
        var exports: [Data] = []
        for (index, (name, transport)) in Self.transports(stack, token: token).enumerated() {
            let client = try NotesClient.open(path: stack.directory.appendingPathComponent("\(name).sqlite").path)
            // A body that gzip shrinks about a hundredfold: a client that caps the inflation ratio refuses it.
            try await client.create(scope: "team-1", title: "from \(name)", body: String(repeating: "x", count: 20_000))
            let engine = try SyncEngine(store: client.store, transport: transport)
            try await engine.syncNow()
            if index == 0 { try await engine.syncNow() }
            exports.append(try await client.exportState())
            let status = engine.status
            #expect(status.pending == 0 && status.lastError == nil, "\(name)")
            #expect(status.stablePoints.keys.sorted() == ["team-1"], "the server said the scope's stable point")
            if name == "AsyncHTTPClient" {
                // URLSession on Linux inflates bodies itself and reports the inflated size.
                #expect(status.traffic.receivedWire < status.traffic.receivedRaw, "it received gzip")
            }
        }
        // The second device saw the first one's note; the first syncs again to see the second's.
        let first = try NotesClient.open(path: stack.directory.appendingPathComponent("URLSession.sqlite").path)
        try await SyncEngine(store: first.store, transport: Self.transports(stack, token: token)[0].1).syncNow()
        #expect(try await first.exportState() == exports[1])
    }

    @Test func bothTransportsReportAnInvalidTokenAsAnAuthenticationFailure() async throws {
        let stack = try await Stack()
        for (name, transport) in Self.transports(stack, token: "not-a-token") {
            let client = try NotesClient.open(path: stack.directory.appendingPathComponent("\(name).sqlite").path)
            let engine = try SyncEngine(store: client.store, transport: transport)
            await #expect(throws: SyncFailure.self, "\(name)") { try await engine.syncNow() }
            #expect(engine.status.pausedForAuthentication, "\(name)")
        }
    }

    /// While the server is down, a sync through `HTTPClientTransport` fails at once with the connection's
    /// error, and the engine's own backoff decides when to try again; once the server is back, the next sync
    /// goes through. AsyncHTTPClient by default keeps retrying the connect behind a request, with a backoff
    /// that grows past a minute, and a request after a long outage waited behind that backoff and failed
    /// (`getConnectionFromPoolTimeout`) with the server up again. Here the client's connect timeout is a
    /// minute, so that a request kept waiting for the connect shows as a sync that takes as long.
    @Test func aServerThatIsDownFailsASyncAtOnceAndTheNextOneGoesThroughOnceItIsBack() async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: ["team-1"])
        var configuration = HTTPClientTransport.clientConfiguration
        configuration.timeout.connect = .seconds(60)
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        do {
            let client = try NotesClient.open(path: stack.directory.appendingPathComponent("device.sqlite").path)
            let engine = try SyncEngine(
                store: client.store,
                transport: HTTPClientTransport(baseURL: URL(string: stack.serverURL)!, token: token, client: http))
            try await client.create(scope: "team-1", title: "before")
            try await engine.syncNow()

            await stack.killServer()
            try await client.create(scope: "team-1", title: "while the server is down")
            for attempt in 0..<5 {
                let started = ContinuousClock.now
                await #expect(throws: SyncFailure.self) { try await engine.syncNow() }
                let took = ContinuousClock.now - started
                #expect(took < .seconds(30), "attempt \(attempt) waited \(took) for a connect")
            }
            try await stack.startServer()
            try await engine.syncNow()
            #expect(engine.status.pending == 0)
            try await http.shutdown()
        } catch {
            try? await http.shutdown()
            throw error
        }
    }
}
