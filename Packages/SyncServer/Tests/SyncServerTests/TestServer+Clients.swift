import Foundation
import Logging
import PostgresNIO
import Prometheus
import SyncProtocol
import SyncServerTesting

@testable import SyncServer

extension TestServer {
    /// Runs `body` with a running `PostgresClient` on `database`.
    static func withClient<Result: Sendable>(
        _ database: TestDatabase, _ body: @Sendable (PostgresClient) async throws -> Result
    ) async throws -> Result {
        let client = PostgresClient(
            configuration: Database.clientConfiguration(database.url, poolSize: 2),
            backgroundLogger: TestDatabase.logger)
        return try await client.whileRunning(body)
    }

    /// An API value for inspecting routes (its services are never run).
    static func api() async throws -> SyncAPI {
        let client = PostgresClient(
            configuration: Database.clientConfiguration(try DatabaseURL("postgres://x@127.0.0.1:1/x"), poolSize: 1),
            backgroundLogger: TestDatabase.logger)
        let registry = PrometheusCollectorRegistry()
        let metrics = ServerMetrics(factory: PrometheusMetricsFactory(registry: registry))
        let database = Database(client: client, queueLimit: 1, acquireTimeout: .seconds(1), metrics: metrics)
        let hub = LongPollHub(client: client, logger: TestDatabase.logger, metrics: metrics)
        return SyncAPI(
            tokens: await TokenVerifier(secret: secret), limiter: RequestLimiter(limit: 1),
            push: PushService(
                database: database, rules: [], limits: .standard, isCommutative: { _ in false }, hub: hub,
                metrics: metrics),
            pull: PullService(database: database, limits: .standard, hub: hub), codec: WireCodec(), gzipLevel: 1,
            metrics: metrics, registry: registry, readiness: Readiness(database: database))
    }
}
