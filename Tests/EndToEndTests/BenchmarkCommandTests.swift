import Foundation
import Testing

/// `sync-bench rebuild` runs end to end on a small log and prints the JSON its users read.
@Suite struct BenchmarkCommandTests {
    struct RebuildResult: Decodable {
        var events: Int
        var notes: Int
        var workers: Int
        var rebuild_ms: Double
        var events_per_s: Double
        var baseline_insert_ms: Double
        var incremental_10_ms: Double
    }

    @Test func rebuildBenchmarkPrintsItsNumbersAndTimesAnExistingStore() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sync-bench-test-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let bench = Stack.productsDirectory.appendingPathComponent("sync-bench").path
        let output = try Stack.run(
            bench, ["rebuild", "--events", "600", "--notes", "40", "--runs", "1", "--directory", directory.path])
        let line = try #require(output.split(separator: "\n").last)
        let result = try JSONDecoder().decode(RebuildResult.self, from: Data(line.utf8))
        #expect(result.events == 600 && result.notes == 40 && result.workers >= 1)
        #expect(result.rebuild_ms > 0 && result.events_per_s > 0)
        #expect(result.baseline_insert_ms > 0 && result.incremental_10_ms > 0)

        // The store it left: 600 events plus the 10 of the incremental run, rebuilt on one thread.
        let existing = try Stack.run(
            bench,
            [
                "rebuild", "--existing", directory.appendingPathComponent("rebuild.sqlite").path, "--runs", "1",
                "--workers", "1",
            ])
        #expect(existing.contains("(610 events) on 1 threads"), "\(existing)")
    }
}
