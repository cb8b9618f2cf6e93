import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import SyncEngineHTTPClient

@main
struct SyncLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-load",
        abstract:
            "Load-test a sync server with many real devices, offline spells and faults; then prove that nothing was lost, duplicated or left diverged.",
        subcommands: [RunCommand.self, VerifyCommand.self], defaultSubcommand: RunCommand.self)
}

/// Where the server is and how devices get tokens.
struct ServerOptions: ParsableArguments {
    @Option(help: "The sync server's base URL.") var server = "http://127.0.0.1:8080"
    @Option(help: "The server's HS256 secret, to mint a token per device (default: SYNC_JWT_SECRET).")
    var jwtSecret: String?
    @Option(help: "One token for every device instead (it must grant every scope of the run).") var token: String?
    @Option(
        help:
            "A shell command that compacts and collects blobs on the server, run once every device has settled (e.g. 'SYNC_BLOB_COLLECT_AFTER_SECONDS=0 sync-server compact'); the verdict then fails on a blob no live note refers to that is left, or one a live note refers to that is gone."
    )
    var collectCommand: String?

    func tokens() async throws -> Tokens {
        try await Tokens(
            secret: jwtSecret ?? ProcessInfo.processInfo.environment["SYNC_JWT_SECRET"], given: token)
    }
}

/// The shared HTTP clients: AsyncHTTPClient on NIO's event loops (one thread per core), so thousands of
/// devices cost sockets, not threads; no response decompression (the transport inflates with the protocol's
/// bound). `streams` holds a connection per live stream or long-poll and the replicas' syncs; `requests`,
/// a pool of `requestConnections` shared by the thin devices' pushes and catch-up pulls.
struct HTTPClients {
    var streams: HTTPClient
    var requests: HTTPClient
    var requestConnections: Int

    init(thin: Int, replicas: Int, requestConnections: Int) {
        func client(_ connections: Int) -> HTTPClient {
            var configuration = HTTPClientTransport.clientConfiguration
            configuration.connectionPool.idleTimeout = .seconds(90)
            configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(16, connections)
            return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        }
        streams = client(thin + replicas * 2 + 16)
        requests = client(requestConnections)
        self.requestConnections = requestConnections
    }

    /// The descriptors a step needs at most: a socket per stream, two per replica and its files (SQLite
    /// opens the database, its WAL and shared memory on each of a writer, two readers and the checkpointer),
    /// the request pool, and a margin for the rest of the process.
    static func descriptors(thin: Int, replicas: Int, requestConnections: Int) -> Int {
        thin + replicas * (2 + 12) + requestConnections + 256
    }

    func shutdown() async throws {
        try await streams.shutdown()
        try await requests.shutdown()
    }
}

/// A thousand devices hold a few thousand files and sockets: raise the soft limit to the hard one; returns
/// the limit then in force.
@discardableResult
func raiseFileLimit() -> Int {
    var limit = rlimit()
    #if os(Linux)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
        let resource = RLIMIT_NOFILE
    #endif
    guard getrlimit(resource, &limit) == 0 else { return Int.max }
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(resource, &limit)
    }
    return Int(clamping: limit.rlim_cur)
}

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Run the load (one step, or a sweep) and its verdict; exit 1 if it fails.")

    @OptionGroup var server: ServerOptions
    @Option(
        help:
            "Thin devices: they speak the protocol, push their edits and follow their scope on the live stream, and check that they receive every event once, in order and unaltered, without a replica."
    )
    var devices = 20
    @Option(
        help:
            "Full replicas besides: each a real device with its own SQLite file, whose state the verdict compares with a fresh bootstrap."
    )
    var replicas = 24
    @Option(help: "Scopes the devices share (device i writes to scope i mod scopes).") var scopes = 4
    @Option(help: "Seconds of writing after the ramp-up.") var duration = 30.0
    @Option(help: "Seconds over which devices start.") var rampUp = 5.0
    @Option(help: "Actions per second per device (exponential think times; a typing burst is one action).")
    var rate = 1.0
    @Option(help: "Relative weights of the actions.") var weights = WorkloadWeights.standard.description
    @Option(help: "Share of devices offline at any time (0 to 0.95).") var offline = 0.1
    @Option(help: "Shortest offline spell, seconds.") var offlineMin = 1.0
    @Option(help: "Longest offline spell, seconds.") var offlineMax = 5.0
    @Option(
        help:
            "Probability that a sync request suffers an injected fault (lost request or response, duplicate, delay, reorder, 500)."
    )
    var faults = 0.05
    @Option(help: "Mean seconds between abrupt closes (and reopens) of one device; 0: none.") var crashInterval = 60.0
    @Option(
        help:
            "Mean seconds between corruptions of one device's file (a confirmed row deleted behind its store's back), which the device must find by its checksums and repair; 0: none."
    )
    var corruptInterval = 0.0
    @Flag(
        inversion: .prefixedNo,
        help: "Devices hold the live stream (GET /v1/live) to see others' edits; --no-live makes them long-poll.")
    var live = true
    @Option(
        help:
            "Long-poll seconds while a device is idle, with --no-live or against a server without the live stream (0: sync only on the engine's interval)."
    )
    var longPoll = 25
    @Option(
        help:
            "Milliseconds a device waits after a local write before it pushes when no push is in flight (the engine's debounce; 0: at once)."
    )
    var debounce = 0
    @Option(
        help:
            "The least milliseconds between two pushes of a device: writes made meanwhile go in the next push (the engine's minPushInterval)."
    )
    var minPushInterval = 50
    @Option(
        help:
            "Milliseconds a device waits after a long-poll brought others' events before it polls again (the engine's long-poll linger)."
    )
    var pollLinger = 100
    @Option(help: "Seconds by which 1 device in 5 has its clock ahead, and 1 in 5 behind (0: every clock is right).")
    var clockSkew = 0.0
    @Option(
        help:
            "Seconds each device's token lasts (minted from the secret): a device asks for a new one whenever the server refuses its own, as an app with short-lived access tokens does (default: a day)."
    )
    var tokenLifetime: Double?
    @Option(help: "The run's seed (workload, offline spells, faults).") var seed: UInt64 = 1
    @Option(help: "Scope names start with this (default: load-<random>).") var scopePrefix: String?
    @Option(help: "Where device files go (default: a temporary folder, deleted after a passing run).")
    var dataDir: String?
    @Flag(help: "Keep the device files after a passing run.") var keep = false
    @Flag(
        help:
            "Encrypt the full replicas' files at rest (keys in replicas.key in the data folder), so that the verdict covers encrypted devices."
    )
    var encryptReplicas = false
    @Option(help: "Write report.json and report.md here.") var out: String?
    @Option(
        help:
            "Run steps: devices=100,1000,10000 (thin devices; scopes scale along), replicas=10,100 (full replicas) or rate=1,2,4."
    )
    var sweep: String?
    @Option(help: "Seconds the verdict waits for every device to settle.") var settleTimeout = 180.0
    @Option(help: "Connections the thin devices share for their pushes and catch-up pulls.")
    var requestConnections = 256
    @Option(
        help:
            "Seconds without progress (no request answered, no event accepted, applied or received, no edit) while work is outstanding, after which the run prints what every stuck device waits on, writes the partial report and exits 3 (0: never)."
    )
    var stallTimeout = 60.0
    @Option(
        help:
            "A self-test of the delivery check: the first thin device skips, duplicates or alters one event it receives (skip,duplicate,alter); the verdict must report each."
    )
    var deliveryFaults: String?
    @Option(
        parsing: .singleValue,
        help: "NAME=PID: report the CPU time of this process and its children (the server, PostgreSQL).")
    var watch: [String] = []

    func run() async throws {
        let fileLimit = raiseFileLimit()
        let tokens = try await server.tokens()
        let prefix = scopePrefix ?? "load-" + String(UInt32.random(in: .min ... .max), radix: 16)
        let base = URL(
            fileURLWithPath: dataDir
                ?? FileManager.default.temporaryDirectory.appendingPathComponent("sync-load-\(prefix)").path)
        if encryptReplicas {
            try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
            ReplicaEncryption.enable(in: base)
        }
        let selfTest = try (deliveryFaults ?? "").split(separator: ",").map { name in
            guard let fault = ThinDevice.DeliveryFault(rawValue: String(name)) else {
                throw ValidationError("--delivery-faults: one or more of skip, duplicate, alter")
            }
            return fault
        }
        var first = StepConfiguration(
            server: server.server, devices: devices, replicas: replicas, scopes: scopes, seconds: duration,
            rampUp: rampUp, rate: rate,
            weights: try WorkloadWeights(parsing: weights).description, offlineFraction: offline,
            offlineMin: offlineMin, offlineMax: max(offlineMin, offlineMax), faultRate: faults,
            crashInterval: crashInterval, longPoll: longPoll, live: live, debounce: debounce,
            minPushInterval: minPushInterval, pollLinger: pollLinger, seed: seed,
            scopePrefix: prefix,
            dataDirectory: base.path, settleTimeout: settleTimeout, clockSkew: clockSkew == 0 ? nil : clockSkew)
        first.stallTimeout = stallTimeout
        first.collectCommand = server.collectCommand
        if let tokenLifetime {
            guard tokens.mints, tokenLifetime > 0 else {
                throw ValidationError("--token-lifetime: more than 0 seconds, with tokens minted from --jwt-secret")
            }
            first.tokenLifetime = tokenLifetime
        }
        first.corruptInterval = corruptInterval > 0 ? corruptInterval : nil
        first.deliveryFaults = selfTest.isEmpty ? nil : selfTest
        let steps = try Self.steps(first, sweep: sweep, base: base)
        var watched: [String: Int32] = [:]
        for entry in watch {
            let parts = entry.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, let pid = Int32(parts[1]) else { throw ValidationError("--watch NAME=PID") }
            watched[String(parts[0])] = pid
        }
        let thin = steps.map(\.thinCount).max() ?? 0
        let full = steps.map(\.replicaCount).max() ?? 0
        let needed = HTTPClients.descriptors(thin: thin, replicas: full, requestConnections: requestConnections)
        guard needed <= fileLimit else {
            throw ValidationError(
                "\(thin) thin devices and \(full) replicas need up to \(needed) open files and sockets, and this process "
                    + "may open \(fileLimit) (ulimit -n; the hard limit, ulimit -Hn, is the most it can raise itself to): "
                    + "raise the limit (for example in /etc/security/limits.conf or with systemd's LimitNOFILE) or run fewer devices"
            )
        }
        let http = HTTPClients(thin: thin, replicas: full, requestConnections: requestConnections)
        var report = RunReport(
            startedAt: Date(), commit: RunReport.commit(), machine: RunReport.machine(),
            command: Self.redacted(CommandLine.arguments), sweep: sweep, configuration: first, steps: [])
        do {
            for step in steps {
                let soFar = report
                let out = out
                let stalled: @Sendable (StepReport) -> Never = { partial in
                    var report = soFar
                    report.steps.append(partial)
                    if let out {
                        try? report.write(to: URL(fileURLWithPath: out))
                        say("sync-load: the partial report is in \(out)/report.md and report.json")
                    }
                    say("sync-load: FAILED: the run stalled (device files kept in \(base.path))")
                    Foundation.exit(3)
                }
                let result = try await LoadRun(
                    configuration: step, tokens: tokens, http: http, watched: watched, stalled: stalled
                ).run()
                report.steps.append(result)
                Self.summarize(result)
                if let out { try report.write(to: URL(fileURLWithPath: out)) }
                if result.verdict.passed && !keep && dataDir == nil {
                    try? FileManager.default.removeItem(atPath: step.dataDirectory)
                }
            }
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
        if let out { say("sync-load: report in \(out)/report.md and report.json") }
        if !report.passed {
            say("sync-load: FAILED (device files kept in \(base.path))")
            throw ExitCode(1)
        }
    }

    /// The command line with secrets left out (a report is published).
    static func redacted(_ arguments: [String]) -> [String] {
        var redacted: [String] = []
        for argument in arguments {
            if let last = redacted.last, ["--jwt-secret", "--token"].contains(last) {
                redacted.append("…")
            } else if argument.hasPrefix("--jwt-secret=") || argument.hasPrefix("--token=") {
                redacted.append(argument.split(separator: "=")[0] + "=…")
            } else {
                redacted.append(argument)
            }
        }
        return redacted
    }

    /// The steps of a run: one, or one per value of `--sweep` (`devices=` thin devices, `replicas=` full
    /// replicas, with the scopes in proportion; or `rate=`).
    static func steps(_ first: StepConfiguration, sweep: String?, base: URL) throws -> [StepConfiguration] {
        guard let sweep else { return [first] }
        let parts = sweep.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2, ["devices", "replicas", "rate"].contains(parts[0]) else {
            throw ValidationError("--sweep devices=N,N,…, replicas=N,N,… or rate=R,R,…")
        }
        let values = parts[1].split(separator: ",").compactMap { Double($0) }
        guard !values.isEmpty else { throw ValidationError("--sweep: no values") }
        return values.enumerated().map { index, value in
            var step = first
            switch parts[0] {
            case "devices":
                step.devices = Int(value)
                step.scopes = max(1, Int((value * Double(first.scopes) / Double(max(first.devices, 1))).rounded()))
            case "replicas":
                step.replicas = Int(value)
                step.scopes = max(
                    1, Int((value * Double(first.scopes) / Double(max(first.replicaCount, 1))).rounded()))
            default:
                step.rate = value
            }
            step.scopePrefix = "\(first.scopePrefix)-\(index)"
            step.dataDirectory = base.appendingPathComponent("step-\(index)").path
            return step
        }
    }

    static func summarize(_ step: StepReport) {
        let verdict = step.verdict
        say(
            "sync-load: \(step.devices) thin devices and \(step.replicas ?? 0) replicas: \(Int(step.acceptedPerSecond)) events/s accepted, push p99 \(step.pushLatencyMs.p99) ms, "
                + "write-to-visible p50 \(step.writeToVisibleMs.p50) ms p99 \(step.writeToVisibleMs.p99) ms (\(step.label)); "
                + "verdict \(verdict.passed ? "PASS" : "FAIL"): \(verdict.serverEvents) events on the server, lost \(verdict.lost), "
                + "duplicated \(verdict.duplicated), diverged \(verdict.diverged), unsettled \(verdict.unsettled), gaps \(verdict.gaps), "
                + "delivery \(verdict.delivery ?? 0), attachments unreadable \(verdict.blobs ?? 0) of \(verdict.blobsChecked ?? 0)"
                + (verdict.orphans.map {
                    ", orphaned \($0) after collection (\(verdict.blobsCollected ?? 0) collected)"
                } ?? "")
        )
        for (kind, findings) in verdict.findings.sorted(by: { $0.key < $1.key }) {
            for finding in findings { say("  \(kind): \(finding)") }
        }
    }
}

/// `sync-load verify`: reopen the devices of a run from their files and judge them again (after a run
/// with `--keep`, or one whose server was tampered with).
struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Reopen a run's devices from --data-dir, settle them and check the verdict again; exit 1 if it fails."
    )

    @OptionGroup var server: ServerOptions
    @Option(help: "The data folder of a run (with its manifest.json).") var dataDir: String
    @Option(help: "Write the verdict as JSON here.") var out: String?
    @Option(help: "Seconds to wait for every device to settle.") var settleTimeout = 60.0

    func run() async throws {
        raiseFileLimit()
        let directory = URL(fileURLWithPath: dataDir)
        ReplicaEncryption.enableIfUsed(in: directory)
        var manifest = try JSONDecoder().decode(
            Manifest.self, from: Data(contentsOf: directory.appendingPathComponent("manifest.json")))
        manifest.configuration.server = server.server
        manifest.configuration.settleTimeout = settleTimeout
        manifest.configuration.collectCommand = server.collectCommand
        guard let baseURL = URL(string: server.server) else { throw ValidationError("--server: not a URL") }
        let tokens = try await server.tokens()
        let http = HTTPClients(thin: 0, replicas: manifest.devices.count, requestConnections: 16)
        let metrics = LoadMetrics()
        let verdict: Verdict
        do {
            var devices: [Device] = []
            for plan in manifest.devices {
                let transport = FaultyTransport(
                    inner: .init(
                        baseURL: baseURL, token: try await tokens.token(subject: plan.subject, scopes: [plan.scope]),
                        client: http.streams),
                    metrics: metrics, faultRate: 0, seed: 0)
                let device = try Device(
                    plan: plan, transport: transport, metrics: metrics, longPoll: nil, live: false)
                try device.open()
                devices.append(device)
            }
            verdict = try await Verifier(
                manifest: manifest, tokens: tokens, http: http.requests, baseURL: baseURL,
                collectCommand: manifest.configuration.collectCommand
            )
            .settleAndVerify(devices)
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
        let json = try JSONEncoder.pretty.encode(verdict)
        if let out { try json.write(to: URL(fileURLWithPath: out)) }
        FileHandle.standardOutput.write(json + Data("\n".utf8))
        for (kind, findings) in verdict.findings.sorted(by: { $0.key < $1.key }) {
            for finding in findings { say("\(kind): \(finding)") }
        }
        if !verdict.passed { throw ExitCode(1) }
    }
}

/// `--encrypt-replicas`: every store the process opens with the default storage configuration (the full
/// replicas, and the verdict's fresh device) is encrypted under one key file in the data folder.
enum ReplicaEncryption {
    static func keyFile(in directory: URL) -> String { directory.appendingPathComponent("replicas.key").path }

    static func enable(in directory: URL) {
        setenv("SYNC_STORAGE_KEY_FILE", keyFile(in: directory), 1)
    }

    /// `verify` on a run's folder: encrypted if the run was.
    static func enableIfUsed(in directory: URL) {
        if FileManager.default.fileExists(atPath: keyFile(in: directory)) { enable(in: directory) }
    }
}
