import Foundation
import PostgresNIO
import Prometheus
import SyncProtocol
import SyncServerTesting
import Testing

@testable import SyncServer

/// `Database.withConnection`'s lease on a pool of one connection, held by another lease: the timeout answers
/// 503, a cancelled caller stops waiting, and neither leaves anything behind in the pool.
@Suite struct DatabaseLeaseTests {
    /// Runs `body` with a `Database` on a fresh database whose pool has one connection.
    static func withDatabase(
        acquireTimeout: Duration, _ body: @Sendable (Database) async throws -> Void
    ) async throws {
        try await TestDatabase.with { testDatabase in
            let client = PostgresClient(
                configuration: Database.clientConfiguration(testDatabase.url, poolSize: 1),
                backgroundLogger: TestDatabase.logger)
            try await client.whileRunning { client in
                // The pool's one connection opened first, without the lease's timeout: opening it on a loaded
                // machine (the server's suites on the Citus cluster) can take longer than the timeout under test.
                _ = try await client.withConnection { try await Self.selectOne($0) }
                let metrics = ServerMetrics(factory: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
                try await body(
                    Database(client: client, queueLimit: 16, acquireTimeout: acquireTimeout, metrics: metrics))
            }
        }
    }

    static func selectOne(_ connection: PostgresConnection) async throws -> Int {
        var value = 0
        for try await (one) in try await connection.query("SELECT 1", logger: TestDatabase.logger).decode(Int.self) {
            value = one
        }
        return value
    }

    /// Holds the pool's connection until `release` finishes; returns once it is held, and what the holder's
    /// statement read after the release.
    static func hold(_ database: Database, until release: AsyncStream<Void>) async throws -> Task<Int, any Error> {
        let (held, signal) = AsyncStream<Void>.makeStream()
        let holder = Task {
            // A holder that failed to lease ends the wait below (its error is the test's at `holder.value`).
            defer { signal.finish() }
            return try await database.withConnection { connection in
                signal.yield()
                for await _ in release {}
                return try await Self.selectOne(connection)
            }
        }
        for await _ in held { break }
        return holder
    }

    /// The result of `body`, or nil and an issue when it has not ended within a minute (it is cancelled then).
    /// The bound is on the lease alone, not on the test: making and dropping a database waits for checkpoints,
    /// which under the server's suites on the Citus cluster took up to a minute.
    static func withinAMinute<T: Sendable>(_ what: String, _ body: @escaping @Sendable () async throws -> T)
        async throws -> T?
    {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                return nil
            }
            let first = try await group.next()!
            group.cancelAll()
            if first == nil { Issue.record("\(what) did not end within a minute") }
            return first
        }
    }

    @Test func aLeaseWaitingPastItsTimeoutIsAnswered503AndLeavesThePool() async throws {
        try await Self.withDatabase(acquireTimeout: .milliseconds(300)) { database in
            let (release, finish) = AsyncStream<Void>.makeStream()
            // The holder takes the pool's connection through the same pool without the timeout under test: on
            // a loaded machine its own lease may take longer than 300 ms to be resumed.
            let patient = Database(
                client: database.client, queueLimit: 16, acquireTimeout: .seconds(3600),
                metrics: ServerMetrics(factory: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry())))
            let holder = try await Self.hold(patient, until: release)
            let started = ContinuousClock.now
            let answer = try await Self.withinAMinute("a lease past its timeout") { () -> String in
                do {
                    _ = try await database.withConnection { try await Self.selectOne($0) }
                    return "a lease got a connection the pool did not have"
                } catch let error as SyncProtocolError {
                    return "\(error.code.rawValue): \(error.message)"
                }
            }
            #expect(answer == "server.unavailable: no database connection became available in time")
            #expect(ContinuousClock.now - started >= .milliseconds(300))
            finish.finish()
            #expect(try await holder.value == 1)
            // The request that timed out left the pool's queue: the next lease gets the connection.
            #expect(try await database.withConnection { try await Self.selectOne($0) } == 1)
        }
    }

    /// Each pool's gauge of connections in use counts its own leases: a Citus node's pool leaves the database's
    /// (`sync_db_connections_in_use`, the admin status's figure) as it is, and the other way round.
    @Test func eachPoolsGaugeCountsItsOwnLeases() async throws {
        try await TestDatabase.with { testDatabase in
            let client = PostgresClient(
                configuration: Database.clientConfiguration(testDatabase.url, poolSize: 2),
                backgroundLogger: TestDatabase.logger)
            try await client.whileRunning { client in
                let registry = PrometheusCollectorRegistry()
                let metrics = ServerMetrics(factory: PrometheusMetricsFactory(registry: registry))
                let main = Database(client: client, queueLimit: 16, acquireTimeout: .seconds(3600), metrics: metrics)
                let node = Database(
                    client: client, queueLimit: 16, acquireTimeout: .seconds(3600), metrics: metrics, node: "group 1")
                @Sendable func gauges() -> (main: Int, node: Double?) {
                    var buffer: [UInt8] = []
                    registry.emit(into: &buffer)
                    let line = String(decoding: buffer, as: UTF8.self).split(separator: "\n").first {
                        $0.hasPrefix("sync_db_node_connections_in_use{")
                    }
                    return (
                        metrics.connectionsInUse.value,
                        line.flatMap { $0.split(separator: " ").last.flatMap { Double($0) } }
                    )
                }
                try await node.withConnection { _ in
                    #expect(gauges().main == 0 && gauges().node == 1)
                    try await main.withConnection { _ in
                        #expect(gauges().main == 1 && gauges().node == 1)
                    }
                    #expect(gauges().main == 0)
                }
                #expect(gauges().main == 0 && gauges().node == 0)
            }
        }
    }

    @Test func aCallerCancelledWhileWaitingStopsWaiting() async throws {
        try await Self.withDatabase(acquireTimeout: .seconds(3600)) { database in
            let (release, finish) = AsyncStream<Void>.makeStream()
            let holder = try await Self.hold(database, until: release)
            let waiter = Task { try await database.withConnection { try await Self.selectOne($0) } }
            try await Task.sleep(for: .milliseconds(100))
            waiter.cancel()
            // Ends now, not an hour later, and without the connection.
            let ran = try await Self.withinAMinute("a cancelled lease") { () -> Bool in
                if case .success = await waiter.result { return true }
                return false
            }
            if ran == true { Issue.record("a cancelled lease ran") }
            finish.finish()
            #expect(try await holder.value == 1)
            #expect(try await database.withConnection { try await Self.selectOne($0) } == 1)
        }
    }
}
