import Foundation
import Testing

/// `make bench-quick` end to end at its smoke size (`BENCH_QUICK=smoke`, a third of the quick sizes: the
/// binaries here are debug builds and other suites run beside it): every scenario against real processes, then
/// the report. No timing is judged: the report must be complete (every scenario, every chart), every verdict must
/// pass, and a comparison with a baseline must flag a figure that got worse beyond the noise.
@Suite struct BenchSuiteTests {
    struct Figure: Decodable {
        var id: String
        var value: Double
        var ratio: Double?
    }
    struct Verdict: Decodable {
        var passed: Bool
        var detail: String
    }
    struct Results: Decodable {
        var mode: String
        var scenarios: [String]
        var missing: [String]
        var figures: [Figure]
        var verdicts: [Verdict]
        var charts: [String]
    }

    @Test func theQuickSuiteWritesACompleteReportWithChartsAndPassingVerdicts() async throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID())")
        defer { try? FileManager.default.removeItem(at: out) }
        let result = try await Stack.runCapturing(
            "/usr/bin/env", ["bash", Stack.repositoryRoot.appendingPathComponent("scripts/bench.sh").path],
            environment: [
                "BENCH_QUICK": "smoke", "BENCH_BIN": Stack.productsDirectory.path, "BENCH_OUT": out.path,
                "BENCH_PORT": String(try Stack.freePort()),
            ])
        #expect(result.status == 0, "\(result.stderr.suffix(4000))\n\(result.stdout.suffix(2000))")
        // Progress went to standard error, scenario by scenario.
        #expect(result.stderr.contains("[bench 7/7"), "\(result.stderr.suffix(2000))")

        let results = try JSONDecoder().decode(
            Results.self, from: Data(contentsOf: out.appendingPathComponent("results.json")))
        #expect(results.mode == "quick")
        #expect(results.scenarios == ["throughput", "latency", "rebuild", "storage", "bootstrap", "blobs", "crdt"])
        #expect(results.missing.isEmpty, "\(results.missing)")
        #expect(!results.verdicts.isEmpty && results.verdicts.allSatisfy(\.passed), "\(results.verdicts.map(\.detail))")
        let ids = Set(results.figures.map(\.id))
        for id in ["throughput.bulk", "throughput.devices"] {
            #expect(ids.contains(id), "\(id) missing from \(ids.sorted())")
        }
        // One-event pushes, one at a time and 32 in flight, each against pgbench in the same run.
        for id in ["throughput.one-event.1", "throughput.one-event.32"] {
            #expect(results.figures.first { $0.id == id }?.ratio ?? 0 > 0, "\(id) in \(ids.sorted())")
        }
        // The server's CPU per one-event push, against a bare server of the same parts pushed the same bodies.
        for id in ["throughput.one-event.1.server-cpu", "throughput.one-event.32.server-cpu"] {
            #expect(results.figures.first { $0.id == id }?.ratio ?? 0 > 0, "\(id) in \(ids.sorted())")
        }
        // Figures whose size varies name it: the smoke run's 3,000 events, its churn history.
        #expect(ids.contains("bootstrap.pull.3000") && ids.contains("bootstrap.agent.3000"), "\(ids.sorted())")
        // Many records as well as many events: both shapes, each with its plain client's ratio.
        for id in ["bootstrap.records.3000", "bootstrap.long-tail.3000"] {
            #expect(results.figures.first { $0.id == id }?.ratio ?? 0 > 0, "\(id) in \(ids.sorted())")
        }
        #expect(ids.contains("storage.server.compaction.3000") && ids.contains("storage.device.none.3000"))
        // Thin devices on the live stream beside a replica (the quick sweep's one step), with its verdict.
        #expect(ids.contains("latency-thin.11.visible-p99"), "\(ids.sorted())")
        #expect(results.verdicts.contains { $0.detail.contains("(thin, on the live stream)") })
        // An attachment of 4 MiB up and down, each against curl on nginx's static route, and its memory.
        for id in ["blobs.up.4", "blobs.down.4"] {
            #expect(results.figures.first { $0.id == id }?.ratio ?? 0 > 0, "\(id) in \(ids.sorted())")
        }
        #expect(results.figures.first { $0.id == "blobs.memory.4" }?.value ?? 0 > 0, "\(ids.sorted())")
        #expect(ids.contains { $0.hasPrefix("bootstrap.compaction.") }, "\(ids.sorted())")
        // Every figure with an in-run baseline has its ratio.
        #expect(results.figures.first { $0.id == "throughput.bulk" }?.ratio ?? 0 > 0)
        #expect(results.figures.contains { $0.id.hasPrefix("rebuild.") && ($0.ratio ?? 0) > 0 })
        #expect(results.figures.contains { $0.id.hasPrefix("crdt.") && ($0.ratio ?? 0) > 0 })

        let expectedCharts = [
            "throughput-vs-devices.svg", "latency-vs-devices.svg", "rebuild-vs-events.svg", "storage-vs-operations.svg",
        ]
        #expect(Set(results.charts) == Set(expectedCharts))
        let html = try String(contentsOf: out.appendingPathComponent("report.html"), encoding: .utf8)
        for chart in expectedCharts {
            let svg = try String(contentsOf: out.appendingPathComponent(chart), encoding: .utf8)
            #expect(svg.contains("<svg") && svg.contains("<path"), "\(chart) has no drawing")
        }
        // Self-contained: the charts inline, nothing fetched.
        #expect(html.components(separatedBy: "<svg").count - 1 == expectedCharts.count)
        #expect(!html.contains("src=\"http") && !html.contains("href=\"http"))
        for csv in ["throughput", "latency", "rebuild", "storage", "bootstrap", "crdt"] {
            let text = try String(contentsOf: out.appendingPathComponent("\(csv).csv"), encoding: .utf8)
            #expect(text.split(separator: "\n").count >= 2, "\(csv).csv is empty")
        }
        let markdown = try String(contentsOf: out.appendingPathComponent("report.md"), encoding: .utf8)
        for section in [
            "## Headlines", "## Verdicts", "## Against the baseline", "## Sync throughput", "## Latency under load",
            "## Projection rebuild", "## Storage under churn", "## Bootstrap", "## Attachments",
            "## CRDT editing traces",
        ] {
            #expect(markdown.contains(section), "report.md lacks \(section)")
        }

        // Against a baseline of the same mode in which one trace encoded to half its size: flagged as worse.
        // The encoded sizes are deterministic (their noise floor is 1 %), so the judgement does not depend on
        // this run's timing; the other trace, left as it was, is within the noise.
        var object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: out.appendingPathComponent("results.json")))
                as? [String: Any])
        var figures = try #require(object["figures"] as? [[String: Any]])
        let worse = "crdt.clownschool_flat.encoded"
        let index = try #require(figures.firstIndex { $0["id"] as? String == worse })
        figures[index]["ratio"] = (figures[index]["ratio"] as? Double ?? 1) / 2
        object["figures"] = figures
        let baseline = out.appendingPathComponent("baseline.json")
        try JSONSerialization.data(withJSONObject: object).write(to: baseline)
        let report = try await Stack.runCapturing(
            Stack.productsDirectory.appendingPathComponent("sync-bench").path,
            ["report", "--directory", out.path, "--baseline", baseline.path])
        #expect(report.status == 0, "\(report.stdout)\(report.stderr)")
        #expect(report.stdout.contains("for the worse:") && report.stdout.contains(worse), "\(report.stdout)")
        let compared = try String(contentsOf: out.appendingPathComponent("report.md"), encoding: .utf8)
        let rows = compared.split(separator: "\n").filter { $0.contains(": encoded size |") && $0.contains("ratio") }
        let flatRow = rows.first { $0.hasPrefix("| clownschool_flat: encoded size") }
        #expect(flatRow?.contains("**worse**") == true, "\(compared)")
        let otherRow = rows.first { $0.hasPrefix("| clownschool: encoded size") }
        #expect(otherRow?.hasSuffix("| = |") == true, "\(String(describing: otherRow))")
    }
}
