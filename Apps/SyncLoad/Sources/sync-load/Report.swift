import Foundation
import SyncToolSupport

/// The figures of one step.
struct StepReport: Codable, Sendable {
    struct Bytes: Codable, Sendable {
        var sentRaw: Int
        var sentWire: Int
        var receivedRaw: Int
        var receivedWire: Int
    }
    struct Load: Codable, Sendable {
        var cpuSeconds: Double
        var peakResidentBytes: Int
        /// Resident bytes a replica added as it opened, and a thin device once connected (absent in earlier
        /// versions, and without any).
        var bytesPerReplica: Int? = nil
        var bytesPerThinDevice: Int? = nil
    }

    /// Thin devices (in reports of earlier versions: replicas, without `replicas`).
    var devices: Int
    var replicas: Int? = nil
    var scopes: Int
    /// Seconds of the writing phase (ramp-up included).
    var seconds: Double
    /// Local edits the devices made.
    var edits: Int
    var pushed: Int
    /// Events the server acknowledged (accepted, or already had: a retry).
    var accepted: Int
    var rejected: Int
    var acceptedPerSecond: Double
    /// Events devices pulled that were new to them.
    var pulled: Int
    /// Sync round trips (`POST /v1/sync`), and long-poll pages or batches of live frames applied without one.
    var rounds: Int
    var polledPages: Int
    var pushLatencyMs: LatencySummary
    var writeToVisibleMs: LatencySummary
    /// Like write-to-visible, for events written or read across an offline spell.
    var catchUpMs: LatencySummary
    var bytes: Bytes
    var errors: [String: Int]
    var localErrors: [String: Int]
    var faults: [String: Int]
    var offlineSpells: Int
    var crashes: Int
    /// Rows deleted from devices' files behind their stores' backs (`--corrupt-interval`; absent: none).
    var corruptions: Int? = nil
    /// Ranges the devices repaired, and resets they made, through their checksums (with corruptions).
    var repairs: Int? = nil
    /// New tokens the devices asked for after the server refused theirs (`--token-lifetime`; absent: none).
    var tokensRenewed: Int? = nil
    /// healthy (write-to-visible p99 < 500 ms), degraded (< 2 s) or collapsed.
    var label: String
    /// The load process itself.
    var load: Load
    /// CPU seconds of the processes given with `--watch NAME=PID` (and their children) during the writing.
    var watchedCPUSeconds: [String: Double]
    var verdict: Verdict

    static func label(writeToVisibleP99 p99: UInt64?) -> String {
        guard let p99 else { return "collapsed" }
        return p99 < 500 ? "healthy" : p99 < 2000 ? "degraded" : "collapsed"
    }
}

/// `report.json`: every figure, the configuration, the seed, the commit, the machine.
struct RunReport: Codable, Sendable {
    struct Machine: Codable, Sendable {
        var host: String
        var cores: Int
        var memoryBytes: UInt64
        var os: String
    }

    var tool = "sync-load"
    var startedAt: Date
    var commit: String?
    var machine: Machine
    var command: [String]
    var sweep: String?
    var configuration: StepConfiguration
    var steps: [StepReport]

    var passed: Bool { steps.allSatisfy(\.verdict.passed) }

    static func machine() -> Machine {
        let info = ProcessInfo.processInfo
        return Machine(
            host: info.hostName, cores: info.activeProcessorCount, memoryBytes: info.physicalMemory,
            os: info.operatingSystemVersionString)
    }

    /// The commit of the checkout sync-load runs from (`SYNC_LOAD_COMMIT`, else `git rev-parse HEAD` in the
    /// working directory), or nil.
    static func commit() -> String? {
        if let commit = ProcessInfo.processInfo.environment["SYNC_LOAD_COMMIT"], !commit.isEmpty { return commit }
        // Not through Foundation's Process, whose run() on Linux crashes now and then (see ChildProcess).
        guard
            let result = try? ChildProcess.run(
                "/usr/bin/env", ["git", "rev-parse", "HEAD"], environment: ProcessInfo.processInfo.environment),
            result.status == 0
        else { return nil }
        return String(decoding: result.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func write(to directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try JSONEncoder.pretty.encode(self).write(to: directory.appendingPathComponent("report.json"))
        try Data(markdown().utf8).write(to: directory.appendingPathComponent("report.md"))
        if steps.count > 1 { try Data(sweepChart().utf8).write(to: directory.appendingPathComponent("sweep.svg")) }
    }

    /// `report.md`: the tables a person reads.
    func markdown() -> String {
        (header() + stepsTable() + timeTable() + sweepSection() + trafficTable() + verdicts()).joined(separator: "\n")
            + "\n"
    }

    /// Bytes in MiB and in KiB, and a number rounded, as the report writes them.
    private static func mib(_ bytes: Int) -> String { String(format: "%.1f MiB", Double(bytes) / 1_048_576) }
    private static func kib(_ bytes: Int) -> String { String(format: "%.0f KiB", Double(bytes) / 1024) }
    private static func number(_ value: Double) -> String { String(format: "%.0f", value) }

    /// The report's title, and the run: when, which commit, the machine, the command, the workload and how
    /// devices sync.
    func header() -> [String] {
        [
            "# sync-load report", "",
            "- started: \(ISO8601DateFormatter().string(from: startedAt))",
            "- commit: \(commit ?? "unknown")",
            "- machine: \(machine.host), \(machine.cores) cores, \(Self.mib(Int(machine.memoryBytes)))",
            "- command: `\(command.joined(separator: " "))`",
            "- seed: \(configuration.seed)" + (sweep.map { ", sweep \($0)" } ?? ""),
            "- workload: \(configuration.rate) actions/s per device (\(configuration.weights)); "
                + "\(Int(configuration.offlineFraction * 100))% offline in spells of \(configuration.offlineMin)–\(configuration.offlineMax) s; "
                + "faults on \(Int(configuration.faultRate * 100))% of requests; "
                + (configuration.crashInterval > 0
                    ? "a crash per device every \(Int(configuration.crashInterval)) s" : "no crashes")
                + ((configuration.corruptInterval ?? 0) > 0
                    ? "; a row of a device's log deleted behind its store's back every \(Int(configuration.corruptInterval ?? 0)) s per device"
                    : "")
                + (configuration.tokenLifetime.map { "; tokens that last \(Self.number($0)) s, renewed when refused" }
                    ?? "")
                + ((configuration.clockSkew ?? 0) != 0
                    ? "; 1 device in 5 with its clock \(Int(configuration.clockSkew ?? 0)) s ahead, 1 in 5 as far behind"
                    : ""),
            "- sync: "
                + ((configuration.live ?? false)
                    ? "the live stream (long-poll \(configuration.longPoll) s as its fallback)"
                    : configuration.longPoll > 0 ? "long-poll \(configuration.longPoll) s" : "no long-poll")
                + "; a local write pushed "
                + (configuration.debounce > 0 ? "after \(configuration.debounce) ms" : "at once")
                + ((configuration.minPushInterval ?? 0) > 0
                    ? ", at most one push per \(configuration.minPushInterval ?? 0) ms" : ""),
        ]
    }

    /// `## Steps`: a row per step, its throughput, latencies, label and verdict.
    func stepsTable() -> [String] {
        var lines = [
            "", "## Steps", "",
            "| thin devices | replicas | scopes | accepted/s | push p50 / p99 | write-to-visible p50 / p99 | catch-up p99 | label | verdict |",
            "|---:|---:|---:|---:|---:|---:|---:|---|---|",
        ]
        for step in steps {
            let verdict =
                step.verdict.passed
                ? "pass"
                : "FAIL (lost \(step.verdict.lost), duplicated \(step.verdict.duplicated), diverged \(step.verdict.diverged))"
            lines.append(
                "| \(step.devices) | \(step.replicas ?? 0) | \(step.scopes) | \(Self.number(step.acceptedPerSecond)) | \(step.pushLatencyMs.p50) / \(step.pushLatencyMs.p99) ms | "
                    + "\(step.writeToVisibleMs.p50) / \(step.writeToVisibleMs.p99) ms | \(step.catchUpMs.p99) ms | \(step.label) | \(verdict) |"
            )
        }
        return lines
    }

    /// `## Where the time went`: the CPU and memory each step used, and its busiest process.
    func timeTable() -> [String] {
        var lines = [
            "", "## Where the time went", "",
            "CPU seconds during the writing phase (cores busy = CPU seconds / wall seconds).", "",
            "| devices | wall s | load process | " + watchedNames.joined(separator: " | ")
                + " | load peak RSS | per replica | per thin device |",
            "|---:|---:|---:|" + watchedNames.map { _ in "---:|" }.joined() + "---:|---:|---:|",
        ]
        for step in steps {
            let cores = { (cpu: Double) in String(format: "%.1f s (%.2f cores)", cpu, cpu / max(step.seconds, 0.001)) }
            lines.append(
                "| \(step.devices + (step.replicas ?? 0)) | \(String(format: "%.1f", step.seconds)) | \(cores(step.load.cpuSeconds)) | "
                    + watchedNames.map { cores(step.watchedCPUSeconds[$0] ?? 0) }.joined(separator: " | ")
                    + " | \(Self.mib(step.load.peakResidentBytes)) | \(step.load.bytesPerReplica.map(Self.kib) ?? "–") | "
                    + "\(step.load.bytesPerThinDevice.map(Self.kib) ?? "–") |")
        }
        lines.append("")
        for step in steps { lines.append("- " + busiest(step)) }
        return lines
    }

    /// `## The sweep`, when there is more than one step: where it leaves healthy, and its chart.
    func sweepSection() -> [String] {
        guard steps.count > 1 else { return [] }
        return ["", "## The sweep", "", knee(), "", "![Throughput and latency against devices](sweep.svg)"]
    }

    /// `## Traffic, faults and errors`: a row per step.
    func trafficTable() -> [String] {
        var lines = [
            "", "## Traffic, faults and errors", "",
            "| devices | edits | accepted | rejected | sent (wire) | received (wire) | faults injected | offline spells | crashes | errors |",
            "|---:|---:|---:|---:|---:|---:|---|---:|---:|---|",
        ]
        for step in steps {
            var faults = step.faults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            if let corruptions = step.corruptions {
                faults += (faults.isEmpty ? "" : ", ") + "rows deleted \(corruptions) (repaired: \(step.repairs ?? 0))"
            }
            if let renewed = step.tokensRenewed {
                faults += (faults.isEmpty ? "" : ", ") + "tokens expired and renewed \(renewed)"
            }
            let errors = step.errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            lines.append(
                "| \(step.devices + (step.replicas ?? 0)) | \(step.edits) | \(step.accepted) | \(step.rejected) | \(Self.mib(step.bytes.sentWire)) | "
                    + "\(Self.mib(step.bytes.receivedWire)) | \(faults.isEmpty ? "none" : faults) | \(step.offlineSpells) | \(step.crashes) | "
                    + "\(errors.isEmpty ? "none" : errors) |")
        }
        return lines
    }

    /// `## Verdicts`: each step's verdict, its counts and its first findings.
    func verdicts() -> [String] {
        var lines = ["", "## Verdicts", ""]
        for step in steps {
            let verdict = step.verdict
            lines.append(
                "- \(step.devices) thin devices and \(step.replicas ?? 0) replicas: \(verdict.passed ? "**pass**" : "**FAIL**") — \(verdict.serverEvents) events on the server, "
                    + "\(verdict.deviceEvents) made by devices and accepted, \(verdict.rejected) rejected"
                    + (verdict.rejectedByCode.isEmpty
                        ? ""
                        : " ("
                            + verdict.rejectedByCode.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
                            .joined(separator: ", ") + ")")
                    + "; lost \(verdict.lost), "
                    + "duplicated \(verdict.duplicated), diverged \(verdict.diverged), rejected but on the server "
                    + "\(verdict.rejectedOnServer), unsettled \(verdict.unsettled), seq gaps \(verdict.gaps), "
                    + "delivery \(verdict.delivery ?? 0), attachments unreadable \(verdict.blobs ?? 0) of "
                    + "\(verdict.blobsChecked ?? 0) checked"
                    + (verdict.orphans.map {
                        ", orphaned \($0) after collection (\(verdict.blobsCollected ?? 0) collected)"
                    } ?? "")
                    + "; settled in "
                    + String(format: "%.1f s", verdict.settleSeconds))
            for (kind, findings) in verdict.findings.sorted(by: { $0.key < $1.key }) {
                for finding in findings { lines.append("  - \(kind): \(finding)") }
            }
        }
        return lines
    }

    /// Where the sweep leaves healthy: the last healthy step, the first one past it, and which process was
    /// busiest there (cores = CPU seconds / wall seconds).
    func knee() -> String {
        func total(_ step: StepReport) -> Int { step.devices + (step.replicas ?? 0) }
        let ordered = steps.sorted { total($0) < total($1) }
        guard let first = ordered.firstIndex(where: { $0.label != "healthy" }) else {
            return "Every step was healthy (write-to-visible p99 under 500 ms), up to \(total(ordered.last!)) devices."
        }
        let step = ordered[first]
        let above =
            first == 0 ? "At \(total(step)) devices (the first step)" : "Above \(total(ordered[first - 1])) devices"
        return
            "\(above) write-to-visible p99 exceeds 500 ms (\(total(step)) devices: p99 \(step.writeToVisibleMs.p99) ms, "
            + "\(step.label)); there \(Self.busy(step)), of \(machine.cores) cores."
    }

    /// The processes of a step by cores busy, busiest first.
    static func busy(_ step: StepReport) -> String {
        var busy = step.watchedCPUSeconds.mapValues { $0 / max(step.seconds, 0.001) }
        busy["the load process"] = step.load.cpuSeconds / max(step.seconds, 0.001)
        return busy.sorted { $0.value > $1.value }.map { String(format: "%@ at %.2f cores", $0.key, $0.value) }
            .joined(separator: ", ")
    }

    /// Which process used the machine most in a step, and whether the machine was full.
    func busiest(_ step: StepReport) -> String {
        let total = step.watchedCPUSeconds.values.reduce(step.load.cpuSeconds, +) / max(step.seconds, 0.001)
        return "\(step.devices + (step.replicas ?? 0)) devices (\(step.label)): \(Self.busy(step)); "
            + String(format: "%.2f of %d cores together", total, machine.cores)
            + (total > 0.85 * Double(machine.cores) ? ", the machine was full" : "")
    }

    /// `sweep.svg`: events/s accepted and write-to-visible p50 / p99 against devices (log scale), side by side.
    func sweepChart() -> String {
        let points = steps.map { (Double($0.devices + ($0.replicas ?? 0)), $0) }.sorted { $0.0 < $1.0 }
        let width = 900.0
        let height = 360.0
        let panel = (width - 120) / 2
        let xs = points.map { log10(max($0.0, 1)) }
        let (xMin, xMax) = (xs.min() ?? 0, max((xs.max() ?? 1), (xs.min() ?? 0) + 0.001))
        func x(_ value: Double, _ left: Double) -> Double {
            left + (log10(max(value, 1)) - xMin) / (xMax - xMin) * (panel - 20)
        }
        func y(_ value: Double, _ top: Double) -> Double { height - 50 - value / max(top, 1) * (height - 100) }
        var svg = [
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" font-family=\"Helvetica\" font-size=\"12\">",
            "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>",
        ]
        func series(_ values: [Double], top: Double, left: Double, color: String, name: String, row: Int) {
            let path = zip(points, values).map { point, value in
                String(format: "%.1f,%.1f", x(point.0, left), y(value, top))
            }
            svg.append(
                "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\" points=\"\(path.joined(separator: " "))\"/>"
            )
            for (point, value) in zip(points, values) {
                svg.append(
                    String(
                        format: "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%@\"/>", x(point.0, left),
                        y(value, top),
                        color))
            }
            svg.append(
                "<text x=\"\(Int(left + 10))\" y=\"\(30 + 16 * row)\" fill=\"\(color)\">\(name)</text>")
        }
        func axes(left: Double, top: Double, unit: String) {
            svg.append(
                "<line x1=\"\(left)\" y1=\"\(height - 50)\" x2=\"\(left + panel - 20)\" y2=\"\(height - 50)\" stroke=\"#555\"/>"
            )
            svg.append("<line x1=\"\(left)\" y1=\"50\" x2=\"\(left)\" y2=\"\(height - 50)\" stroke=\"#555\"/>")
            svg.append("<text x=\"\(Int(left - 5))\" y=\"50\" text-anchor=\"end\">\(Int(top))</text>")
            svg.append("<text x=\"\(Int(left - 5))\" y=\"\(Int(height - 50))\" text-anchor=\"end\">0</text>")
            svg.append("<text x=\"\(Int(left))\" y=\"42\">\(unit)</text>")
            for point in points {
                svg.append(
                    "<text x=\"\(Int(x(point.0, left)))\" y=\"\(Int(height - 32))\" text-anchor=\"middle\">\(Int(point.0))</text>"
                )
            }
            svg.append(
                "<text x=\"\(Int(left + panel / 2))\" y=\"\(Int(height - 10))\" text-anchor=\"middle\">devices</text>")
        }
        let accepted = points.map { $0.1.acceptedPerSecond }
        let topAccepted = (accepted.max() ?? 1) * 1.1
        axes(left: 60, top: topAccepted, unit: "events/s accepted")
        series(accepted, top: topAccepted, left: 60, color: "#1f77b4", name: "accepted", row: 1)
        let p50 = points.map { Double($0.1.writeToVisibleMs.p50) }
        let p99 = points.map { Double($0.1.writeToVisibleMs.p99) }
        let topLatency = max((p99.max() ?? 1) * 1.1, 600)
        let right = 60 + panel + 40
        axes(left: right, top: topLatency, unit: "write-to-visible, ms")
        series(p50, top: topLatency, left: right, color: "#2ca02c", name: "p50", row: 1)
        series(p99, top: topLatency, left: right, color: "#d62728", name: "p99", row: 2)
        series(points.map { _ in 500 }, top: topLatency, left: right, color: "#aaaaaa", name: "500 ms", row: 3)
        svg.append("</svg>")
        return svg.joined(separator: "\n") + "\n"
    }

    private var watchedNames: [String] {
        Array(Set(steps.flatMap { $0.watchedCPUSeconds.keys })).sorted()
    }
}
