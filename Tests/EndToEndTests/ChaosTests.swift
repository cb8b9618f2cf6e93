import Foundation
import Testing

/// The quick version of `make chaos`: two sync-servers behind a real nginx, sync-load's devices through it,
/// one server killed, PostgreSQL killed, and connections reset mid-response by sync-fault-proxy under load;
/// every verdict must pass.
@Suite struct ChaosTests {
    struct Row: Decodable {
        var scenario: String
        var events: Int
        var lost: Int
        var duplicated: Int
        var diverged: Int
        var gaps: Int
        var passed: Bool
        var fault: String
        /// The faults the proxy counted, in a network scenario.
        var proxyFaults: Int?
    }

    @Test func aServerAndPostgreSQLKilledAndConnectionsResetUnderLoadLoseNothing() async throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("chaos-\(UUID())")
        defer { try? FileManager.default.removeItem(at: out) }
        let scenarios = ["server-kill-one", "postgres-kill", "net-reset"]
        let result = try await Stack.runCapturing(
            "/usr/bin/env", ["bash", Stack.repositoryRoot.appendingPathComponent("scripts/chaos.sh").path],
            environment: [
                "CHAOS_QUICK": "1", "CHAOS_BIN": Stack.productsDirectory.path, "CHAOS_OUT": out.path,
                "CHAOS_SCENARIOS": scenarios.joined(separator: " "),
            ])
        #expect(result.status == 0, "\(result.stderr.suffix(4000))")
        for scenario in scenarios {
            let data = try Data(contentsOf: out.appendingPathComponent("\(scenario).json"))
            let row = try JSONDecoder().decode(Row.self, from: data)
            #expect(row.passed, "\(scenario): \(String(decoding: data, as: UTF8.self))")
            #expect(
                row.events > 0 && row.lost == 0 && row.duplicated == 0 && row.diverged == 0 && row.gaps == 0,
                "\(scenario): \(String(decoding: data, as: UTF8.self))")
            // The fault was really injected, during the load.
            if scenario.hasPrefix("net-") {
                #expect(row.fault.contains("reset"), "\(row.fault)")
                #expect((row.proxyFaults ?? 0) > 0, "the proxy reset no connection")
            } else {
                #expect(row.fault.contains("kill -9"), "\(row.fault)")
            }
            #expect(result.stdout.contains("| \(scenario) |"))
        }
    }
}
