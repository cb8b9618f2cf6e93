import NIOCore
import NIOPosix
import PostgresNIO
import Prometheus
import SyncServerTesting
import Synchronization
import Testing

@testable import SyncServer

/// An event loop's pool (`LoopPool`) opens all of its connections at start and keeps them, and pings those that
/// no lease has used for its keep-alive interval, never one that a lease holds.
@Suite struct LoopPoolTests {
    @Test func aLoopsPoolKeepsItsConnectionsAndPingsOnlyTheIdleOnes() async throws {
        try await TestDatabase.with { testDatabase in
            let loop = try #require(LoopExecutors.singleton.loops.first)
            let executor = try #require(LoopExecutors.singleton.executor(for: loop))
            let pool = LoopPool(
                configuration: Database.clientConfiguration(testDatabase.url, poolSize: 1), size: 3,
                keepAlive: .milliseconds(300), loop: loop, logger: TestDatabase.logger)
            let shared = PostgresClient(
                configuration: Database.clientConfiguration(testDatabase.url, poolSize: 1),
                backgroundLogger: TestDatabase.logger)
            let metrics = ServerMetrics(factory: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
            let database = Database(
                client: shared, queueLimit: 16, acquireTimeout: .seconds(20), metrics: metrics,
                loopPools: [ObjectIdentifier(loop): pool])
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await shared.run() }
                group.addTask {
                    try await LoopPoolService(pool: pool, executor: executor, logger: TestDatabase.logger).run()
                }
                // Learned at start, without a request: all three, open.
                try await Self.eventually("the pool knows its 3 connections") { pool.known == 3 }
                let open = try await Self.backends(shared)
                #expect(open.count == 3, "\(open)")

                // A lease holds one connection across several intervals: the other two are pinged, it is not.
                let release = Mutex<CheckedContinuation<Void, Never>?>(nil)
                let held = Mutex<Int?>(nil)
                group.addTask {
                    try await withTaskExecutorPreference(executor) {
                        try await database.withConnection { connection in
                            let pid = try await Self.pid(connection)
                            held.withLock { $0 = pid }
                            await withCheckedContinuation { continuation in
                                release.withLock { $0 = continuation }
                            }
                        }
                    }
                }
                try await Self.eventually("the lease is held") { held.withLock { $0 } != nil }
                try await Self.eventually("the two idle connections are pinged") {
                    let backends = try await Self.backends(shared)
                    return backends.values.count { $0 == "SELECT 1" } == 2
                }
                // Two more intervals with the lease held.
                try await Task.sleep(for: .milliseconds(700))
                let heldPid = try #require(held.withLock { $0 })
                let whileHeld = try await Self.backends(shared)
                #expect(whileHeld[heldPid] == "SELECT pg_backend_pid()", "\(whileHeld)")
                #expect(whileHeld.count == 3)

                // Given back, it is pinged too once idle for an interval.
                try await Self.eventually("the lease is given back") {
                    release.withLock { continuation in
                        continuation?.resume()
                        defer { continuation = nil }
                        return continuation != nil
                    }
                }
                try await Self.eventually("the connection given back is pinged") {
                    try await Self.backends(shared)[heldPid] == "SELECT 1"
                }
                #expect(pool.known == 3)
                group.cancelAll()
            }
        }
    }

    /// The backends of the test's database other than the caller's, by process id, with their last query.
    static func backends(_ client: PostgresClient) async throws -> [Int: String] {
        var backends: [Int: String] = [:]
        let rows = try await client.query(
            """
            SELECT pid, query FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
            """, logger: TestDatabase.logger)
        for try await (pid, query) in rows.decode((Int, String).self) { backends[pid] = query }
        return backends
    }

    static func pid(_ connection: PostgresConnection) async throws -> Int {
        var pid = 0
        let rows = try await connection.query("SELECT pg_backend_pid()", logger: TestDatabase.logger)
        for try await (value) in rows.decode(Int.self) { pid = value }
        return pid
    }

    /// Waits up to half a minute for `condition`, recording an issue if it never holds.
    static func eventually(
        _ what: String, _ condition: @Sendable () async throws -> Bool,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        // Two minutes: a bound against a hang, not a measure (a loaded machine can take seconds per step).
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("never: \(what)", sourceLocation: sourceLocation)
    }
}
