import Foundation
import SyncTestSupport
import Testing

/// `sync-bench rebuild` and `sync-bench bootstrap` run end to end on small logs and print the JSON their
/// users read (a smoke run: the numbers are not judged here).
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

    @Test func rebuildBenchmarkPrintsItsNumbersAndTimesAnExistingStore() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sync-bench-test-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let bench = Stack.productsDirectory.appendingPathComponent("sync-bench").path
        let output = try await Stack.run(
            bench, ["rebuild", "--events", "600", "--notes", "40", "--runs", "1", "--directory", directory.path])
        let line = try #require(output.split(separator: "\n").last)
        let result = try JSONDecoder().decode(RebuildResult.self, from: Data(line.utf8))
        #expect(result.events == 600 && result.notes == 40 && result.workers >= 1)
        #expect(result.rebuild_ms > 0 && result.events_per_s > 0)
        #expect(result.baseline_insert_ms > 0 && result.incremental_10_ms > 0)

        // The store it left: 600 events plus the 10 of the incremental run, rebuilt on one thread.
        let existing = try await Stack.run(
            bench,
            [
                "rebuild", "--existing", directory.appendingPathComponent("rebuild.sqlite").path, "--runs", "1",
                "--workers", "1",
            ])
        #expect(existing.contains("(610 events) on 1 threads"), "\(existing)")
    }

    /// `sync-bench bare-server` answers pushes in each of its ways (through Hummingbird's router; below it, with a
    /// future or from a task), storing each body once, and `sync-bench push --bare-server` measures it beside a
    /// server and drops its table afterwards.
    @Test func theBareServerStoresEachPushInEachOfItsWays() async throws {
        let stack = try await Stack()
        let bench = Stack.productsDirectory.appendingPathComponent("sync-bench").path
        let token = try await stack.token(scopes: (0..<4).map { "bench-\($0)" })
        for mode in [[], ["--below-router"], ["--below-router", "--in-a-task"]] {
            let port = try Stack.freePort()
            let log = FileManager.default.temporaryDirectory.appendingPathComponent("bare-\(UUID()).log")
            defer { try? FileManager.default.removeItem(at: log) }
            let server = try ChildProcess.start(
                bench, ["bare-server", "--database-url", stack.databaseURL, "--port", String(port)] + mode,
                environment: ProcessInfo.processInfo.environment, output: log.path)
            defer {
                server.terminate()
                server.waitUntilExit()
            }
            var listening = false
            for _ in 0..<300 where !listening {
                listening = ((try? String(contentsOf: log, encoding: .utf8)) ?? "").contains("listening on \(port)")
                if !listening { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(listening, "\(mode): \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
            let before = Int(try await stack.sql("SELECT count(*) FROM bench_bare_push").first ?? "") ?? -1
            let output = try await Stack.run(
                bench,
                [
                    "push", "--server", "http://127.0.0.1:\(port)", "--token", token, "--events", "40", "--batch", "1",
                    "--concurrency", "4", "--scopes", "4",
                ])
            #expect(output.contains("accepted 40 (duplicate 0, rejected 0)"), "\(mode): \(output)")
            let after = Int(try await stack.sql("SELECT count(*) FROM bench_bare_push").first ?? "") ?? -1
            #expect(after - before == 40, "\(mode): \(before) → \(after) rows")
        }
        let output = try await Stack.run(
            bench,
            [
                "push", "--server", stack.serverURL, "--token", token, "--events", "60", "--batch", "1",
                "--concurrency", "2", "--scopes", "4", "--database-url", stack.databaseURL, "--bare-server", "--json",
            ])
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data((output.split(separator: "\n").last ?? "").utf8))
                as? [String: Any])
        #expect((report["bareEventsPerSecond"] as? Double ?? 0) > 0, "\(report)")
        #expect(try await stack.sql("SELECT to_regclass('bench_bare_push') IS NULL") == ["t"])
    }

    struct BootstrapResult: Decodable {
        struct Push: Decodable { var events: Int }
        struct Device: Decodable {
            var events: Int
            var eventsPerSecond: Double
            var tenths: [Double]
            var rounds: Int
            var edits: Int
        }
        struct Baseline: Decodable {
            var pages: Int
            var events: Int
        }
        struct Outbox: Decodable { var events: Int }
        var push: Push?
        var device: Device
        var baseline: Baseline
        var outbox: Outbox?
    }

    @Test func bootstrapBenchmarkPullsALogIntoAFreshDeviceAndDrainsAnOutbox() async throws {
        let stack = try await Stack()
        let scopes = (0..<2).map { "bench-\($0)" } + ["bench-outbox"]
        let token = try await stack.token(sub: "bench", scopes: scopes)
        let bench = Stack.productsDirectory.appendingPathComponent("sync-bench").path
        let output = try await Stack.run(
            bench,
            [
                "bootstrap", "--server", stack.serverURL, "--token", token, "--events", "3000", "--scopes", "2",
                "--notes", "50", "--page-size", "100", "--min-page-size", "50", "--max-page-size", "100",
                "--outbox", "600", "--json",
            ])
        let line = try #require(output.split(separator: "\n").last)
        let result = try JSONDecoder().decode(BootstrapResult.self, from: Data(line.utf8))
        #expect(result.push?.events == 3000)
        // The device also pulls back the note it wrote itself and its edits while it ran.
        #expect(result.device.events >= 3000 && result.device.eventsPerSecond > 0)
        // Pages of at most 100 events (full pages would otherwise grow, and how many rounds that leaves
        // depends on how the device's own edits fall between them): 3,000 events take 30 rounds at least.
        #expect(result.device.tenths.count == 10 && result.device.rounds >= 30)
        #expect(result.baseline.pages == result.device.rounds && result.baseline.events >= 3000)
        #expect(result.outbox?.events == 600)
    }

    struct FanoutResult: Decodable {
        var expectedDeliveries: Int
        var delivered: Int
        var unexpected: Int
        var otherServersDelivered: Int?
    }

    /// `sync-bench fanout --also-server`: the long-polls spread over two servers on one database, the pushes
    /// sent to the first; the second's devices hear of them through PostgreSQL's notifications, and the report
    /// counts their deliveries apart. Both servers run their tasks on NIO's event loops
    /// (`SYNC_TASKS_ON_EVENT_LOOPS`), the knob's end-to-end run.
    @Test func fanoutSpreadsItsDevicesOverServersAndReportsTheOthersApart() async throws {
        let stack = try await Stack(serverEnvironment: ["SYNC_TASKS_ON_EVENT_LOOPS": "true"])
        let other = try await stack.startAnotherServer()
        defer { kill(other.process.processIdentifier, SIGKILL) }
        let bench = Stack.productsDirectory.appendingPathComponent("sync-bench").path
        // 600 devices: clients of 256 connections each go to the servers in turn, so the second gets 256.
        let output = try await Stack.run(
            bench,
            [
                "fanout", "--server", stack.serverURL, "--also-server", other.url, "--jwt-secret", Stack.secret,
                "--devices", "600", "--scopes", "4", "--duration", "2", "--push-scopes", "4", "--wait", "10",
                "--json",
            ])
        kill(other.process.processIdentifier, SIGKILL)
        await other.process.exited()
        let line = try #require(output.split(separator: "\n").last)
        let result = try JSONDecoder().decode(FanoutResult.self, from: Data(line.utf8))
        #expect(result.expectedDeliveries == 1200)
        #expect(result.delivered == result.expectedDeliveries && result.unexpected == 0)
        #expect(result.otherServersDelivered == 512)
        let log = try String(contentsOf: stack.directory.appendingPathComponent("server.log"), encoding: .utf8)
        #expect(log.contains("NIO's event loops run the process's tasks"))
    }

    struct ChurnResult: Decodable {
        struct Checkpoint: Decodable {
            var operations: Int
            var serverBytes: Int
            var serverRows: Int
            var deviceBytes: Int
            var liveStateBytes: Int
        }
        struct Bootstrap: Decodable {
            var events: Int
            var bytesOnTheWire: Int
        }
        struct Cost: Decodable {
            var foldedEvents: Int
            var pushes: Int
        }
        var warmUp: Int?
        var checkpoints: [Checkpoint]
        var bootstrap: Bootstrap
        var cost: Cost?
    }

    /// `sync-bench churn` on a small workload, with compaction: storage measured at each checkpoint, the log
    /// folded to about one row per live note, a fresh device bootstrapped to the same state (the command
    /// checks it), and compaction's cost measured.
    @Test func churnBenchmarkMeasuresStorageBootstrapsAndTimesCompaction() async throws {
        let stack = try await Stack(noteQuota: 200)
        let scopes = (0..<2).map { "churn-\($0)" }
        let token = try await stack.token(sub: "bench", scopes: scopes)
        let bench = Stack.productsDirectory.appendingPathComponent("sync-bench").path
        let output = try await Stack.run(
            bench,
            [
                "churn", "--server", stack.serverURL, "--token", token, "--database-url", stack.databaseURL,
                "--notes", "40", "--scopes", "2", "--warm-up", "200", "--operations", "1200", "--checkpoints",
                "400,1200",
                "--cost-operations", "300", "--json",
            ])
        let line = try #require(output.split(separator: "\n").last)
        let result = try JSONDecoder().decode(ChurnResult.self, from: Data(line.utf8))
        #expect(result.warmUp == 200)
        #expect(result.checkpoints.map(\.operations) == [400, 1200])
        let last = try #require(result.checkpoints.last)
        #expect(last.serverRows <= 60, "about one snapshot per live note: \(last.serverRows)")
        #expect(last.serverBytes > 0 && last.deviceBytes > 0 && last.liveStateBytes > 0)
        #expect(result.bootstrap.events <= 60 && result.bootstrap.bytesOnTheWire > 0)
        #expect((result.cost?.foldedEvents ?? 0) > 300)
    }
}
