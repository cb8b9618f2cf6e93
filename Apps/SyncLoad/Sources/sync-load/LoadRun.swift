import AsyncHTTPClient
import Foundation
import NotesStore
import SyncEngine
import SyncEngineHTTPClient
import SyncModels
import SyncTestSupport

/// One step of a load run: its devices, its workload, its faults.
struct StepConfiguration: Codable, Sendable {
    var server: String
    var devices: Int
    var scopes: Int
    /// Seconds of writing (after the ramp-up).
    var seconds: Double
    var rampUp: Double
    /// Actions per second per device (a typing burst is one action of several edits).
    var rate: Double
    var weights: String
    /// The share of devices offline at any time, and the length of one offline spell.
    var offlineFraction: Double
    var offlineMin: Double
    var offlineMax: Double
    /// The probability that a `POST /v1/sync` suffers an injected fault.
    var faultRate: Double
    /// Mean seconds between abrupt closes of one device (0: none).
    var crashInterval: Double
    /// Long-poll seconds: the fallback of the live stream, or the way devices wait with `live` off.
    var longPoll: Int
    /// Whether devices hold the live stream (absent in manifests of earlier versions, which long-polled).
    var live: Bool? = nil
    /// Milliseconds a device waits after a local write before it pushes when no push is in flight (0: at once;
    /// earlier versions waited 250).
    var debounce: Int = 0
    /// The least milliseconds between two pushes of a device (absent in manifests of earlier versions: none).
    var minPushInterval: Int? = nil
    /// Milliseconds a device waits after a long-poll brought others' events before it polls again (absent in
    /// manifests of earlier versions: the engine's default, 100).
    var pollLinger: Int? = nil
    var seed: UInt64
    /// Scope names are this, then `-s<k>`.
    var scopePrefix: String
    var dataDirectory: String
    var settleTimeout: Double
    /// Seconds by which 1 device in 5 runs ahead, and 1 in 5 behind (absent or 0: every clock is right).
    var clockSkew: Double? = nil
}

/// What the devices of a step are: written to `manifest.json` in the data directory, so that
/// `sync-load verify` can reopen them.
struct Manifest: Codable, Sendable {
    var configuration: StepConfiguration
    var devices: [Device.Plan]

    var scopes: [String] { Array(Set(devices.map(\.scope))).sorted() }

    static func make(_ configuration: StepConfiguration) -> Manifest {
        let directory = URL(fileURLWithPath: configuration.dataDirectory)
        let scopes = max(1, configuration.scopes)
        return Manifest(
            configuration: configuration,
            devices: (0..<configuration.devices).map { index in
                let skew = Int64((configuration.clockSkew ?? 0) * 1000)
                return Device.Plan(
                    index: index, scope: "\(configuration.scopePrefix)-s\(index % scopes)",
                    subject: "\(configuration.scopePrefix)-d\(index)",
                    path: directory.appendingPathComponent("device-\(index).sqlite").path,
                    clockSkewMilliseconds: skew == 0 ? nil : [skew, -skew, 0, 0, 0][index % 5])
            })
    }
}

/// Runs a step: devices ramp up, edit, go offline and come back, crash and reopen, through injected
/// faults; then the verdict.
struct LoadRun {
    let configuration: StepConfiguration
    let tokens: Tokens
    let http: HTTPClient
    let watched: [String: Int32]

    func run() async throws -> StepReport {
        let manifest = Manifest.make(configuration)
        let directory = URL(fileURLWithPath: configuration.dataDirectory)
        let manifestFile = directory.appendingPathComponent("manifest.json")
        guard !FileManager.default.fileExists(atPath: manifestFile.path) else {
            throw LoadError(
                "\(directory.path) holds the devices of an earlier run (check them with `sync-load verify`); "
                    + "delete it or choose another --data-dir")
        }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try JSONEncoder.pretty.encode(manifest).write(to: manifestFile)
        guard let baseURL = URL(string: configuration.server) else { throw LoadError("--server: not a URL") }
        let metrics = LoadMetrics()
        let weights = try WorkloadWeights(parsing: configuration.weights)
        var devices: [Device] = []
        for plan in manifest.devices {
            let transport = FaultyTransport(
                inner: HTTPClientTransport(
                    baseURL: baseURL, token: try await tokens.token(subject: plan.subject, scopes: [plan.scope]),
                    client: http, onTraffic: { metrics.moved($0) }),
                metrics: metrics, faultRate: configuration.faultRate,
                seed: UInt64(plan.index) &+ configuration.seed &* 0x9E37_79B9)
            devices.append(
                try Device(
                    plan: plan, transport: transport, metrics: metrics,
                    longPoll: configuration.longPoll > 0 ? .seconds(configuration.longPoll) : nil,
                    live: configuration.live ?? false, debounce: .milliseconds(configuration.debounce),
                    minPushInterval: .milliseconds(configuration.minPushInterval ?? 0),
                    pollLinger: .milliseconds(configuration.pollLinger ?? 100)))
        }
        let cpuBefore = watched.mapValues(ProcessStats.cpuSeconds(tree:))
        let ownBefore = ProcessStats.ownCPUSeconds()
        let start = ContinuousClock.now
        let writeEnd = start + .seconds(configuration.rampUp + configuration.seconds)
        say(
            "sync-load: \(configuration.devices) devices in \(configuration.scopes) scopes, \(configuration.rate) actions/s each, "
                + "\(Int(configuration.seconds)) s after \(Int(configuration.rampUp)) s of ramp-up, seed \(configuration.seed)"
        )
        let progress = Progress(metrics: metrics, devices: devices, start: start)
        let progressTask = Task { await progress.run() }
        await withTaskGroup(of: Void.self) { group in
            for device in devices {
                group.addTask {
                    await drive(device, weights: weights, metrics: metrics, start: start, until: writeEnd)
                }
            }
        }
        let writing = ContinuousClock.now - start
        progressTask.cancel()
        await progressTask.value
        progress.finish()
        let totals = metrics.totals
        let cpu = watched.mapValues(ProcessStats.cpuSeconds(tree:))
        let own = ProcessStats.ownCPUSeconds() - ownBefore
        let memory = ProcessStats.memory()

        say("sync-load: writing stopped; settling (every device online, no faults, syncing until quiet)")
        let verifier = Verifier(manifest: manifest, tokens: tokens, http: http, baseURL: baseURL)
        let verdict = try await verifier.settleAndVerify(devices)
        for device in devices { await device.stopSync() }

        let wall = writing.secondsValue
        let w2v = LatencySummary(totals.writeToVisible)
        return StepReport(
            devices: configuration.devices, scopes: configuration.scopes, seconds: wall,
            edits: totals.edits, pushed: totals.pushed, accepted: totals.accepted, rejected: totals.rejected,
            acceptedPerSecond: Double(totals.accepted) / max(wall, 0.001), pulled: totals.pulled,
            rounds: totals.rounds, polledPages: totals.polledPages,
            pushLatencyMs: LatencySummary(totals.push), writeToVisibleMs: w2v,
            catchUpMs: LatencySummary(totals.catchUp),
            bytes: .init(
                sentRaw: totals.traffic.sentRaw, sentWire: totals.traffic.sentWire,
                receivedRaw: totals.traffic.receivedRaw, receivedWire: totals.traffic.receivedWire),
            errors: totals.errors, localErrors: totals.localErrors, faults: totals.faults,
            offlineSpells: totals.offlineSpells, crashes: totals.crashes,
            label: StepReport.label(writeToVisibleP99: w2v.count == 0 ? nil : w2v.p99),
            load: .init(cpuSeconds: own, peakResidentBytes: memory.peak),
            watchedCPUSeconds: cpu.merging(cpuBefore) { after, before in after - before },
            verdict: verdict)
    }

    /// One device's life: it starts during the ramp-up, then edits at its rate with exponential think times,
    /// goes offline and comes back (so that `offlineFraction` of the devices are offline at any time), and
    /// crashes and reopens now and then; until `end`.
    private func drive(
        _ device: Device, weights: WorkloadWeights, metrics: LoadMetrics, start: ContinuousClock.Instant,
        until end: ContinuousClock.Instant
    ) async {
        var random = SplitMix64.stream(configuration.seed ^ 0x5EED, device.plan.index)
        let delay = configuration.rampUp * Double(device.plan.index) / Double(max(1, configuration.devices))
        try? await Task.sleep(until: start + .seconds(delay), clock: .continuous)
        do {
            try device.open()
            if let replica = device.replicaID { metrics.joined(replica) }
        } catch {
            say("device \(device.plan.index): cannot open \(device.plan.path): \(error)")
            return
        }
        device.startSync()
        var user = NotesUser(scope: device.scope, weights: weights, random: random)
        let fraction = min(max(configuration.offlineFraction, 0), 0.95)
        let meanOffline = (configuration.offlineMin + configuration.offlineMax) / 2
        let meanOnline = fraction > 0 ? meanOffline * (1 - fraction) / fraction : .infinity
        func exponential(_ mean: Double) -> Double {
            mean.isInfinite ? .infinity : -log(1 - Double.random(in: 0..<1, using: &random)) * mean
        }
        func at(_ seconds: Double) -> ContinuousClock.Instant? {
            seconds.isFinite ? ContinuousClock.now + .milliseconds(Int64(seconds * 1000)) : nil
        }
        var toggleAt = at(exponential(meanOnline))
        var crashAt = configuration.crashInterval > 0 ? at(exponential(configuration.crashInterval)) : nil
        while ContinuousClock.now < end, !Task.isCancelled {
            let think = exponential(1 / max(configuration.rate, 0.001))
            let left = (end - ContinuousClock.now).secondsValue
            try? await Task.sleep(for: .milliseconds(Int64(max(0, min(think, left)) * 1000)))
            let now = ContinuousClock.now
            if now >= end { break }
            if let due = toggleAt, now >= due {
                if device.transport.isOnline {
                    await device.goOffline()
                    toggleAt = at(
                        Double.random(in: configuration.offlineMin...configuration.offlineMax, using: &random))
                } else {
                    device.goOnline()
                    toggleAt = at(exponential(meanOnline))
                }
            }
            if let due = crashAt, now >= due {
                do {
                    try await device.crashAndReopen()
                } catch {
                    say("device \(device.plan.index): cannot reopen after a crash: \(error)")
                    return
                }
                crashAt = at(exponential(configuration.crashInterval))
            }
            guard let client = device.client else { continue }
            do {
                try await user.act(
                    on: client, edited: { metrics.edited() },
                    pause: { try await Task.sleep(for: $0) })
            } catch is CancellationError {
                break
            } catch {
                metrics.localError(error)
            }
        }
    }
}

extension JSONEncoder {
    static var pretty: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }
}

/// A line on standard error.
func say(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}
