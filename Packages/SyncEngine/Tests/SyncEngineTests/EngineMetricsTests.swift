import Foundation
import MetricsTestKit
import SyncEngineTesting
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import Testing

@testable import SyncEngine

/// The engine's metrics go to the factory its configuration names: here a verification through a transport
/// without checksums counts its scope as unavailable, and nothing is repaired or in conflict.
@Suite struct EngineMetricsTests {
    @Test func verificationsAreCountedByOutcome() async throws {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        let metrics = TestMetrics()
        var configuration = SyncEngine.Configuration()
        configuration.metricsFactory = metrics
        configuration.verifyInterval = nil
        let engine = try SyncEngine(
            store: store, transport: InMemoryTransport(server: server), configuration: configuration)
        try await store.append([title("note:1", "one")])
        try await engine.syncNow()
        let results = try await engine.verify()
        #expect(results.map(\.outcome) == [.unavailable])
        #expect(
            try metrics.expectCounter("sync_client_verifications_total", [("outcome", "unavailable")]).totalValue == 1)
        #expect(try metrics.expectCounter("sync_client_verifications_total", [("outcome", "matched")]).totalValue == 0)
        #expect(try metrics.expectCounter("sync_client_repairs_total").totalValue == 0)
        #expect(try metrics.expectGauge("sync_client_open_conflicts").lastValue == 0)
    }
}
