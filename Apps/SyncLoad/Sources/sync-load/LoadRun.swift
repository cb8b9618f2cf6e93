import AsyncHTTPClient
import Foundation
import NotesStore
import SyncEngine
import SyncEngineHTTPClient
import SyncModels
import SyncStorage
import SyncToolSupport
import Synchronization

/// One step of a load run: its devices, its workload, its faults.
struct StepConfiguration: Codable, Sendable {
    var server: String
    /// Thin devices (`ThinDevice`); in manifests of earlier versions, without `replicas`, full replicas.
    var devices: Int
    /// Full replicas (`Device`), each with its own SQLite file (absent in earlier versions: see `devices`).
    var replicas: Int? = nil
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
    /// Mean seconds between corruptions of one device's file: a confirmed row of its log deleted behind its
    /// store's back, which its engine must find by its checksums and repair (absent or 0: none).
    var corruptInterval: Double? = nil
    /// Seconds without any progress after which the run stops and says what every device waits on (absent
    /// or 0: never).
    var stallTimeout: Double? = nil
    /// The checker's self-test: what the first thin device does to batches it receives.
    var deliveryFaults: [ThinDevice.DeliveryFault]? = nil
    /// The command that compacts and collects on the server before the verdict checks the collection (absent:
    /// not checked).
    var collectCommand: String? = nil
    /// Seconds a device's token lasts: each device asks for a new one when the server refuses its own, a full
    /// replica through its engine's `tokenProvider`, a thin device itself (absent: a day, never renewed).
    var tokenLifetime: Double? = nil

    /// Full replicas and thin devices.
    var replicaCount: Int { replicas ?? devices }
    var thinCount: Int { replicas == nil ? 0 : devices }
}

/// What the devices of a step are: written to `manifest.json` in the data directory, so that
/// `sync-load verify` can reopen them.
struct Manifest: Codable, Sendable {
    var configuration: StepConfiguration
    /// The full replicas.
    var devices: [Device.Plan]
    /// The thin devices (absent in earlier versions: none). Their `path` is unused.
    var thin: [Device.Plan]? = nil

    var scopes: [String] { Array(Set(devices.map(\.scope) + (thin ?? []).map(\.scope))).sorted() }

    /// Replicas are devices 0 to M-1, thin devices M to M+N-1; device i writes to scope i mod scopes.
    static func make(_ configuration: StepConfiguration) -> Manifest {
        let directory = URL(fileURLWithPath: configuration.dataDirectory)
        let scopes = max(1, configuration.scopes)
        let replicas = configuration.replicaCount
        let plans = (0..<(replicas + configuration.thinCount)).map { index in
            let skew = Int64((configuration.clockSkew ?? 0) * 1000)
            return Device.Plan(
                index: index, scope: "\(configuration.scopePrefix)-s\(index % scopes)",
                subject: "\(configuration.scopePrefix)-d\(index)",
                path: directory.appendingPathComponent("device-\(index).sqlite").path,
                clockSkewMilliseconds: skew == 0 ? nil : [skew, -skew, 0, 0, 0][index % 5])
        }
        return Manifest(
            configuration: configuration, devices: Array(plans.prefix(replicas)),
            thin: configuration.replicas == nil ? nil : Array(plans.dropFirst(replicas)))
    }
}

/// Runs a step: replicas open, thin devices ramp up, all edit, go offline and come back, replicas crash
/// and reopen, through injected faults; then the verdict. A watchdog stops a step that no longer moves.
struct LoadRun {
    let configuration: StepConfiguration
    let tokens: Tokens
    let http: HTTPClients
    let watched: [String: Int32]
    /// Called with the partial report when the watchdog finds the step stalled; it does not return.
    var stalled: @Sendable (StepReport) -> Never = { _ in exit(3) }

    /// Replicas open two at a time, each on a Dispatch thread (`offPool`): opening is synchronous work
    /// (files, migrations), and a thousand at once on Swift's pool would hold all its threads.
    private static let opening = AsyncGate(permits: 2)

    func run() async throws -> StepReport {
        let manifest = Manifest.make(configuration)
        try write(manifest)
        guard let baseURL = URL(string: configuration.server) else { throw LoadError("--server: not a URL") }
        let metrics = LoadMetrics()
        let weights = try WorkloadWeights(parsing: configuration.weights)
        let residentBefore = ProcessStats.memory().resident
        let devices = try await replicas(of: manifest, baseURL: baseURL, metrics: metrics)
        let thin = try await thinDevices(of: manifest, baseURL: baseURL, metrics: metrics)
        let cpuBefore = watched.mapValues(ProcessStats.cpuSeconds(tree:))
        let ownBefore = ProcessStats.ownCPUSeconds()
        let start = ContinuousClock.now
        let writeEnd = start + .seconds(configuration.rampUp + configuration.seconds)
        say(
            "sync-load: \(thin.count) thin devices and \(devices.count) replicas in \(configuration.scopes) scopes, "
                + "\(configuration.rate) actions/s each, \(Int(configuration.seconds)) s after \(Int(configuration.rampUp)) s "
                + "of ramp-up, seed \(configuration.seed)")
        let progress = Progress(metrics: metrics, devices: devices, thin: thin, start: start)
        let progressTask = Task { await progress.run() }
        let memory = MemoryMarks(before: residentBefore)
        let watchdog = Watchdog(
            metrics: metrics, devices: devices, thin: thin, timeout: configuration.stallTimeout ?? 0)
        let watchdogTask = Task { [self] in
            guard let stall = await watchdog.run() else { return }
            let totals = metrics.totals
            var report = makeReport(
                totals: totals, seconds: (ContinuousClock.now - start).secondsValue,
                cpu: cpuSince(cpuBefore, ownBefore), memory: memory,
                verdict: Verdict.stalled(stall, serverEvents: 0))
            report.label = "collapsed"
            self.stalled(report)
        }
        let thinLoops = await drive(
            devices, thin: thin, weights: weights, metrics: metrics, memory: memory, start: start, until: writeEnd)
        let writing = ContinuousClock.now - start
        let cpu = cpuSince(cpuBefore, ownBefore)
        progressTask.cancel()
        await progressTask.value
        progress.finish()
        let totals = metrics.totals

        say("sync-load: writing stopped; settling (every device online, no faults, syncing until quiet)")
        let verifier = Verifier(
            manifest: manifest, tokens: tokens, http: http.requests, baseURL: baseURL,
            collectCommand: manifest.configuration.collectCommand)
        let verdict: Verdict
        do {
            verdict = try await verifier.settleAndVerify(devices, thin: thin)
        } catch {
            watchdogTask.cancel()
            for loop in thinLoops { loop.cancel() }
            throw error
        }
        watchdogTask.cancel()
        for loop in thinLoops { loop.cancel() }
        for device in devices { await device.stopSync() }
        return makeReport(
            totals: totals, seconds: writing.secondsValue, cpu: cpu, memory: memory,
            verdict: verdict)
    }

    /// Writes the step's manifest into its data directory, which must not hold one already (the devices of an
    /// earlier run).
    private func write(_ manifest: Manifest) throws {
        let directory = URL(fileURLWithPath: configuration.dataDirectory)
        let manifestFile = directory.appendingPathComponent("manifest.json")
        guard !FileManager.default.fileExists(atPath: manifestFile.path) else {
            throw LoadError(
                "\(directory.path) holds the devices of an earlier run (check them with `sync-load verify`); "
                    + "delete it or choose another --data-dir")
        }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try JSONEncoder.pretty.encode(manifest).write(to: manifestFile)
    }

    /// The manifest's full replicas, not open yet (each opens as its `drive` starts).
    private func replicas(of manifest: Manifest, baseURL: URL, metrics: LoadMetrics) async throws -> [Device] {
        var devices: [Device] = []
        for plan in manifest.devices {
            devices.append(
                try Device(
                    plan: plan, transport: try await transport(plan, baseURL: baseURL, metrics: metrics),
                    metrics: metrics, tokenProvider: tokenRenewal(plan, metrics: metrics),
                    longPoll: configuration.longPoll > 0 ? .seconds(configuration.longPoll) : nil,
                    live: configuration.live ?? false, debounce: .milliseconds(configuration.debounce),
                    minPushInterval: .milliseconds(configuration.minPushInterval ?? 0),
                    pollLinger: .milliseconds(configuration.pollLinger ?? 100),
                    // Devices whose files get damaged verify often, to repair themselves within the run.
                    verifyInterval: (configuration.corruptInterval ?? 0) > 0 ? .seconds(2) : nil))
        }
        return devices
    }

    /// The manifest's thin devices, sharing one gate for their pushes; the first of them applies the
    /// configuration's delivery faults.
    private func thinDevices(of manifest: Manifest, baseURL: URL, metrics: LoadMetrics) async throws -> [ThinDevice] {
        var thin: [ThinDevice] = []
        let options = ThinDevice.Options(
            live: configuration.live ?? false, longPoll: max(configuration.longPoll, 1),
            minPushInterval: .milliseconds(configuration.minPushInterval ?? 0),
            pushGate: AsyncGate(permits: http.requestConnections))
        for plan in manifest.thin ?? [] {
            var deviceOptions = options
            if plan.index == manifest.devices.count {
                deviceOptions.deliveryFaults = configuration.deliveryFaults ?? []
            }
            thin.append(
                try ThinDevice(
                    plan: plan, transport: try await transport(plan, baseURL: baseURL, metrics: metrics, thin: true),
                    baseURL: baseURL, token: try await deviceToken(plan),
                    renewToken: tokenRenewal(plan, metrics: metrics),
                    metrics: metrics, options: deviceOptions, seed: configuration.seed))
        }
        return thin
    }

    /// The writing: every device edits from `start` (thin devices one after another over the ramp-up) until
    /// `end`, and `memory` is marked once the replicas are open and once the ramp-up is over. Returns the
    /// thin devices' receive and push loops, which run on: thin devices follow and push until the verdict is
    /// in; only their edits stop with the writing.
    private func drive(
        _ replicas: [Device], thin: [ThinDevice], weights: WorkloadWeights, metrics: LoadMetrics,
        memory: MemoryMarks, start: ContinuousClock.Instant, until end: ContinuousClock.Instant
    ) async -> [Task<Void, Never>] {
        var thinLoops: [Task<Void, Never>] = []
        await withTaskGroup(of: Void.self) { group in
            for device in replicas {
                group.addTask {
                    await drive(device, weights: weights, metrics: metrics, start: start, until: end)
                }
            }
            group.addTask {
                // The replicas' memory once they are open, before the thin devices' ramp-up adds theirs.
                while replicas.contains(where: { $0.engine == nil }) && ContinuousClock.now < end {
                    try? await Task.sleep(for: .milliseconds(50))
                }
                memory.markReplicasOpen()
            }
            for device in thin {
                let delay =
                    configuration.rampUp * Double(device.plan.index - replicas.count) / Double(max(1, thin.count))
                // The device's tasks run on its event loop (`DeviceLoop`).
                thinLoops.append(
                    Task(executorPreference: device.loop) {
                        try? await device.loop.sleep(until: start + .seconds(delay))
                        await withTaskGroup(of: Void.self) { loops in
                            loops.addTask { await device.receiveLoop() }
                            loops.addTask { await device.pushLoop() }
                        }
                    })
                group.addTask(executorPreference: device.loop) {
                    await drive(device, weights: weights, metrics: metrics, start: start, delay: delay, until: end)
                }
            }
            group.addTask {
                try? await Task.sleep(until: start + .seconds(configuration.rampUp), clock: .continuous)
                memory.markRampedUp()
            }
        }
        return thinLoops
    }

    /// A device's transport; a thin device's sends its pushes and catch-up pulls through the shared pool.
    private func transport(_ plan: Device.Plan, baseURL: URL, metrics: LoadMetrics, thin: Bool = false) async throws
        -> FaultyTransport
    {
        let token = try await deviceToken(plan)
        return FaultyTransport(
            inner: HTTPClientTransport(
                baseURL: baseURL, token: token, client: http.streams, onTraffic: { metrics.moved($0) }),
            requests: thin
                ? HTTPClientTransport(
                    baseURL: baseURL, token: token, client: http.requests, onTraffic: { metrics.moved($0) }) : nil,
            metrics: metrics, faultRate: configuration.faultRate,
            seed: UInt64(plan.index) &+ configuration.seed &* 0x9E37_79B9)
    }

    /// A device's token, with the step's lifetime.
    private func deviceToken(_ plan: Device.Plan) async throws -> String {
        try await tokens.token(
            subject: plan.subject, scopes: [plan.scope], lifetime: configuration.tokenLifetime ?? 24 * 3600)
    }

    /// How a device gets a new token when the server refuses its own: with a lifetime, a new one minted
    /// as the first was; without, none (an authentication failure is then the run's failure).
    private func tokenRenewal(_ plan: Device.Plan, metrics: LoadMetrics) -> (@Sendable () async throws -> String)? {
        guard let lifetime = configuration.tokenLifetime else { return nil }
        let tokens = tokens
        return {
            let token = try await tokens.token(subject: plan.subject, scopes: [plan.scope], lifetime: lifetime)
            metrics.renewedToken()
            return token
        }
    }

    /// CPU seconds since the marks: of the watched processes, and of this one.
    private func cpuSince(_ before: [String: Double], _ ownBefore: Double) -> (watched: [String: Double], own: Double) {
        (
            watched.mapValues(ProcessStats.cpuSeconds(tree:)).merging(before) { after, before in after - before },
            ProcessStats.ownCPUSeconds() - ownBefore
        )
    }

    /// The step's report; `cpu` is what the processes used during the writing.
    private func makeReport(
        totals: LoadMetrics.Totals, seconds wall: Double, cpu: (watched: [String: Double], own: Double),
        memory: MemoryMarks, verdict: Verdict
    ) -> StepReport {
        let w2v = LatencySummary(totals.writeToVisible)
        return StepReport(
            devices: configuration.thinCount, replicas: configuration.replicaCount, scopes: configuration.scopes,
            seconds: wall, edits: totals.edits, pushed: totals.pushed, accepted: totals.accepted,
            rejected: totals.rejected, acceptedPerSecond: Double(totals.accepted) / max(wall, 0.001),
            pulled: totals.pulled, rounds: totals.rounds, polledPages: totals.polledPages,
            pushLatencyMs: LatencySummary(totals.push), writeToVisibleMs: w2v,
            catchUpMs: LatencySummary(totals.catchUp),
            bytes: .init(
                sentRaw: totals.traffic.sentRaw, sentWire: totals.traffic.sentWire,
                receivedRaw: totals.traffic.receivedRaw, receivedWire: totals.traffic.receivedWire),
            errors: totals.errors, localErrors: totals.localErrors, faults: totals.faults,
            offlineSpells: totals.offlineSpells, crashes: totals.crashes,
            corruptions: configuration.corruptInterval == nil ? nil : totals.corruptions,
            repairs: configuration.corruptInterval == nil ? nil : verdict.repairs,
            tokensRenewed: configuration.tokenLifetime == nil ? nil : totals.tokensRenewed,
            label: StepReport.label(writeToVisibleP99: w2v.count == 0 ? nil : w2v.p99),
            load: .init(
                cpuSeconds: cpu.own, peakResidentBytes: ProcessStats.memory().peak,
                bytesPerReplica: memory.perReplica(configuration.replicaCount),
                bytesPerThinDevice: memory.perThin(configuration.thinCount)),
            watchedCPUSeconds: cpu.watched,
            verdict: verdict)
    }

    /// A thin device's edits: it starts after `delay`, then acts at its rate with exponential think times
    /// and goes offline and comes back (so that `offlineFraction` of the devices are offline at any time);
    /// until `end`. (It has no file, so no crashes: those are the replicas'.)
    private func drive(
        _ device: ThinDevice, weights: WorkloadWeights, metrics: LoadMetrics, start: ContinuousClock.Instant,
        delay: Double, until end: ContinuousClock.Instant
    ) async {
        var random = SplitMix64.stream(configuration.seed ^ 0x5EED, device.plan.index)
        let loop = device.loop
        try? await loop.sleep(until: start + .seconds(delay))
        metrics.joined(device.replica)
        var spells = OfflineSpells(configuration, random: &random)
        while ContinuousClock.now < end, !Task.isCancelled {
            let think = spells.exponential(1 / max(configuration.rate, 0.001), &random)
            let left = (end - ContinuousClock.now).secondsValue
            try? await loop.sleep(for: .milliseconds(Int64(max(0, min(think, left)) * 1000)))
            if ContinuousClock.now >= end { break }
            switch spells.due(online: device.transport.isOnline, &random) {
            case .goOffline?:
                device.transport.setOnline(false)
                metrics.wentOffline(device.replica)
            case .comeBack?:
                device.transport.setOnline(true)
                metrics.cameOnline(device.replica)
            case nil: break
            }
            do {
                try await device.act(weights.pick(using: &random)) { try await loop.sleep(for: $0) }
            } catch {
                break
            }
        }
    }

    /// One replica's life: it opens at the start (one at a time, `opening`), then edits at its rate with
    /// exponential think times, goes offline and comes back (so that `offlineFraction` of the devices are
    /// offline at any time), and crashes and reopens now and then; until `end`.
    private func drive(
        _ device: Device, weights: WorkloadWeights, metrics: LoadMetrics, start: ContinuousClock.Instant,
        until end: ContinuousClock.Instant
    ) async {
        var random = SplitMix64.stream(configuration.seed ^ 0x5EED, device.plan.index)
        do {
            device.doing("waiting to open")
            try await Self.opening.run {
                device.doing("opening its file")
                try await offPool { try device.open() }
            }
            if let replica = device.replicaID { metrics.joined(replica) }
        } catch {
            say("device \(device.plan.index): cannot open \(device.plan.path): \(error)")
            return
        }
        device.startSync()
        var user = NotesUser(scope: device.scope, weights: weights, random: random)
        var spells = OfflineSpells(configuration, random: &random)
        var crashAt =
            configuration.crashInterval > 0 ? spells.at(spells.exponential(configuration.crashInterval, &random)) : nil
        let corruptInterval = configuration.corruptInterval ?? 0
        var corruptAt = corruptInterval > 0 ? spells.at(spells.exponential(corruptInterval, &random)) : nil
        while ContinuousClock.now < end, !Task.isCancelled {
            device.doing("thinking")
            let think = spells.exponential(1 / max(configuration.rate, 0.001), &random)
            let left = (end - ContinuousClock.now).secondsValue
            try? await Task.sleep(for: .milliseconds(Int64(max(0, min(think, left)) * 1000)))
            let now = ContinuousClock.now
            if now >= end { break }
            switch spells.due(online: device.transport.isOnline, &random) {
            case .goOffline?:
                device.doing("going offline")
                await device.goOffline()
            case .comeBack?: device.goOnline()
            case nil: break
            }
            if let due = crashAt, now >= due {
                do {
                    device.doing("crashing and reopening")
                    try await Self.opening.run { try await device.crashAndReopen { try await offPool($0) } }
                } catch {
                    say("device \(device.plan.index): cannot reopen after a crash: \(error)")
                    return
                }
                crashAt = spells.at(spells.exponential(configuration.crashInterval, &random))
            }
            // A corruption that found no confirmed row to delete (the device has not synced yet, which a loaded
            // machine can make last) stays due, and is tried again at the next action.
            if let due = corruptAt, now >= due {
                device.doing("corrupting its file")
                // Drawn either way, so that the seed's sequence does not depend on it.
                let next = spells.at(spells.exponential(corruptInterval, &random))
                if (try? await device.corrupt()) == true {
                    metrics.corrupted()
                    corruptAt = next
                }
            }
            guard let client = device.client else { continue }
            do {
                device.doing("editing")
                try await user.act(
                    on: client, edited: { metrics.edited() },
                    pause: { try await Task.sleep(for: $0) })
            } catch is CancellationError {
                break
            } catch {
                metrics.localError(error)
            }
        }
        device.doing("done editing")
    }
}

/// Runs synchronous work on one of Dispatch's threads, leaving Swift's pool to the devices' tasks.
func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}

/// When a device goes offline and comes back: spells of `offlineMin`–`offlineMax` seconds, with online
/// spells between them long enough on average that `offlineFraction` of the devices are offline at once.
struct OfflineSpells {
    enum Change { case goOffline, comeBack }

    let configuration: StepConfiguration
    let meanOnline: Double
    var toggleAt: ContinuousClock.Instant?

    init(_ configuration: StepConfiguration, random: inout SplitMix64) {
        self.configuration = configuration
        let fraction = min(max(configuration.offlineFraction, 0), 0.95)
        let meanOffline = (configuration.offlineMin + configuration.offlineMax) / 2
        meanOnline = fraction > 0 ? meanOffline * (1 - fraction) / fraction : .infinity
        toggleAt = nil
        toggleAt = at(exponential(meanOnline, &random))
    }

    func exponential(_ mean: Double, _ random: inout SplitMix64) -> Double {
        mean.isInfinite ? .infinity : -log(1 - Double.random(in: 0..<1, using: &random)) * mean
    }

    func at(_ seconds: Double) -> ContinuousClock.Instant? {
        seconds.isFinite ? ContinuousClock.now + .milliseconds(Int64(seconds * 1000)) : nil
    }

    /// The change due now, if any, for a device that is `online`; schedules the next one.
    mutating func due(online: Bool, _ random: inout SplitMix64) -> Change? {
        guard let due = toggleAt, ContinuousClock.now >= due else { return nil }
        if online {
            toggleAt = at(Double.random(in: configuration.offlineMin...configuration.offlineMax, using: &random))
            return .goOffline
        }
        toggleAt = at(exponential(meanOnline, &random))
        return .comeBack
    }
}

/// Resident memory at the marks of a step, for the bytes a replica and a thin device cost.
final class MemoryMarks: Sendable {
    private struct Marks {
        var before: Int
        var replicasOpen: Int?
        var rampedUp: Int?
    }
    private let marks: Mutex<Marks>

    init(before: Int) { marks = Mutex(Marks(before: before)) }

    func markReplicasOpen() { marks.withLock { $0.replicasOpen = ProcessStats.memory().resident } }
    func markRampedUp() { marks.withLock { $0.rampedUp = ProcessStats.memory().resident } }

    /// Resident bytes added by opening the replicas, per replica (as they open, before much syncing).
    func perReplica(_ count: Int) -> Int? {
        marks.withLock { marks in
            guard count > 0, let open = marks.replicasOpen else { return nil }
            return max(0, open - marks.before) / count
        }
    }

    /// Resident bytes added from then to the end of the ramp-up, per thin device (connected and editing).
    func perThin(_ count: Int) -> Int? {
        marks.withLock { marks in
            guard count > 0, let open = marks.replicasOpen, let ramped = marks.rampedUp else { return nil }
            return max(0, ramped - open) / count
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
