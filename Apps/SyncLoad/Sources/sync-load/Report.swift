import Foundation
import SyncTestSupport

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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git", "rev-parse", "HEAD"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        let data = pipe.fileHandleForReading.readAllRetryingInterrupts()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func write(to directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try JSONEncoder.pretty.encode(self).write(to: directory.appendingPathComponent("report.json"))
        try Data(markdown().utf8).write(to: directory.appendingPathComponent("report.md"))
    }

    /// `report.md`: the tables a person reads.
    func markdown() -> String {
        func mib(_ bytes: Int) -> String { String(format: "%.1f MiB", Double(bytes) / 1_048_576) }
        func number(_ value: Double) -> String { String(format: "%.0f", value) }
        var lines = [
            "# sync-load report", "",
            "- started: \(ISO8601DateFormatter().string(from: startedAt))",
            "- commit: \(commit ?? "unknown")",
            "- machine: \(machine.host), \(machine.cores) cores, \(mib(Int(machine.memoryBytes)))",
            "- command: `\(command.joined(separator: " "))`",
            "- seed: \(configuration.seed)" + (sweep.map { ", sweep \($0)" } ?? ""),
            "- workload: \(configuration.rate) actions/s per device (\(configuration.weights)); "
                + "\(Int(configuration.offlineFraction * 100))% offline in spells of \(configuration.offlineMin)–\(configuration.offlineMax) s; "
                + "faults on \(Int(configuration.faultRate * 100))% of requests; "
                + (configuration.crashInterval > 0
                    ? "a crash per device every \(Int(configuration.crashInterval)) s" : "no crashes")
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
            "", "## Steps", "",
            "| devices | scopes | accepted/s | push p50 / p99 | write-to-visible p50 / p99 | catch-up p99 | label | verdict |",
            "|---:|---:|---:|---:|---:|---:|---|---|",
        ]
        for step in steps {
            let verdict =
                step.verdict.passed
                ? "pass"
                : "FAIL (lost \(step.verdict.lost), duplicated \(step.verdict.duplicated), diverged \(step.verdict.diverged))"
            lines.append(
                "| \(step.devices) | \(step.scopes) | \(number(step.acceptedPerSecond)) | \(step.pushLatencyMs.p50) / \(step.pushLatencyMs.p99) ms | "
                    + "\(step.writeToVisibleMs.p50) / \(step.writeToVisibleMs.p99) ms | \(step.catchUpMs.p99) ms | \(step.label) | \(verdict) |"
            )
        }
        lines += [
            "", "## Where the time went", "",
            "CPU seconds during the writing phase (cores busy = CPU seconds / wall seconds).", "",
            "| devices | wall s | load process | " + watchedNames.joined(separator: " | ") + " | load peak RSS |",
            "|---:|---:|---:|" + watchedNames.map { _ in "---:|" }.joined() + "---:|",
        ]
        for step in steps {
            let cores = { (cpu: Double) in String(format: "%.1f s (%.2f cores)", cpu, cpu / max(step.seconds, 0.001)) }
            lines.append(
                "| \(step.devices) | \(String(format: "%.1f", step.seconds)) | \(cores(step.load.cpuSeconds)) | "
                    + watchedNames.map { cores(step.watchedCPUSeconds[$0] ?? 0) }.joined(separator: " | ")
                    + " | \(mib(step.load.peakResidentBytes)) |")
        }
        lines += [
            "", "## Traffic, faults and errors", "",
            "| devices | edits | accepted | rejected | sent (wire) | received (wire) | faults injected | offline spells | crashes | errors |",
            "|---:|---:|---:|---:|---:|---:|---|---:|---:|---|",
        ]
        for step in steps {
            let faults = step.faults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            let errors = step.errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            lines.append(
                "| \(step.devices) | \(step.edits) | \(step.accepted) | \(step.rejected) | \(mib(step.bytes.sentWire)) | "
                    + "\(mib(step.bytes.receivedWire)) | \(faults.isEmpty ? "none" : faults) | \(step.offlineSpells) | \(step.crashes) | "
                    + "\(errors.isEmpty ? "none" : errors) |")
        }
        lines += ["", "## Verdicts", ""]
        for step in steps {
            let verdict = step.verdict
            lines.append(
                "- \(step.devices) devices: \(verdict.passed ? "**pass**" : "**FAIL**") — \(verdict.serverEvents) events on the server, "
                    + "\(verdict.deviceEvents) made by devices and accepted, \(verdict.rejected) rejected"
                    + (verdict.rejectedByCode.isEmpty
                        ? ""
                        : " ("
                            + verdict.rejectedByCode.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
                            .joined(separator: ", ") + ")")
                    + "; lost \(verdict.lost), "
                    + "duplicated \(verdict.duplicated), diverged \(verdict.diverged), rejected but on the server "
                    + "\(verdict.rejectedOnServer), unsettled \(verdict.unsettled), seq gaps \(verdict.gaps); settled in "
                    + String(format: "%.1f s", verdict.settleSeconds))
            for (kind, findings) in verdict.findings.sorted(by: { $0.key < $1.key }) {
                for finding in findings { lines.append("  - \(kind): \(finding)") }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private var watchedNames: [String] {
        Array(Set(steps.flatMap { $0.watchedCPUSeconds.keys })).sorted()
    }
}
