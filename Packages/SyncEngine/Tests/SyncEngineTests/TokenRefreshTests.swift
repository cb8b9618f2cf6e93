import Foundation
import SyncEngineTesting
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import SyncProtocol
import Synchronization
import Testing

@testable import SyncEngine

/// Short-lived tokens (issue 47): with a token provider, a token the server refuses is replaced and what
/// failed is done again, without a pause and without pushing anything twice; without one, sync pauses as
/// before.
@Suite struct TokenRefreshTests {
    /// A transport that lets through only requests made with a token the "server" still takes, and answers
    /// the others 401 `auth.expired`, as the real server does; the provider mints the tokens it takes.
    final class TokenGate: SyncTransport {
        let inner: InMemoryTransport
        let state = Mutex<(token: String?, valid: Set<String>, minted: Int, refused: Int)>((nil, [], 0, 0))

        init(inner: InMemoryTransport, token: String) {
            self.inner = inner
            state.withLock {
                $0.token = token
                $0.valid = [token]
            }
        }

        func setToken(_ token: String?) { state.withLock { $0.token = token } }

        /// The token the server takes from now on (the one in use expires).
        func expireAll() { state.withLock { $0.valid = [] } }

        /// A provider that mints a token the server takes; `failing` makes it throw instead.
        func provider(failing: Bool = false) -> @Sendable () async throws -> String {
            { [self] in
                if failing { throw CancellationError() }
                return state.withLock { state in
                    state.minted += 1
                    let token = "token-\(state.minted)"
                    state.valid.insert(token)
                    return token
                }
            }
        }

        func check() throws(SyncFailure) {
            let taken = state.withLock { state in
                let taken = state.token.map { state.valid.contains($0) } ?? false
                if !taken { state.refused += 1 }
                return taken
            }
            guard taken else {
                throw SyncFailure.from(status: 401, code: "auth.expired", message: "the token has expired")
            }
        }

        func sync(_ request: SyncRequest) async throws(SyncFailure) -> TransportExchange {
            try check()
            return try await inner.sync(request)
        }

        func pull(_ request: PullRequest) async throws(SyncFailure) -> PullResponse {
            try check()
            return try await inner.pull(request)
        }
    }

    static func replica(_ directory: TemporaryDirectory, server: InMemorySyncServer, failing: Bool = false)
        throws -> (EventStore, TokenGate, SyncEngine)
    {
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        let gate = TokenGate(inner: InMemoryTransport(server: server), token: "token-0")
        var configuration = SyncEngine.Configuration()
        configuration.tokenProvider = gate.provider(failing: failing)
        configuration.live = false
        return (store, gate, try SyncEngine(store: store, transport: gate, configuration: configuration))
    }

    @Test func aRefusedTokenIsReplacedAndTheCycleDoneAgainOnce() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let (store, gate, engine) = try Self.replica(directory, server: server)
        try await store.append([title("note:1", "before")])
        try await engine.syncNow()
        #expect(gate.state.withLock { $0.minted } == 0, "the first token was still good")

        gate.expireAll()
        try await store.append([title("note:1", "after the token expired")])
        try await engine.syncNow()
        #expect(gate.state.withLock { ($0.minted, $0.refused) } == (1, 1), "one refusal, one new token")
        #expect(await server.events(in: "team-1").count == 2, "each event once")
        #expect(try await store.counts() == [.pending: 0, .confirmed: 2, .rejected: 0])
        #expect(!engine.status.pausedForAuthentication)
        let kinds = try await engine.journal.entries().map(\.kind)
        #expect(kinds.contains("token") && !kinds.contains("pause"), "\(kinds)")
    }

    @Test func aProviderThatFailsLeavesARetryNotAPause() async throws {
        let directory = try TemporaryDirectory()
        let (store, gate, engine) = try Self.replica(directory, server: InMemorySyncServer(), failing: true)
        gate.expireAll()
        try await store.append([title("note:1", "offline edit")])
        do {
            try await engine.syncNow()
            Issue.record("the cycle succeeded with an expired token")
        } catch {
            #expect(error.isRetryable, "\(error)")
        }
        #expect(!engine.status.pausedForAuthentication)
        #expect(try await store.pendingEvents().count == 1)
        let entries = try await engine.journal.entries()
        #expect(entries.contains { $0.kind == "token" && $0.detail.contains("failed") })
        #expect(!entries.contains { $0.detail.contains("token-") }, "no token in the journal")
    }

    /// `run()`: a token that expires between cycles is replaced on the next one; the edits made meanwhile
    /// arrive once each.
    @Test func runGoesOnThroughExpiringTokens() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let (store, gate, engine) = try Self.replica(directory, server: server)
        let running = Task { await engine.run() }
        defer { running.cancel() }
        for round in 1...3 {
            gate.expireAll()
            try await store.append([title("note:\(round)", "round \(round)")])
            // Two minutes: a bound against a hang, not a measure.
            let deadline = ContinuousClock.now + .seconds(120)
            while await server.events(in: "team-1").count < round, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        #expect(await server.events(in: "team-1").count == 3)
        #expect(gate.state.withLock { $0.minted } >= 3)
        #expect(!engine.status.pausedForAuthentication)
        running.cancel()
        await running.value
    }
}
