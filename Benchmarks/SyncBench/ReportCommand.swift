import ArgumentParser
import Foundation
import SyncTestSupport

/// `sync-bench report`: the report of `make bench`.
///
/// `scripts/bench.sh` runs every scenario and leaves their outputs in `<run>/raw/` (one JSON file per run of
/// a subcommand, sync-load's `report.json`s, `run.json` with the commit and the machine, `timings.tsv` with
/// each scenario's seconds). This command turns them into figures — each with its in-run baseline and the
/// ratio to it where the scenario has one, and the noise measured between repeated runs — and writes
/// `results.json`, a CSV per scenario, SVG charts drawn by gnuplot, `report.md` and a self-contained
/// `report.html`. Given an earlier `results.json` (`Benchmarks/results/baseline.json`), it shows each figure's
/// change and flags the changes for the worse beyond twice the noise.
struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Write the report of a make bench run (report.md, report.html, results.json, CSVs, SVG charts).")

    @Option(help: "The run's folder; raw/ holds the scenarios' outputs. The report is written into it.")
    var directory: String
    @Option(help: "results.json of an earlier run to compare with (e.g. Benchmarks/results/baseline.json).")
    var baseline: String?
    @Option(help: "The gnuplot program that draws the charts.") var gnuplot = "gnuplot"
    @Flag(help: "Exit non-zero unless every scenario is there, every verdict passed and every chart was drawn.")
    var requireComplete = false
    @Option(help: "The scenarios the run was asked for, space-separated (default: all of them).")
    var scenarios: String?

    func run() async throws {
        let folder = URL(fileURLWithPath: directory)
        let raw = RawOutputs(folder: folder.appendingPathComponent("raw"))
        var builder = try ReportBuilder(raw: raw, folder: folder, gnuplot: gnuplot)
        if let scenarios { builder.expected = scenarios.split(separator: " ").map(String.init) }
        if let baseline {
            builder.baseline = try? JSONDecoder().decode(
                BenchResults.self, from: Data(contentsOf: URL(fileURLWithPath: baseline)))
            if builder.baseline == nil { print("report: no usable baseline at \(baseline); no comparison") }
        }
        let results = try builder.build()
        print("report: \(folder.appendingPathComponent("report.md").path)")
        print(
            "  \(results.scenarios.count) scenarios, \(results.figures.count) figures, \(results.charts.count) charts, verdicts \(results.verdicts.allSatisfy(\.passed) ? "pass" : "FAIL")"
        )
        if !results.missing.isEmpty { print("  missing: \(results.missing.joined(separator: ", "))") }
        let regressions = builder.comparisons.filter { $0.judgement == .worse }
        if !regressions.isEmpty {
            print("  beyond the noise, for the worse: \(regressions.map(\.figure.id).joined(separator: ", "))")
        }
        if requireComplete && (!results.missing.isEmpty || !results.verdicts.allSatisfy(\.passed)) {
            throw ExitCode(1)
        }
    }
}

/// One number of the report, with its in-run baseline where the scenario has one.
struct BenchFigure: Codable, Sendable {
    /// A stable key: figures of two runs with the same id are compared.
    var id: String
    var scenario: String
    var name: String
    var value: Double
    var unit: String
    var baselineName: String?
    var baselineValue: Double?
    /// `value / baselineValue`, measured in the same run: what comparisons between runs judge.
    var ratio: Double?
    var higherIsBetter: Bool
    /// Relative noise: half the spread between repeated runs of this run, and never below the scenario's
    /// floor (what repeated runs of it have shown on this machine).
    var noise: Double

    /// The quantity compared between runs.
    var judged: Double { ratio ?? value }
}

struct BenchVerdict: Codable, Sendable {
    var scenario: String
    var passed: Bool
    var detail: String
}

/// `results.json`.
struct BenchResults: Codable, Sendable {
    var tool = "sync-bench report"
    var commit: String
    var startedAt: String
    var mode: String
    var machine: [String: String]
    var configuration: [String: String]
    /// Seconds each scenario took.
    var seconds: [String: Double]
    var scenarios: [String]
    /// Scenarios that left no output.
    var missing: [String]
    var figures: [BenchFigure]
    var verdicts: [BenchVerdict]
    var charts: [String]
}

/// What `scripts/bench.sh` writes into `raw/run.json`.
struct BenchRunInfo: Codable, Sendable {
    var commit: String
    var startedAt: String
    var mode: String
    var machine: [String: String]
    var configuration: [String: String]
}

/// The part of sync-load's `report.json` the report reads.
struct LoadRunReport: Codable, Sendable {
    struct Percentiles: Codable, Sendable {
        var count: Int
        var p50: Double
        var p99: Double
    }
    struct Verdict: Codable, Sendable {
        var passed: Bool
        var lost: Int
        var duplicated: Int
        var diverged: Int
        var gaps: Int
        var serverEvents: Int
    }
    struct Step: Codable, Sendable {
        /// Every device of the step: thin devices and full replicas (`devices` and `replicas` of sync-load's
        /// report; reports of earlier versions have replicas only, as `devices`).
        var devices: Int
        var scopes: Int
        var accepted: Int
        var acceptedPerSecond: Double
        var pushLatencyMs: Percentiles
        var writeToVisibleMs: Percentiles
        var label: String
        var verdict: Verdict
        var seconds: Double

        private enum ReplicaKey: String, CodingKey { case replicas }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let replicas = try decoder.container(keyedBy: ReplicaKey.self).decodeIfPresent(Int.self, forKey: .replicas)
            devices = try container.decode(Int.self, forKey: .devices) + (replicas ?? 0)
            scopes = try container.decode(Int.self, forKey: .scopes)
            accepted = try container.decode(Int.self, forKey: .accepted)
            acceptedPerSecond = try container.decode(Double.self, forKey: .acceptedPerSecond)
            pushLatencyMs = try container.decode(Percentiles.self, forKey: .pushLatencyMs)
            writeToVisibleMs = try container.decode(Percentiles.self, forKey: .writeToVisibleMs)
            label = try container.decode(String.self, forKey: .label)
            verdict = try container.decode(Verdict.self, forKey: .verdict)
            seconds = try container.decode(Double.self, forKey: .seconds)
        }
    }
    var steps: [Step]
}

/// What scripts/bench.sh measured of a fresh `sync-agent sync`.
struct AgentBootstrap: Codable, Sendable {
    var events: Int
    var seconds: Double
    var databaseBytes: Int
}

/// The files of `raw/`.
struct RawOutputs {
    let folder: URL

    func files(prefix: String) -> [URL] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { $0.hasPrefix(prefix) && $0.hasSuffix(".json") }.sorted().map {
            folder.appendingPathComponent($0)
        }
    }

    func decode<T: Decodable>(_ type: T.Type, _ name: String) -> T? {
        decode(type, at: folder.appendingPathComponent(name))
    }

    /// A subcommand's output: the whole file, or (for subcommands that print text first) its last line.
    func decode<T: Decodable>(_ type: T.Type, at url: URL) -> T? {
        guard let data = try? Data(contentsOf: url) else { return nil }
        if let value = try? JSONDecoder().decode(type, from: data) { return value }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n")
        guard let last = lines.last(where: { $0.hasPrefix("{") }) else { return nil }
        return try? JSONDecoder().decode(type, from: Data(last.utf8))
    }

    /// Every raw file, parsed, for results.json.
    func all() -> [String: Any] {
        var result: [String: Any] = [:]
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        for name in names.sorted() where name.hasSuffix(".json") {
            guard let data = try? Data(contentsOf: folder.appendingPathComponent(name)) else { continue }
            let text = String(decoding: data, as: UTF8.self)
            let json = text.split(separator: "\n").last(where: { $0.hasPrefix("{") }).map { Data($0.utf8) }
            if let object = try? JSONSerialization.jsonObject(with: data) {
                result[String(name.dropLast(5))] = object
            } else if let json, let object = try? JSONSerialization.jsonObject(with: json) {
                result[String(name.dropLast(5))] = object
            }
        }
        return result
    }
}

/// How a figure compares with the baseline's.
struct BenchComparison {
    enum Judgement: String { case better, same, worse }
    var figure: BenchFigure
    var before: BenchFigure
    var change: Double
    var band: Double
    var judgement: Judgement
}

struct ReportBuilder {
    static let scenarioOrder = ["throughput", "latency", "rebuild", "storage", "bootstrap", "blobs", "crdt"]
    static let titles = [
        "throughput": "Sync throughput", "latency": "Latency under load", "rebuild": "Projection rebuild",
        "storage": "Storage under churn", "bootstrap": "Bootstrap", "blobs": "Attachments",
        "crdt": "CRDT editing traces",
    ]

    let raw: RawOutputs
    let folder: URL
    let gnuplot: String
    let info: BenchRunInfo
    var baseline: BenchResults?
    var figures: [BenchFigure] = []
    var verdicts: [BenchVerdict] = []
    var charts: [String] = []
    var sections: [String: [String]] = [:]
    var comparisons: [BenchComparison] = []
    /// The scenarios asked for: one of them without output counts as missing.
    var expected = ReportBuilder.scenarioOrder

    init(raw: RawOutputs, folder: URL, gnuplot: String) throws {
        self.raw = raw
        self.folder = folder
        self.gnuplot = gnuplot
        guard let info = raw.decode(BenchRunInfo.self, "run.json") else {
            throw ValidationError("\(raw.folder.path)/run.json is missing: run scripts/bench.sh")
        }
        self.info = info
    }

    mutating func build() throws -> BenchResults {
        throughput()
        latency()
        rebuild()
        storage()
        bootstrap()
        blobs()
        crdt()
        let present = Self.scenarioOrder.filter { sections[$0] != nil }
        let results = BenchResults(
            commit: info.commit, startedAt: info.startedAt, mode: info.mode, machine: info.machine,
            configuration: info.configuration, seconds: timings(), scenarios: present,
            missing: expected.filter { sections[$0] == nil } + missingCharts(), figures: figures,
            verdicts: verdicts, charts: charts)
        compare(results)
        try writeResults(results)
        let markdown = self.markdown(results)
        try markdown.write(to: folder.appendingPathComponent("report.md"), atomically: true, encoding: .utf8)
        try HTMLPage(markdown: markdown, folder: folder).html.write(
            to: folder.appendingPathComponent("report.html"), atomically: true, encoding: .utf8)
        return results
    }

    // MARK: Scenarios

    /// One-event pushes, 1 and 32 in flight (`onepush-<n>.json`): events/s against pgbench's transactions/s,
    /// and the CPU per push of PostgreSQL (against its CPU per pgbench transaction) and of the server.
    mutating func onePushes(into lines: inout [String]) {
        let runs = [1, 32].compactMap { n in raw.decode(PushReport.self, "onepush-\(n).json").map { (n, $0) } }
        guard !runs.isEmpty else { return }
        lines.append("")
        lines.append(
            "One-event pushes over \(runs[0].1.scopes) scopes, then pgbench running the same insert with as many clients (the ceiling of one-event pushes), and the same pushes to a bare server of the same parts (`sync-bench bare-server`: Hummingbird, PostgresNIO, gzip, one INSERT; the floor under the server's CPU); CPU time per push from /proc:"
        )
        lines.append("")
        lines.append(
            "| in flight | events/s | p50 / p99 | pgbench transactions/s | server CPU per push | bare server's | PostgreSQL CPU per push | per pgbench transaction |"
        )
        lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for (n, run) in runs {
            let pgbench = run.pgbench?.transactionsPerSecond
            add(
                BenchFigure(
                    id: "throughput.one-event.\(n)", scenario: "throughput",
                    name: "One-event pushes, \(n) in flight: events/s accepted", value: run.eventsPerSecond,
                    unit: "events/s", baselineName: "pgbench, the same insert", baselineValue: pgbench,
                    ratio: run.ratioToPGBench, higherIsBetter: true, noise: 0.10))
            if let perPush = run.postgresCPUMicrosecondsPerPush,
                let perTransaction = run.pgbenchPostgresCPUMicrosecondsPerTransaction
            {
                add(
                    BenchFigure(
                        id: "throughput.one-event.\(n).postgres-cpu", scenario: "throughput",
                        name: "One-event pushes, \(n) in flight: PostgreSQL CPU per push", value: perPush, unit: "µs",
                        baselineName: "PostgreSQL CPU per pgbench transaction", baselineValue: perTransaction,
                        ratio: perPush / perTransaction, higherIsBetter: false, noise: 0.15))
            }
            if let server = run.serverCPUMicrosecondsPerPush {
                let bare = run.bareServerCPUMicrosecondsPerPush
                add(
                    BenchFigure(
                        id: "throughput.one-event.\(n).server-cpu", scenario: "throughput",
                        name: "One-event pushes, \(n) in flight: server CPU per push", value: server, unit: "µs",
                        baselineName: bare.map { _ in "a bare Hummingbird and PostgresNIO server, one INSERT" },
                        baselineValue: bare, ratio: bare.map { server / $0 }, higherIsBetter: false, noise: 0.15))
            }
            let cpu = { (value: Double?) in value.map { "\(Fmt.int($0)) µs" } ?? "–" }
            lines.append(
                "| \(n) | \(Fmt.int(run.eventsPerSecond)) | \(Fmt.ms(run.p50Milliseconds)) / \(Fmt.ms(run.p99Milliseconds)) ms | \(pgbench.map(Fmt.int) ?? "–") | \(cpu(run.serverCPUMicrosecondsPerPush)) | \(cpu(run.bareServerCPUMicrosecondsPerPush)) | \(cpu(run.postgresCPUMicrosecondsPerPush)) | \(cpu(run.pgbenchPostgresCPUMicrosecondsPerTransaction)) |"
            )
        }
    }

    mutating func throughput() {
        let pushes = raw.files(prefix: "push-").compactMap { raw.decode(PushReport.self, at: $0) }
        let load = raw.decode(LoadRunReport.self, "throughput-devices.json")
        guard !pushes.isEmpty || load != nil else { return }
        var lines: [String] = []
        let copy = median(pushes.compactMap(\.copyRowsPerSecond))
        if let first = pushes.first {
            let ratios = pushes.compactMap(\.ratioToCopy)
            add(
                BenchFigure(
                    id: "throughput.bulk", scenario: "throughput",
                    name: "Bulk clients: events/s accepted (batches of \(first.batch), \(first.concurrency) in flight)",
                    value: median(pushes.map(\.eventsPerSecond)), unit: "events/s",
                    baselineName: "raw COPY of the same rows", baselineValue: copy.isNaN ? nil : copy,
                    ratio: ratios.isEmpty ? nil : median(ratios), higherIsBetter: true,
                    noise: noise(ratios.isEmpty ? pushes.map(\.eventsPerSecond) : ratios, floor: 0.05)))
            add(
                BenchFigure(
                    id: "throughput.bulk.push-p99", scenario: "throughput", name: "Bulk clients: push p99",
                    value: median(pushes.map(\.p99Milliseconds)), unit: "ms", higherIsBetter: false,
                    noise: noise(pushes.map(\.p99Milliseconds), floor: 0.25)))
            lines.append(
                "\(pushes.count) runs of \(first.events.formatted()) events each, into \(first.scopes) scopes; the median is shown, and the COPY baseline is timed right after each run on the same database."
            )
            lines.append("")
            lines.append(
                "| run | events/s accepted | push p50 / p99 | COPY rows/s | ratio to COPY | request bytes, raw → gzip |"
            )
            lines.append("|---:|---:|---:|---:|---:|---:|")
            for (index, push) in pushes.enumerated() {
                lines.append(
                    "| \(index + 1) | \(Fmt.int(push.eventsPerSecond)) | \(Fmt.ms(push.p50Milliseconds)) / \(Fmt.ms(push.p99Milliseconds)) ms | \(push.copyRowsPerSecond.map(Fmt.int) ?? "–") | \(push.ratioToCopy.map(Fmt.ratio) ?? "–") | \(Fmt.mib(push.requestBytesRaw)) → \(Fmt.mib(push.requestBytesWire)) MiB |"
                )
            }
        }
        onePushes(into: &lines)
        if let step = load?.steps.first {
            add(
                BenchFigure(
                    id: "throughput.devices", scenario: "throughput",
                    name: "Device-like clients (sync-load, \(step.devices) devices): events/s accepted",
                    value: step.acceptedPerSecond, unit: "events/s", baselineName: "raw COPY of the same rows",
                    baselineValue: copy.isNaN ? nil : copy, ratio: copy.isNaN ? nil : step.acceptedPerSecond / copy,
                    higherIsBetter: true, noise: 0.10))
            verdict("throughput", "sync-load, \(step.devices) devices", step.verdict)
            lines.append("")
            lines.append(
                "Device-like clients: \(step.devices) sync-load devices in \(step.scopes) scopes writing as fast as they can (no think time, no faults, no offline spells), each a replica on its own SQLite file: \(Fmt.int(step.acceptedPerSecond)) events/s accepted, push p50 / p99 \(Fmt.ms(step.pushLatencyMs.p50)) / \(Fmt.ms(step.pushLatencyMs.p99)) ms, write-to-visible p99 \(Fmt.ms(step.writeToVisibleMs.p99)) ms. On 2 cores the devices' own SQLite work is most of the machine."
            )
        }
        writeCSV(
            "throughput",
            header: "client,run,events_per_s,push_p50_ms,push_p99_ms,copy_rows_per_s,ratio_to_copy",
            rows: pushes.enumerated().map { index, push in
                "bulk,\(index + 1),\(push.eventsPerSecond),\(push.p50Milliseconds),\(push.p99Milliseconds),\(push.copyRowsPerSecond ?? .nan),\(push.ratioToCopy ?? .nan)"
            }
                + (load?.steps.first.map {
                    [
                        "devices,1,\($0.acceptedPerSecond),\($0.pushLatencyMs.p50),\($0.pushLatencyMs.p99),\(copy),\($0.acceptedPerSecond / copy)"
                    ]
                } ?? []))
        sections["throughput"] = lines
    }

    mutating func latency() {
        guard let sweep = raw.decode(LoadRunReport.self, "latency-sweep.json"), !sweep.steps.isEmpty else { return }
        var lines = [
            "The sync-load sweep: devices that edit like people (think times, offline spells, injected faults, crashes), more of them at each step, every step ending in its verdict. Labels: healthy while pushes stay fast, degraded when p99 climbs, collapsed when the server refuses or write-to-visible passes seconds.",
            "",
        ]
        lines += Self.sweepTable(sweep.steps)
        for step in sweep.steps {
            let prefix = "latency.\(step.devices)"
            add(
                BenchFigure(
                    id: "\(prefix).accepted", scenario: "latency", name: "\(step.devices) devices: events/s accepted",
                    value: step.acceptedPerSecond, unit: "events/s", higherIsBetter: true, noise: 0.10))
            add(
                BenchFigure(
                    id: "\(prefix).push-p99", scenario: "latency", name: "\(step.devices) devices: push p99",
                    value: step.pushLatencyMs.p99, unit: "ms", higherIsBetter: false, noise: 0.30))
            add(
                BenchFigure(
                    id: "\(prefix).visible-p99", scenario: "latency",
                    name: "\(step.devices) devices: write-to-visible p99 (\(step.label))",
                    value: step.writeToVisibleMs.p99,
                    unit: "ms", higherIsBetter: false, noise: 0.30))
            verdict("latency", "sync-load, \(step.devices) devices", step.verdict)
        }
        lines += ["", "![Events/s accepted against devices](throughput-vs-devices.svg)", ""]
        lines += ["![Latency percentiles against devices](latency-vs-devices.svg)"]
        let rows = sweep.steps.map {
            "\($0.devices),\($0.scopes),\($0.acceptedPerSecond),\($0.pushLatencyMs.p50),\($0.pushLatencyMs.p99),\($0.writeToVisibleMs.p50),\($0.writeToVisibleMs.p99),\($0.label),\($0.verdict.passed)"
        }
        writeCSV(
            "latency",
            header:
                "devices,scopes,accepted_per_s,push_p50_ms,push_p99_ms,visible_p50_ms,visible_p99_ms,label,verdict_passed",
            rows: rows)
        chart(
            "throughput-vs-devices", csv: "latency",
            """
            set title "Events/s accepted against devices (sync-load sweep)"
            set xlabel "devices"
            set ylabel "events/s accepted"
            set logscale x
            set yrange [0:*]
            set offsets graph 0.06, graph 0.06, graph 0.12, 0
            set key top left
            plot DATA using 1:3 with linespoints lw 2 pt 7 title "accepted", \\
                 DATA using 1:3:8 with labels offset char 0,1.2 notitle
            """)
        chart(
            "latency-vs-devices", csv: "latency",
            """
            set title "Latency against devices (sync-load sweep)"
            set xlabel "devices"
            set ylabel "milliseconds"
            set logscale xy
            set key outside right center
            plot DATA using 1:4 with linespoints lw 2 pt 7 title "push p50", \\
                 DATA using 1:5 with linespoints lw 2 pt 5 title "push p99", \\
                 DATA using 1:6 with linespoints lw 2 pt 9 title "write-to-visible p50", \\
                 DATA using 1:7 with linespoints lw 2 pt 11 title "write-to-visible p99"
            """)
        lines += thinDevices()
        sections["latency"] = lines
    }

    /// A sync-load sweep's table: a row per step.
    static func sweepTable(_ steps: [LoadRunReport.Step]) -> [String] {
        [
            "| devices | scopes | events/s accepted | push p50 / p99 | write-to-visible p50 / p99 | label | verdict |",
            "|---:|---:|---:|---:|---:|---|---|",
        ]
            + steps.map { step in
                "| \(step.devices) | \(step.scopes) | \(Fmt.int(step.acceptedPerSecond)) | \(Fmt.ms(step.pushLatencyMs.p50)) / \(Fmt.ms(step.pushLatencyMs.p99)) ms | \(Fmt.ms(step.writeToVisibleMs.p50)) / \(Fmt.ms(step.writeToVisibleMs.p99)) ms | \(step.label) | \(step.verdict.passed ? "pass" : "**FAIL**") |"
            }
    }

    /// The thin devices' sweep (`latency-thin.json`): devices that each hold a connection and the live
    /// stream without a file of their own, beside a few full replicas.
    mutating func thinDevices() -> [String] {
        guard let sweep = raw.decode(LoadRunReport.self, "latency-thin.json"), !sweep.steps.isEmpty else { return [] }
        var lines = [
            "", "### Thin devices on the live stream", "",
            "sync-load's thin devices (a connection and a live stream each, the same events and checks as a replica, no file) beside a few full replicas, editing at half an action a second, one scope per ten devices: how many devices one server keeps live on these cores. Devices counts both.",
            "",
        ]
        lines += Self.sweepTable(sweep.steps)
        for step in sweep.steps {
            let prefix = "latency-thin.\(step.devices)"
            add(
                BenchFigure(
                    id: "\(prefix).accepted", scenario: "latency",
                    name: "\(step.devices) thin devices and replicas: events/s accepted", value: step.acceptedPerSecond,
                    unit: "events/s", higherIsBetter: true, noise: 0.10))
            add(
                BenchFigure(
                    id: "\(prefix).visible-p99", scenario: "latency",
                    name: "\(step.devices) thin devices and replicas: write-to-visible p99 (\(step.label))",
                    value: step.writeToVisibleMs.p99, unit: "ms", higherIsBetter: false, noise: 0.30))
            verdict("latency", "sync-load, \(step.devices) devices (thin, on the live stream)", step.verdict)
        }
        return lines
    }

    mutating func rebuild() {
        let results = raw.files(prefix: "rebuild-").compactMap { raw.decode(RebuildCommand.Result.self, at: $0) }
            .sorted { $0.events < $1.events }
        guard !results.isEmpty else { return }
        var lines = [
            "A replica's notes projection rebuilt from its local log of N events (median of the timed runs), against a plain SQLite insert of the same rows into a table of the same columns; then 10 more events applied incrementally.",
            "",
            "| events | rebuild | events/s | plain insert | ratio | +10 events |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for result in results {
            lines.append(
                "| \(result.events.formatted()) | \(Fmt.ms(result.rebuild_ms)) ms | \(Fmt.int(result.events_per_s)) | \(Fmt.ms(result.baseline_insert_ms)) ms | \(Fmt.ratio(result.rebuild_to_baseline)) | \(String(format: "%.2f", result.incremental_10_ms)) ms |"
            )
            let spread =
                result.rebuild_ms > 0 ? (result.rebuild_ms_max - result.rebuild_ms_min) / 2 / result.rebuild_ms : 0
            add(
                BenchFigure(
                    id: "rebuild.\(result.events)", scenario: "rebuild",
                    name: "Rebuild of \(result.events.formatted()) events", value: result.rebuild_ms, unit: "ms",
                    baselineName: "plain SQLite insert", baselineValue: result.baseline_insert_ms,
                    ratio: result.rebuild_to_baseline, higherIsBetter: false, noise: max(0.05, spread)))
            add(
                BenchFigure(
                    id: "rebuild.\(result.events).incremental", scenario: "rebuild",
                    name: "+10 events after \(result.events.formatted())", value: result.incremental_10_ms, unit: "ms",
                    higherIsBetter: false, noise: 0.30))
        }
        lines += ["", "![Rebuild time against events](rebuild-vs-events.svg)"]
        writeCSV(
            "rebuild",
            header: "events,rebuild_ms,rebuild_min_ms,rebuild_max_ms,baseline_insert_ms,ratio,incremental_10_ms",
            rows: results.map {
                "\($0.events),\($0.rebuild_ms),\($0.rebuild_ms_min),\($0.rebuild_ms_max),\($0.baseline_insert_ms),\($0.rebuild_to_baseline),\($0.incremental_10_ms)"
            })
        chart(
            "rebuild-vs-events", csv: "rebuild",
            """
            set title "Projection rebuild against events in the log"
            set xlabel "events"
            set ylabel "milliseconds"
            set logscale xy
            set format x "%.0s%c"
            set key outside right center
            plot DATA using 1:2:3:4 with yerrorlines lw 2 pt 7 title "rebuild (median, min–max)", \\
                 DATA using 1:5 with linespoints lw 2 pt 5 dt 2 title "plain SQLite insert"
            """)
        sections["rebuild"] = lines
    }

    mutating func storage() {
        let on = raw.decode(ChurnReport.self, "churn-compaction.json")
        let off = raw.decode(ChurnReport.self, "churn-none.json")
        guard on != nil || off != nil else { return }
        let any = (on ?? off)!
        var lines = [
            "A writer creates \(any.notes.formatted()) notes in \(any.scopes) scopes and makes \(any.warmUpPhrase)\(any.operations.formatted()) operations of the Notes workload; a device syncs at each checkpoint. With compaction the server folds as its compaction service would, vacuums at the checkpoints, and the device prunes. Server: `pg_total_relation_size` of its tables; device: its SQLite file; live state: the live notes alone in a fresh SQLite file (the in-run baseline).",
            "",
            "| operations | server, compaction | server, none | device, compaction | device, none | live state |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        let operations = Array(
            Set((on?.checkpoints ?? []).map(\.operations) + (off?.checkpoints ?? []).map(\.operations))
        ).sorted()
        var rows: [String] = []
        for count in operations {
            let a = on?.checkpoints.first { $0.operations == count }
            let b = off?.checkpoints.first { $0.operations == count }
            let live = a?.liveStateBytes ?? b?.liveStateBytes ?? 0
            lines.append(
                "| \(count.formatted()) | \(a.map { Fmt.mib($0.serverBytes) } ?? "–") MiB | \(b.map { Fmt.mib($0.serverBytes) } ?? "–") MiB | \(a.map { Fmt.mib($0.deviceBytes) } ?? "–") MiB | \(b.map { Fmt.mib($0.deviceBytes) } ?? "–") MiB | \(Fmt.mib(live)) MiB |"
            )
            func column(_ bytes: Int?) -> String { bytes.map { String(Double($0) / 1_048_576) } ?? "NaN" }
            rows.append(
                "\(count),\(column(a?.serverBytes)),\(column(b?.serverBytes)),\(column(a?.deviceBytes)),\(column(b?.deviceBytes)),\(column(live))"
            )
        }
        for (report, label) in [(on, "compaction"), (off, "none")] {
            guard let report, let last = report.checkpoints.last else { continue }
            let live = Double(last.liveStateBytes)
            // A warm-up changes the workload measured: its runs are compared only with runs of the same.
            let size = "\(last.operations)" + ((report.warmUp ?? 0) > 0 ? ".warm-up-\(report.warmUp ?? 0)" : "")
            add(
                BenchFigure(
                    id: "storage.server.\(label).\(size)", scenario: "storage",
                    name:
                        "Server bytes after \(last.operations.formatted()) operations, \(label == "none" ? "no compaction" : "compaction")",
                    value: Double(last.serverBytes), unit: "bytes", baselineName: "live state", baselineValue: live,
                    ratio: Double(last.serverBytes) / live, higherIsBetter: false, noise: 0.05))
            add(
                BenchFigure(
                    id: "storage.device.\(label).\(size)", scenario: "storage",
                    name:
                        "Device bytes after \(last.operations.formatted()) operations, \(label == "none" ? "no compaction" : "compaction")",
                    value: Double(last.deviceBytes), unit: "bytes", baselineName: "live state", baselineValue: live,
                    ratio: Double(last.deviceBytes) / live, higherIsBetter: false, noise: 0.05))
        }
        if let on, let first = on.checkpoints.first, let last = on.checkpoints.last, on.checkpoints.count > 1 {
            lines.append("")
            lines.append(
                "With compaction, from \(first.operations.formatted()) to \(last.operations.formatted()) operations: server \(Fmt.ratio(Double(last.serverBytes) / Double(first.serverBytes))), device \(Fmt.ratio(Double(last.deviceBytes) / Double(first.deviceBytes))), live state \(Fmt.ratio(Double(last.liveStateBytes) / Double(first.liveStateBytes))). The workload's notes keep growing (a note lives about 33 operations; its text grows while it lives) until their ages settle, so what history costs is the bytes beyond the live state: server \(Fmt.ratio(ChurnReport.beyondLiveState(\.serverBytes, last, first))), device \(Fmt.ratio(ChurnReport.beyondLiveState(\.deviceBytes, last, first)))."
            )
        }
        if let cost = on?.cost {
            lines.append("")
            lines.append(
                "Compaction's cost: \(Fmt.int(cost.foldedPerSecond)) events folded per second; 50-event pushes meanwhile p50 / p99 \(Fmt.ms(cost.pushP50Milliseconds)) / \(Fmt.ms(cost.pushP99Milliseconds)) ms, against \(Fmt.ms(cost.idlePushP50Milliseconds)) / \(Fmt.ms(cost.idlePushP99Milliseconds)) ms with nothing folding."
            )
            add(
                BenchFigure(
                    id: "storage.compaction.push-p99", scenario: "storage", name: "Push p99 while compaction folds",
                    value: cost.pushP99Milliseconds, unit: "ms", baselineName: "push p99, nothing folding",
                    baselineValue: cost.idlePushP99Milliseconds,
                    ratio: cost.idlePushP99Milliseconds > 0
                        ? cost.pushP99Milliseconds / cost.idlePushP99Milliseconds : nil,
                    higherIsBetter: false, noise: 0.30))
        }
        lines += ["", "![Storage against operations](storage-vs-operations.svg)"]
        writeCSV(
            "storage",
            header: "operations,server_mib_compaction,server_mib_none,device_mib_compaction,device_mib_none,live_mib",
            rows: rows)
        chart(
            "storage-vs-operations", csv: "storage",
            """
            set title "Storage against operations (churn workload)"
            set xlabel "operations"
            set ylabel "MiB"
            set logscale y
            set format x "%.0s%c"
            set key outside right center
            set datafile missing "NaN"
            plot DATA using 1:3 with linespoints lw 2 pt 7 title "server, no compaction", \\
                 DATA using 1:5 with linespoints lw 2 pt 5 title "device, no compaction", \\
                 DATA using 1:2 with linespoints lw 2 pt 9 title "server, compaction", \\
                 DATA using 1:4 with linespoints lw 2 pt 11 title "device, compaction", \\
                 DATA using 1:6 with linespoints lw 2 pt 13 dt 2 title "live state"
            """)
        sections["storage"] = lines
    }

    mutating func bootstrap() {
        let pull = raw.decode(BootstrapReport.self, "bootstrap.json")
        let on = raw.decode(ChurnReport.self, "churn-compaction.json")?.bootstrap
        let none = raw.decode(ChurnReport.self, "churn-none.json")
        let off = none?.bootstrap
        let offKeepingLog = none?.bootstrapKeepingLog
        let agent = raw.decode(AgentBootstrap.self, "bootstrap-agent.json")
        guard pull != nil || on != nil || off != nil else { return }
        var lines: [String] = []
        if let pull, pull.device.events > 0 {
            let device = pull.device
            lines.append(
                "A fresh device pulls and applies \(device.events.formatted()) events (the Notes workload in 16 scopes) while its user edits: \(Fmt.int(device.eventsPerSecond)) events/s in \(String(format: "%.1f", device.seconds)) s, against \(Fmt.int(pull.baseline.eventsPerSecond)) events/s for a plain HTTP client pulling the same pages (the in-run baseline; it parses and discards). Rate of the last tenth of the log over the first: \(Fmt.ratio(pull.flatness)); local edit p99 during it \(Fmt.ms(device.editP99Milliseconds)) ms."
            )
            add(
                BenchFigure(
                    id: "bootstrap.pull.\(device.events)", scenario: "bootstrap",
                    name: "Fresh device: \(device.events.formatted()) events pulled and applied, events/s",
                    value: device.eventsPerSecond, unit: "events/s", baselineName: "plain HTTP client, same pages",
                    baselineValue: pull.baseline.eventsPerSecond,
                    ratio: pull.baseline.eventsPerSecond > 0
                        ? device.eventsPerSecond / pull.baseline.eventsPerSecond : nil,
                    higherIsBetter: true, noise: 0.10))
        }
        if let agent, let pull, agent.seconds > 0 {
            let rate = Double(agent.events) / agent.seconds
            lines.append("")
            lines.append(
                "A fresh `sync-agent sync` process (the headless client, from its start to its exit) reaches the same state in \(String(format: "%.1f", agent.seconds)) s: \(Fmt.int(rate)) events/s, its SQLite file \(Fmt.mib(agent.databaseBytes)) MiB."
            )
            add(
                BenchFigure(
                    id: "bootstrap.agent.\(agent.events)", scenario: "bootstrap",
                    name: "Fresh sync-agent process: \(agent.events.formatted()) events, events/s", value: rate,
                    unit: "events/s", baselineName: "plain HTTP client, same pages",
                    baselineValue: pull.baseline.eventsPerSecond,
                    ratio: pull.baseline.eventsPerSecond > 0 ? rate / pull.baseline.eventsPerSecond : nil,
                    higherIsBetter: true, noise: 0.10))
        }
        let shapes: [(LogShape, BootstrapReport)] = [LogShape.records, .longTail].compactMap { shape in
            raw.decode(BootstrapReport.self, "bootstrap-\(shape.rawValue).json").map { (shape, $0) }
        }
        if !shapes.isEmpty {
            lines.append("")
            lines.append(
                "Many records rather than many events: a fresh device (the engine's defaults) pulls a log where every event creates a note of its own (`records`), and one where most notes have one event and 2 per scope take 30 % of the events (`long-tail`), while its user edits; against a plain HTTP client pulling the same pages."
            )
            lines.append("")
            lines.append(
                "| log | events | device events/s | plain client events/s | ratio | last tenth / first | edit p99 |")
            lines.append("|---|---:|---:|---:|---:|---:|---:|")
            for (shape, run) in shapes where run.device.events > 0 {
                let ratio =
                    run.baseline.eventsPerSecond > 0 ? run.device.eventsPerSecond / run.baseline.eventsPerSecond : 0
                lines.append(
                    "| \(shape.rawValue) | \(run.device.events.formatted()) | \(Fmt.int(run.device.eventsPerSecond)) | \(Fmt.int(run.baseline.eventsPerSecond)) | \(Fmt.ratio(ratio)) | \(Fmt.ratio(run.flatness)) | \(Fmt.ms(run.device.editP99Milliseconds)) ms |"
                )
                add(
                    BenchFigure(
                        id: "bootstrap.\(shape.rawValue).\(run.device.events)", scenario: "bootstrap",
                        name:
                            "Fresh device: \(run.device.events.formatted()) events, \(shape == .records ? "a record each" : "a long tail of records"), events/s",
                        value: run.device.eventsPerSecond, unit: "events/s",
                        baselineName: "plain HTTP client, same pages",
                        baselineValue: run.baseline.eventsPerSecond,
                        ratio: run.baseline.eventsPerSecond > 0 ? ratio : nil, higherIsBetter: true, noise: 0.10))
                add(
                    BenchFigure(
                        id: "bootstrap.\(shape.rawValue).edit-p99.\(run.device.events)", scenario: "bootstrap",
                        name:
                            "Local edit p99 while a fresh device pulls \(run.device.events.formatted()) events (\(shape.rawValue)), ms",
                        value: run.device.editP99Milliseconds, unit: "ms", baselineName: nil, baselineValue: nil,
                        ratio: nil, higherIsBetter: false, noise: 0.30))
            }
        }
        if let on, let off {
            lines.append("")
            lines.append(
                "A fresh device with the engine's defaults reaches the churn history's state: one the server folded, and one it did not (the device then folds on arrival what every other replica has seen, instead of logging it: `SyncEngine.Configuration.foldOnArrival`). The in-run baseline: a device that logs every event it pulls."
            )
            lines.append("")
            lines.append("| history | device | events served | seconds | on the wire | events logged | device file |")
            lines.append("|---|---|---:|---:|---:|---:|---:|")
            var runs = [("with compaction", "defaults", on), ("without", "defaults", off)]
            if let offKeepingLog { runs.append(("without", "logging every event", offKeepingLog)) }
            for (history, device, run) in runs {
                lines.append(
                    "| \(history) | \(device) | \(run.events.formatted()) | \(String(format: "%.2f", run.seconds)) | \(Fmt.mib(run.bytesOnTheWire)) MiB | \((run.loggedEvents ?? run.events).formatted()) | \(Fmt.mib(run.deviceBytes)) MiB |"
                )
            }
            if let offKeepingLog {
                add(
                    BenchFigure(
                        id: "bootstrap.unfolded.\(off.events)", scenario: "bootstrap",
                        name: "Fresh device reaching the unfolded churn history's state, s", value: off.seconds,
                        unit: "s", baselineName: "a device logging every event", baselineValue: offKeepingLog.seconds,
                        ratio: offKeepingLog.seconds > 0 ? off.seconds / offKeepingLog.seconds : nil,
                        higherIsBetter: false, noise: 0.15))
            }
            add(
                BenchFigure(
                    id: "bootstrap.compaction.\(off.events)", scenario: "bootstrap",
                    name: "Fresh device reaching the churn history's state, with compaction", value: on.seconds,
                    unit: "s",
                    baselineName: "the same without compaction", baselineValue: off.seconds,
                    ratio: off.seconds > 0 ? on.seconds / off.seconds : nil, higherIsBetter: false, noise: 0.15))
        }
        writeCSV(
            "bootstrap", header: "case,events,seconds,events_per_s,bytes_wire",
            rows: [
                pull.map {
                    "fresh device,\($0.device.events),\($0.device.seconds),\($0.device.eventsPerSecond),\($0.device.receivedBytesWire)"
                },
                pull.map {
                    "plain HTTP client,\($0.baseline.events),\($0.baseline.seconds),\($0.baseline.eventsPerSecond),\($0.baseline.bytesWire)"
                },
                on.map {
                    "churn history with compaction,\($0.events),\($0.seconds),\($0.eventsPerSecond),\($0.bytesOnTheWire)"
                },
                off.map {
                    "churn history without compaction,\($0.events),\($0.seconds),\($0.eventsPerSecond),\($0.bytesOnTheWire)"
                },
                offKeepingLog.map {
                    "churn history without compaction logging every event,\($0.events),\($0.seconds),\($0.eventsPerSecond),\($0.bytesOnTheWire)"
                },
            ].compactMap { $0 }
                + shapes.flatMap { shape, run in
                    [
                        "fresh device (\(shape.rawValue)),\(run.device.events),\(run.device.seconds),\(run.device.eventsPerSecond),\(run.device.receivedBytesWire)",
                        "plain HTTP client (\(shape.rawValue)),\(run.baseline.events),\(run.baseline.seconds),\(run.baseline.eventsPerSecond),\(run.baseline.bytesWire)",
                    ]
                })
        sections["bootstrap"] = lines
    }

    mutating func blobs() {
        // The PostgreSQL store (the default; its figures keep their ids) and the directory store.
        let stores = [("blobs.json", "blobs", "PostgreSQL"), ("blobs-directory.json", "blobs.directory", "directory")]
        let runs = stores.compactMap { file, id, name -> (BlobsCommand.Result, String, String)? in
            guard let run = raw.decode(BlobsCommand.Result.self, file), !run.runs.isEmpty else { return nil }
            return (run, id, name)
        }
        guard let first = runs.first?.0 else { return }
        let mib = first.bytes >> 20
        let chunks = first.chunkBytes.map { "\($0 >> 20) MiB" } ?? "one"
        var lines = [
            "One attachment of \(mib) MiB (random bytes) attached on a fresh device and uploaded through the blob routes (a session, \(chunks) chunks, the commit's hash check), then opened on a second fresh device (downloaded into its cache, checked against the hash, flushed to disk); against `curl` putting and getting the same file on nginx's static route, in the same run (median of \(first.runs.count)), its get both into a file (the bytes kept, as the device keeps them) and into `/dev/null`. Memory: the largest growth of resident memory over one transfer.",
            "",
            "| store | direction | device MiB/s | curl MiB/s | ratio | curl into a file MiB/s | ratio | device memory growth | server memory growth |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for (run, prefix, storeName) in runs {
            let server = run.serverGrowthBytes.map { Fmt.mib($0) + " MiB" } ?? "–"
            let directions: [(String, Double, Double?, Double?, Double?, Double?, Int)] = [
                (
                    "up", run.uploadMiBPerSecond, run.curlUploadMiBPerSecond, run.uploadRatio, nil, nil,
                    run.runs.map(\.deviceUploadGrowthBytes).max() ?? 0
                ),
                (
                    "down", run.downloadMiBPerSecond, run.curlDownloadMiBPerSecond, run.downloadRatio,
                    run.curlDownloadToFileMiBPerSecond, run.downloadToFileRatio,
                    run.runs.map(\.deviceDownloadGrowthBytes).max() ?? 0
                ),
            ]
            for (name, value, curl, ratio, curlToFile, ratioToFile, device) in directions {
                let rate = { (value: Double?) in value.map { String(format: "%.1f", $0) } ?? "–" }
                lines.append(
                    "| \(storeName) | \(name) | \(rate(value)) | \(rate(curl)) | \(ratio.map(Fmt.ratio) ?? "–") | \(rate(curlToFile)) | \(ratioToFile.map(Fmt.ratio) ?? "–") | \(Fmt.mib(device)) MiB | \(server) |"
                )
                add(
                    BenchFigure(
                        id: "\(prefix).\(name).\(mib)", scenario: "blobs",
                        name: "Attachment of \(mib) MiB \(name) (\(storeName) store), MiB/s", value: value,
                        unit: "MiB/s",
                        baselineName: curl == nil ? nil : "curl on a static route", baselineValue: curl, ratio: ratio,
                        higherIsBetter: true, noise: 0.15))
            }
            add(
                BenchFigure(
                    id: "\(prefix).memory.\(mib)", scenario: "blobs",
                    name: "Attachment of \(mib) MiB (\(storeName) store): largest memory growth",
                    value: Double(max(run.deviceGrowthBytes, run.serverGrowthBytes ?? 0)), unit: "bytes",
                    baselineName: nil, baselineValue: nil, ratio: nil, higherIsBetter: false, noise: 0.25))
        }
        sections["blobs"] = lines
    }

    mutating func crdt() {
        let traces = raw.files(prefix: "trace-").compactMap { raw.decode(TraceCommand.Result.self, at: $0) }
        guard !traces.isEmpty else { return }
        var lines = [
            "The editing traces of `Packages/SyncCRDT/Data/editing-traces` replayed into the FugueMax text CRDT (sequential: one author's edits in order; concurrent: every replica's operations merged into a fresh one). Baseline for sequential traces: the same edits applied to a plain array of characters.",
            "",
            "| trace | kind | ops | replay | plain array | ratio | peak memory | encoded | bytes/op | encoded / text |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for trace in traces {
            lines.append(
                "| \(trace.trace) | \(trace.kind) | \(trace.ops.formatted()) | \(Fmt.ms(trace.replay_ms_median)) ms | \(trace.plain_replay_ms.map { Fmt.ms($0) + " ms" } ?? "–") | \(trace.replay_to_plain.map(Fmt.ratio) ?? "–") | \(Fmt.mib(trace.peak_rss_bytes)) MiB | \(trace.encoded_bytes.formatted()) B | \(String(format: "%.2f", trace.encoded_bytes_per_op)) | \(Fmt.ratio(trace.encoded_to_final_text)) |"
            )
            let name = trace.trace.replacingOccurrences(of: ".json.gz", with: "").replacingOccurrences(
                of: ".json", with: "")
            let spread =
                trace.replay_ms_median > 0 ? (trace.replay_ms_median - trace.replay_ms_min) / trace.replay_ms_median : 0
            add(
                BenchFigure(
                    id: "crdt.\(name).replay", scenario: "crdt", name: "\(name): replay", value: trace.replay_ms_median,
                    unit: "ms", baselineName: trace.plain_replay_ms == nil ? nil : "plain array",
                    baselineValue: trace.plain_replay_ms, ratio: trace.replay_to_plain, higherIsBetter: false,
                    noise: max(0.10, spread)))
            add(
                BenchFigure(
                    id: "crdt.\(name).encoded", scenario: "crdt", name: "\(name): encoded size",
                    value: Double(trace.encoded_bytes), unit: "bytes", baselineName: "final text",
                    baselineValue: Double(trace.final_utf8_bytes), ratio: trace.encoded_to_final_text,
                    higherIsBetter: false, noise: 0.01))
            verdicts.append(
                BenchVerdict(
                    scenario: "crdt", passed: trace.matches_end_content,
                    detail:
                        "\(trace.trace): \(trace.matches_end_content ? "the replayed text matches the trace's end content" : "the replayed text DIFFERS from the trace's end content")"
                ))
        }
        writeCSV(
            "crdt",
            header:
                "trace,kind,ops,replay_ms,plain_replay_ms,replay_to_plain,peak_rss_bytes,encoded_bytes,encoded_bytes_per_op,encoded_to_final_text",
            rows: traces.map {
                "\($0.trace),\($0.kind),\($0.ops),\($0.replay_ms_median),\($0.plain_replay_ms ?? .nan),\($0.replay_to_plain ?? .nan),\($0.peak_rss_bytes),\($0.encoded_bytes),\($0.encoded_bytes_per_op),\($0.encoded_to_final_text)"
            })
        sections["crdt"] = lines
    }

    // MARK: Pieces

    mutating func add(_ figure: BenchFigure) { figures.append(figure) }

    mutating func verdict(_ scenario: String, _ what: String, _ verdict: LoadRunReport.Verdict) {
        verdicts.append(
            BenchVerdict(
                scenario: scenario, passed: verdict.passed,
                detail:
                    "\(what): \(verdict.passed ? "pass" : "FAIL") — \(verdict.serverEvents.formatted()) events on the server; lost \(verdict.lost), duplicated \(verdict.duplicated), diverged \(verdict.diverged), seq gaps \(verdict.gaps)"
            ))
    }

    /// Half the spread of repeated measurements, relative to their median, and at least `floor`.
    func noise(_ values: [Double], floor: Double) -> Double {
        guard values.count > 1, let low = values.min(), let high = values.max() else { return floor }
        let middle = median(values)
        return middle > 0 ? max(floor, (high - low) / 2 / middle) : floor
    }

    func writeCSV(_ name: String, header: String, rows: [String]) {
        let text = ([header] + rows).joined(separator: "\n") + "\n"
        try? text.write(to: folder.appendingPathComponent("\(name).csv"), atomically: true, encoding: .utf8)
    }

    /// Draws `<name>.svg` with gnuplot from `<csv>.csv` (`DATA` in the script names it).
    mutating func chart(_ name: String, csv: String, _ body: String) {
        let script = """
            set terminal svg size 900,440 dynamic enhanced font "Helvetica,13" background rgb "white"
            set output "\(name).svg"
            set datafile separator ","
            set key autotitle columnhead
            set grid lc rgb "#dddddd"
            set border lc rgb "#555555"
            set linetype 1 lc rgb "#1f77b4"
            set linetype 2 lc rgb "#d62728"
            set linetype 3 lc rgb "#2ca02c"
            set linetype 4 lc rgb "#9467bd"
            set linetype 5 lc rgb "#7f7f7f"
            DATA = "\(csv).csv"

            """ + body + "\n"
        let scriptURL = folder.appendingPathComponent("\(name).gp")
        try? script.write(to: scriptURL, atomically: true, encoding: .utf8)
        // Not through Foundation's Process, whose run() on Linux crashes now and then (see ChildProcess).
        do {
            let result = try ChildProcess.run(
                "/usr/bin/env", [gnuplot, scriptURL.lastPathComponent],
                environment: ProcessInfo.processInfo.environment,
                directory: folder.path)
            let svg = folder.appendingPathComponent("\(name).svg")
            if result.status == 0, FileManager.default.fileExists(atPath: svg.path) {
                charts.append("\(name).svg")
            } else {
                print("report: gnuplot failed on \(name).gp: \(String(decoding: result.stderr, as: UTF8.self))")
            }
        } catch {
            print("report: cannot run \(gnuplot) (install gnuplot: scripts/bootstrap.sh): \(error)")
        }
    }

    func missingCharts() -> [String] {
        let expected = [
            "latency": ["throughput-vs-devices.svg", "latency-vs-devices.svg"], "rebuild": ["rebuild-vs-events.svg"],
            "storage": ["storage-vs-operations.svg"],
        ]
        return expected.filter { sections[$0.key] != nil }.flatMap { $0.value }.filter { !charts.contains($0) }.sorted()
    }

    func timings() -> [String: Double] {
        let text = (try? String(contentsOf: raw.folder.appendingPathComponent("timings.tsv"), encoding: .utf8)) ?? ""
        var result: [String: Double] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "\t")
            if parts.count == 2, let seconds = Double(parts[1]) { result[String(parts[0]), default: 0] += seconds }
        }
        return result
    }

    mutating func compare(_ results: BenchResults) {
        guard let baseline, baseline.mode == results.mode else { return }
        let before = Dictionary(baseline.figures.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        for figure in results.figures {
            guard let old = before[figure.id], old.judged > 0, figure.judged.isFinite,
                (figure.ratio == nil) == (old.ratio == nil)
            else { continue }
            let change = figure.judged / old.judged - 1
            let band = 2 * max(figure.noise, old.noise)
            let worse = figure.higherIsBetter ? change < -band : change > band
            let better = figure.higherIsBetter ? change > band : change < -band
            comparisons.append(
                BenchComparison(
                    figure: figure, before: old, change: change, band: band,
                    judgement: worse ? .worse : better ? .better : .same))
        }
    }

    func writeResults(_ results: BenchResults) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        var object = try JSONSerialization.jsonObject(with: encoder.encode(results)) as? [String: Any] ?? [:]
        object["raw"] = raw.all()
        let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
        try data.write(to: folder.appendingPathComponent("results.json"))
    }

    // MARK: Markdown

    func markdown(_ results: BenchResults) -> String {
        let short = String(results.commit.prefix(10))
        let total = results.seconds.values.reduce(0, +)
        var lines = [
            "# Benchmark report: \(short), \(results.startedAt)",
            "",
            "- commit `\(results.commit)`, `make \(results.mode == "quick" ? "bench-quick" : "bench")` (\(results.mode) sizes), \(Fmt.duration(total)) of scenarios",
            "- machine: \(["cpu", "cores", "memory", "os"].compactMap { results.machine[$0] }.joined(separator: ", "))",
            "- every scenario runs its baseline in the same run, so ratios hold on a noisy machine; the server, PostgreSQL and the clients share the cores",
            "",
            "## Headlines",
            "",
            "| figure | value | in-run baseline | ratio |",
            "|---|---:|---:|---:|",
        ]
        let headlines = [
            "throughput.bulk", "throughput.devices", "bootstrap.pull", "bootstrap.agent", "bootstrap.records",
            "bootstrap.long-tail", "bootstrap.compaction", "blobs.up", "blobs.down",
            "bootstrap.unfolded", "storage.server.compaction",
            "storage.device.compaction",
        ]
        for id in headlines {
            // Figures whose size varies carry it in their id (`storage.server.compaction.1000000`): a run
            // of another size is then not compared with this one.
            guard let figure = figures.first(where: { $0.id == id || $0.id.hasPrefix(id + ".") }) else { continue }
            lines.append(
                "| \(figure.name) | \(Fmt.value(figure.value, figure.unit)) | \(figure.baselineValue.map { "\(Fmt.value($0, figure.unit)) (\(figure.baselineName ?? ""))" } ?? "–") | \(figure.ratio.map(Fmt.ratio) ?? "–") |"
            )
        }
        if let collapse = figures.filter({ $0.id.hasPrefix("latency.") && $0.id.hasSuffix(".visible-p99") }).last {
            lines.append("| \(collapse.name) | \(Fmt.value(collapse.value, collapse.unit)) | – | – |")
        }
        lines += ["", "## Verdicts", ""]
        for verdict in verdicts { lines.append("- \(verdict.passed ? "pass" : "**FAIL**"): \(verdict.detail)") }
        if !results.missing.isEmpty { lines.append("- **missing**: \(results.missing.joined(separator: ", "))") }
        lines += ["", "## Against the baseline", ""]
        if let baseline {
            if baseline.mode != results.mode {
                lines.append(
                    "The baseline (`\(baseline.commit.prefix(10))`) is a \(baseline.mode) run and this one a \(results.mode) run: their sizes differ, so nothing is compared."
                )
            } else if comparisons.isEmpty {
                lines.append("No figure of this run is in the baseline.")
            } else {
                let worse = comparisons.filter { $0.judgement == .worse }.count
                let better = comparisons.filter { $0.judgement == .better }.count
                lines.append(
                    "Baseline: `\(baseline.commit.prefix(10))` of \(baseline.startedAt). Each figure is judged on its in-run ratio where it has one (on its value otherwise); a change counts only beyond twice the noise measured between repeated runs (the band). \(worse) worse, \(better) better, \(comparisons.count - worse - better) within the noise."
                )
                lines += [
                    "", "| figure | judged on | baseline | now | change | band | |",
                    "|---|---|---:|---:|---:|---:|---|",
                ]
                for comparison in comparisons {
                    let figure = comparison.figure
                    let onRatio = figure.ratio != nil
                    let mark =
                        switch comparison.judgement {
                        case .worse: "**worse**"
                        case .better: "better"
                        case .same: "="
                        }
                    lines.append(
                        "| \(figure.name) | \(onRatio ? "ratio" : "value") | \(onRatio ? Fmt.ratio(comparison.before.judged) : Fmt.value(comparison.before.value, figure.unit)) | \(onRatio ? Fmt.ratio(figure.judged) : Fmt.value(figure.value, figure.unit)) | \(String(format: "%+.1f%%", comparison.change * 100)) | ±\(String(format: "%.0f%%", comparison.band * 100)) | \(mark) |"
                    )
                }
            }
        } else {
            lines.append("No baseline given (`Benchmarks/results/baseline.json`).")
        }
        for scenario in Self.scenarioOrder {
            guard let body = sections[scenario] else { continue }
            let seconds = results.seconds[scenario].map { " (\(Fmt.duration($0)))" } ?? ""
            lines += ["", "## \(Self.titles[scenario] ?? scenario)\(seconds)", ""] + body
        }
        lines += [
            "",
            "## Reproduce",
            "",
            "`\(results.configuration["command"] ?? (results.mode == "quick" ? "make bench-quick" : "make bench"))` at commit `\(short)`: it builds the release binaries, starts PostgreSQL, and runs the scenarios with the configuration below; `raw/` holds each program's own output.",
            "",
        ]
        for key in results.configuration.keys.sorted() where key != "command" {
            lines.append("- \(key): `\(results.configuration[key] ?? "")`")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// Number formats of the report.
enum Fmt {
    static func int(_ value: Double) -> String {
        value.isFinite ? Int(value.rounded()).formatted() : "–"
    }
    static func ms(_ value: Double) -> String {
        guard value.isFinite else { return "–" }
        return value >= 100 ? Int(value.rounded()).formatted() : String(format: "%.1f", value)
    }
    static func ratio(_ value: Double) -> String {
        guard value.isFinite else { return "–" }
        return value >= 10
            ? String(format: "%.0f×", value)
            : value >= 0.1 ? String(format: "%.2f×", value) : String(format: "%.4f×", value)
    }
    static func mib(_ bytes: Int) -> String { String(format: "%.1f", Double(bytes) / 1_048_576) }
    static func value(_ value: Double, _ unit: String) -> String {
        switch unit {
        case "bytes":
            value >= 1_048_576
                ? "\(mib(Int(value))) MiB"
                : value >= 1024 ? String(format: "%.0f KiB", value / 1024) : "\(Int(value)) B"
        case "ms": "\(ms(value)) ms"
        case "s": String(format: "%.2f s", value)
        default: "\(int(value)) \(unit)"
        }
    }
    static func duration(_ seconds: Double) -> String {
        seconds >= 60
            ? String(format: "%d min %02d s", Int(seconds) / 60, Int(seconds) % 60) : String(format: "%.0f s", seconds)
    }
}

/// report.html: the report's markdown (the subset `ReportBuilder` writes: headings, paragraphs, lists, tables,
/// images, code and bold) as one page, with the SVG charts inline, so the file stands alone.
struct HTMLPage {
    let markdown: String
    let folder: URL

    var html: String {
        var body: [String] = []
        var table: [[String]] = []
        var list: [String] = []
        func flush() {
            if !list.isEmpty {
                body.append("<ul>" + list.map { "<li>\($0)</li>" }.joined() + "</ul>")
                list = []
            }
            if !table.isEmpty {
                var rows = table
                let header = rows.removeFirst()
                if !rows.isEmpty { rows.removeFirst() }  // the alignment row
                body.append(
                    "<table><thead><tr>" + header.map { "<th>\($0)</th>" }.joined() + "</tr></thead><tbody>"
                        + rows.map { "<tr>" + $0.map { "<td>\($0)</td>" }.joined() + "</tr>" }.joined()
                        + "</tbody></table>")
                table = []
            }
        }
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("|") {
                if !list.isEmpty { flush() }
                table.append(
                    line.dropFirst().dropLast().split(separator: "|", omittingEmptySubsequences: false).map {
                        inline($0.trimmingCharacters(in: .whitespaces))
                    })
                continue
            }
            if line.hasPrefix("- ") {
                if !table.isEmpty { flush() }
                list.append(inline(String(line.dropFirst(2))))
                continue
            }
            flush()
            if line.isEmpty { continue }
            if line.hasPrefix("## ") {
                body.append("<h2>\(inline(String(line.dropFirst(3))))</h2>")
            } else if line.hasPrefix("# ") {
                body.append("<h1>\(inline(String(line.dropFirst(2))))</h1>")
            } else if line.hasPrefix("!["), let open = line.firstIndex(of: "("), let close = line.lastIndex(of: ")") {
                let file = String(line[line.index(after: open)..<close])
                let svg = (try? String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)) ?? ""
                let start = svg.range(of: "<svg")?.lowerBound
                body.append(
                    "<figure>\(start.map { String(svg[$0...]) } ?? "<p>(chart \(escape(file)) missing)</p>")</figure>")
            } else {
                body.append("<p>\(inline(line))</p>")
            }
        }
        flush()
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>offline-sync benchmark report</title>
            <style>
            body { font: 15px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
            table { border-collapse: collapse; margin: 1em 0; font-size: 14px; }
            th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
            th:first-child, td:first-child { text-align: left; }
            thead { background: #f3f3f3; }
            code { background: #f3f3f3; padding: 1px 4px; border-radius: 3px; }
            figure { margin: 1em 0; }
            figure svg { max-width: 100%; height: auto; }
            h2 { border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 2em; }
            </style></head><body>
            \(body.joined(separator: "\n"))
            </body></html>

            """
    }

    func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }

    /// `code`, **bold**, escaped.
    func inline(_ text: String) -> String {
        var result = ""
        var code = false
        var bold = false
        var rest = Substring(escape(text))
        while let first = rest.first {
            if first == "`" {
                result += code ? "</code>" : "<code>"
                code.toggle()
                rest = rest.dropFirst()
            } else if !code && rest.hasPrefix("**") {
                result += bold ? "</strong>" : "<strong>"
                bold.toggle()
                rest = rest.dropFirst(2)
            } else {
                result.append(first)
                rest = rest.dropFirst()
            }
        }
        return result
    }
}
