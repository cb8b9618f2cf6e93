import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import SyncEngine
import SyncEngineHTTPClient
import SyncModels
import SyncProtocol
import SyncServer
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `sync-bench fanout`: many devices long-polling, woken by pushes.
///
/// Opens `--devices` waiting devices from this process, each with its own token (minted from `--jwt-secret`)
/// and its own connection, spread over `--scopes` scopes, each long-polling `GET /v1/pull?wait=` through
/// `HTTPClientTransport` as a device's engine does. Once the server reports them all waiting
/// (`sync_longpolls_active`), it pushes: one event into the first scope (`--duration 0`), or one event a
/// second into each of `--push-scopes` scopes for `--duration` seconds. It reports how many of the waiters
/// that should get each event got it, the latency from the push to each waiter's answer (p50/p99/max),
/// errors by kind, the time the connect burst took, and with `--server-pid` the server's RSS (before, with
/// everyone waiting, per waiting connection) and CPU.
///
/// With `--stream`, each device holds one `GET /v1/live` stream instead (see FanoutStreamClient.swift): the
/// same pushes and measures, the readiness read from `sync_live_subscribers`.
struct FanoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fanout",
        abstract: "Open many long-polling devices, push, and measure how many are woken with the event and how fast.")

    @Option(help: "Base URL of the server.") var server: String = "http://127.0.0.1:8080"
    @Option(help: "The server's JWT secret, to mint a token per device (or SYNC_JWT_SECRET).") var jwtSecret: String?
    @Option(help: "Waiting devices.") var devices: Int = 1000
    @Option(help: "Scopes the devices are spread over (device i waits on scope i mod scopes).") var scopes: Int = 1
    @Option(help: "Seconds each long-poll waits (at most the server's SYNC_MAX_WAIT_SECONDS, default 30).")
    var wait: Int = 25
    @Option(help: "Seconds of pushes, one a second per push scope (0: a single push into the first scope).")
    var duration: Int = 0
    @Option(help: "Scopes pushed into each second (with --duration).") var pushScopes: Int = 100
    @Flag(help: "Push into every push scope at the top of each second, instead of spread over the second.")
    var together = false
    @Option(help: "Seconds to give the devices to be waiting before pushing anyway.") var connectTimeout: Int = 120
    @Option(
        name: .customLong("also-server"),
        help: """
            Another server on the same database (repeatable): the long-polling devices are spread over --server \
            and these in turn, while the pushes go to --server, so that the others learn of them from the \
            database's notifications; the report gives those devices' latencies apart.
            """)
    var alsoServers: [String] = []
    @Option(help: "The server's process id, to report its memory and CPU.") var serverPid: Int32?
    @Flag(help: "Each device holds one live stream (GET /v1/live) instead of long-polling.") var stream = false
    @Option(help: "With --stream: streams opened at a time, each batch subscribed before the next.")
    var connectBatch: Int = FanoutCommand.devicesPerClient
    @Option(help: "Prefix of the scopes (a fresh one per run by default, so every scope starts empty).")
    var scopePrefix: String?
    @Flag(help: "Print one JSON object instead of text.") var json = false

    /// Waiting devices per HTTP client.
    static let devicesPerClient = 256

    func validate() throws {
        guard alsoServers.isEmpty || !stream else {
            throw ValidationError("--also-server spreads long-polling devices; it does not apply to --stream")
        }
        guard devices > 0, scopes > 0, wait > 0, duration >= 0, pushScopes > 0, connectBatch > 0,
            duration == 0 || pushScopes <= scopes
        else {
            throw ValidationError("counts must be positive, and --push-scopes at most --scopes")
        }
    }

    func run() async throws {
        guard let secret = jwtSecret ?? ProcessInfo.processInfo.environment["SYNC_JWT_SECRET"] else {
            throw ValidationError("pass --jwt-secret or set SYNC_JWT_SECRET (the server's)")
        }
        // A waiting device holds a socket.
        FileLimit.raiseToHardLimit()
        let base = server.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        let bases = [base] + alsoServers.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "/")) }
        let prefix = scopePrefix ?? "fanout-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
        let scopeList = try (0..<scopes).map { try Scope("\(prefix)-\($0)") }
        let verifier = await TokenVerifier(secret: secret)
        var tokens: [String] = []
        tokens.reserveCapacity(devices)
        for index in 0..<devices {
            tokens.append(
                try await verifier.mint(
                    subject: "fanout-device-\(index)", scopes: [scopeList[index % scopes].name], ttl: 3600))
        }
        let pusherToken = try await verifier.mint(
            subject: "fanout-pusher", scopes: scopeList.prefix(max(1, pushScopes)).map(\.name), ttl: 3600)
        if stream {
            // Pushes and /metrics on their own connections, beside the devices' raw ones.
            let control = HTTPClient(eventLoopGroupProvider: .singleton)
            do {
                try await runStream(
                    base: base, scopeList: scopeList, tokens: tokens, pusherToken: pusherToken, verifier: verifier,
                    control: control)
            } catch {
                try? await control.shutdown()
                throw error
            }
            try await control.shutdown()
            return
        }

        // One connection per waiting device (a long-poll holds its connection), on NIO's event loops, in
        // clients of `Self.devicesPerClient` devices: a client's pool looks for an idle connection and counts
        // its connections by walking all of them, which with 10,000 in one pool took a third of this process's
        // CPU while the answers came in.
        var configuration = HTTPClient.Configuration()
        configuration.decompression = .disabled
        configuration.connectionPool = .init(
            idleTimeout: .seconds(Int64(wait) + 60),
            concurrentHTTP1ConnectionsPerHostSoftLimit: min(devices, Self.devicesPerClient) + 64)
        configuration.timeout.connect = .seconds(30)
        let clients = (0..<(devices + Self.devicesPerClient - 1) / Self.devicesPerClient).map { _ in
            HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        }
        // Pushes and /metrics on their own connections, never queued behind the waiters'.
        let control = HTTPClient(eventLoopGroupProvider: .singleton)
        let record = FanoutRecord()
        let serverBefore = serverPid.map { ProcessSample(pid: $0) }
        let started = ContinuousClock.now

        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<devices {
                // Device i on server i mod servers; a client's connections all go to one server.
                let server = (index / Self.devicesPerClient) % bases.count
                let transport = HTTPClientTransport(
                    baseURL: URL(string: bases[server])!, token: tokens[index],
                    client: clients[index / Self.devicesPerClient], timeout: .seconds(Int64(wait) + 60))
                let scope = scopeList[index % scopes]
                group.addTask {
                    await Self.waitLoop(
                        transport: transport, scope: scope, wait: wait, record: record, remote: server > 0)
                }
            }
            // Everyone waiting: the server's gauge, read from /metrics.
            var waiting = 0
            while ContinuousClock.now - started < .seconds(connectTimeout) {
                var counted = 0
                for server in bases {
                    counted += (try? await Self.longPollsActive(base: server, http: control)) ?? 0
                }
                waiting = max(waiting, counted)
                if waiting >= devices { break }
                // A refusal no retry can mend (a wait past the server's limit, a bad token): stop here.
                if let refusal = record.refusal {
                    throw ValidationError("the server refused the long-polls: \(refusal)")
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            let connected = ContinuousClock.now - started
            let serverWaiting = serverPid.map { ProcessSample(pid: $0) }
            let clientWaiting = ProcessSample(pid: getpid())
            let expected = try await pushPhase(scopeList: scopeList, start: started + connected) { scope, seed in
                try await Self.push(
                    into: scope, base: base, token: pusherToken, http: control, record: record, seed: seed)
            }
            // Give the last answers time to arrive, then stop the waiters.
            let settle = ContinuousClock.now + .seconds(10)
            while record.delivered < expected, ContinuousClock.now < settle {
                try await Task.sleep(for: .milliseconds(50))
            }
            let serverAfter = serverPid.map { ProcessSample(pid: $0) }
            let clientAfter = ProcessSample(pid: getpid())
            record.stop()
            group.cancelAll()
            let report = record.report(
                devices: devices, scopes: scopes, expected: expected, waiting: waiting, connectSeconds: connected,
                server: (serverBefore, serverWaiting, serverAfter), pushes: duration == 0 ? 1 : duration * pushScopes,
                clientCPUSeconds: clientAfter.cpuSeconds - clientWaiting.cpuSeconds)
            if json {
                print(String(decoding: try JSONEncoder.sortedKeys.encode(report), as: UTF8.self))
            } else {
                print(report.text)
            }
        }
        for client in clients { try await client.shutdown() }
        try await control.shutdown()
    }

    /// One device: long-polls from the scope's start, recording every event it gets and every failure.
    /// `remote`: the device waits on another server than the one pushed to.
    static func waitLoop(
        transport: HTTPClientTransport, scope: Scope, wait: Int, record: FanoutRecord, remote: Bool = false
    ) async {
        var cursor = ScopeCursor()
        while !Task.isCancelled, !record.stopped {
            do {
                let page = try await transport.pull(PullRequest(cursor: cursor, scopes: [scope], wait: wait))
                let received = ContinuousClock.now
                record.received(page.events.map(\.id), at: received, remote: remote)
                cursor = (try? ScopeCursor(encoded: page.cursor)) ?? cursor
            } catch {
                if record.stopped || Task.isCancelled { return }
                record.failed(error)
                if case .permanent = error { return }
                var retryAfter: Duration = .seconds(1)
                if case .retryable(_, let after) = error, let after { retryAfter = after }
                try? await Task.sleep(for: retryAfter)
            }
        }
    }

    /// Pushes as asked: one event into the first scope (`--duration 0`), or one a second into each push scope
    /// for `--duration` seconds; returns how many deliveries to expect.
    func pushPhase(
        scopeList: [Scope], start: ContinuousClock.Instant,
        push: @escaping @Sendable (Scope, UInt64) async throws -> Void
    ) async throws -> Int {
        if duration == 0 {
            try await push(scopeList[0], 1)
            return (0..<devices).filter { $0 % scopes == 0 }.count
        }
        let (duration, pushScopes, together) = (self.duration, self.pushScopes, self.together)
        var seed: UInt64 = 1
        // Each push scope's writer pushes once a second, at its own offset into the second (spread evenly, as
        // independent devices' pushes are) or all at the top of it (`--together`).
        try await withThrowingTaskGroup(of: Void.self) { pushes in
            for (index, scope) in scopeList.prefix(pushScopes).enumerated() {
                let offset: Duration = together ? .zero : .seconds(1) * (Double(index) / Double(pushScopes))
                let first = seed
                seed += UInt64(duration)
                pushes.addTask {
                    for second in 0..<duration {
                        try await Task.sleep(until: start + .seconds(second) + offset, clock: .continuous)
                        try await push(scope, first + UInt64(second))
                    }
                }
            }
            try await pushes.waitForAll()
        }
        let perScope = (0..<scopes).map { scope in (0..<devices).filter { $0 % scopes == scope }.count }
        return duration * perScope.prefix(pushScopes).reduce(0, +)
    }

    /// Pushes one new note into `scope`, remembering when the push was sent.
    static func push(
        into scope: Scope, base: String, token: String, http: HTTPClient, record: FanoutRecord, seed: UInt64
    ) async throws {
        try await sendPush(into: scope, base: base, token: token, http: http, seed: seed) { record.pushed($0, at: $1) }
    }

    /// Pushes one new note into `scope`; `sending` learns its id and the time just before it is sent. Returns
    /// that time and the `seq` the server gave it.
    @discardableResult
    static func sendPush(
        into scope: Scope, base: String, token: String, http: HTTPClient, seed: UInt64,
        sending: (EventID, ContinuousClock.Instant) -> Void = { _, _ in }
    ) async throws -> (at: ContinuousClock.Instant, seq: Int64?) {
        var event = NotesWorkload(notes: 1, seed: seed &+ UInt64.random(in: 0...UInt64(UInt32.max)) << 16, scope: scope)
            .events(count: 1)[0]
        event.seq = nil
        event.receivedAt = nil
        var request = HTTPClientRequest(url: base + "/v1/push")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(
            ByteBuffer(bytes: try WireCodec().encode(PushRequest(replica: event.dot.replica, events: [event]))))
        let sent = ContinuousClock.now
        sending(event.id, sent)
        let response = try await http.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        guard response.status == .ok else {
            throw ValidationError("push answered \(response.status.code): \(String(buffer: body))")
        }
        let answer = try? WireCodec().decode(PushResponse.self, from: Data(body.readableBytesView))
        return (sent, answer?.results.first?.seq)
    }

    /// The server's `sync_longpolls_active` gauge.
    static func longPollsActive(base: String, http: HTTPClient) async throws -> Int {
        let response = try await http.execute(HTTPClientRequest(url: base + "/metrics"), timeout: .seconds(10))
        let text = String(buffer: try await response.body.collect(upTo: 16 << 20))
        for line in text.split(separator: "\n") where line.hasPrefix("sync_longpolls_active") {
            if let value = line.split(separator: " ").last.flatMap({ Double($0) }) { return Int(value) }
        }
        return 0
    }
}

/// What the waiters saw: when each pushed event was sent, every delivery's latency, failures by kind.
final class FanoutRecord: Sendable {
    private struct State {
        var pushedAt: [EventID: ContinuousClock.Instant] = [:]
        var latencies: [Double] = []
        /// Those of devices on another server than the one pushed to (`--also-server`).
        var remoteLatencies: [Double] = []
        var unexpected = 0
        var errors: [String: Int] = [:]
        var refusal: String?
        var stopped = false
    }
    private let state = Mutex(State())

    /// The measurement is over: waiters stop polling.
    func stop() { state.withLock { $0.stopped = true } }
    var stopped: Bool { state.withLock { $0.stopped } }

    func pushed(_ id: EventID, at instant: ContinuousClock.Instant) {
        state.withLock { $0.pushedAt[id] = instant }
    }

    func received(_ ids: [EventID], at instant: ContinuousClock.Instant, remote: Bool = false) {
        guard !ids.isEmpty else { return }
        state.withLock { state in
            for id in ids {
                guard let sent = state.pushedAt[id] else {
                    state.unexpected += 1
                    continue
                }
                let elapsed = instant - sent
                let milliseconds =
                    Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
                state.latencies.append(milliseconds)
                if remote { state.remoteLatencies.append(milliseconds) }
            }
        }
    }

    func failed(_ failure: SyncFailure) {
        let kind: String
        switch failure {
        case .retryable(let reason, _): kind = String(reason.prefix(60))
        case .authentication(let code, _): kind = code
        case .resetRequired: kind = "reset.required"
        case .permanent(let code, _): kind = code
        }
        state.withLock { state in
            state.errors[kind, default: 0] += 1
            if case .permanent(let code, let message) = failure, state.refusal == nil {
                state.refusal = "\(code): \(message)"
            }
        }
    }

    /// The first refusal a device cannot retry (its code and message), if any.
    var refusal: String? { state.withLock { $0.refusal } }

    var delivered: Int { state.withLock { $0.latencies.count } }

    func report(
        devices: Int, scopes: Int, expected: Int, waiting: Int, connectSeconds: Duration,
        server: (before: ProcessSample?, waiting: ProcessSample?, after: ProcessSample?), pushes: Int,
        clientCPUSeconds: Double
    ) -> FanoutReport {
        state.withLock { state in
            let sorted = state.latencies.sorted()
            var report = FanoutReport(
                devices: devices, scopes: scopes, pushes: pushes, waitingBeforePush: waiting,
                connectSeconds: Double(connectSeconds.components.seconds) + Double(
                    connectSeconds.components.attoseconds)
                    / 1e18,
                expectedDeliveries: expected, delivered: sorted.count, unexpected: state.unexpected,
                p50Milliseconds: PushCommand.percentile(sorted, 0.5),
                p99Milliseconds: PushCommand.percentile(sorted, 0.99), maxMilliseconds: sorted.last ?? 0,
                errors: state.errors, clientPushCPUSeconds: clientCPUSeconds)
            if !state.remoteLatencies.isEmpty {
                let remote = state.remoteLatencies.sorted()
                report.otherServersDelivered = remote.count
                report.otherServersP50Milliseconds = PushCommand.percentile(remote, 0.5)
                report.otherServersP99Milliseconds = PushCommand.percentile(remote, 0.99)
            }
            if let before = server.before, let waitingSample = server.waiting {
                report.serverRSSBeforeBytes = before.rss
                report.serverRSSWaitingBytes = waitingSample.rss
                report.serverRSSPerWaiterBytes = (waitingSample.rss - before.rss) / max(1, waiting)
                if let after = server.after {
                    report.serverCPUSeconds = after.cpuSeconds - before.cpuSeconds
                    report.serverPushCPUSeconds = after.cpuSeconds - waitingSample.cpuSeconds
                }
            }
            return report
        }
    }
}

struct FanoutReport: Codable, Sendable {
    var devices: Int
    var scopes: Int
    var pushes: Int
    var waitingBeforePush: Int
    var connectSeconds: Double
    var expectedDeliveries: Int
    var delivered: Int
    var unexpected: Int
    var p50Milliseconds: Double
    var p99Milliseconds: Double
    var maxMilliseconds: Double
    var errors: [String: Int]
    /// CPU this process spent from the first push to the end (receiving the answers).
    var clientPushCPUSeconds: Double
    var serverRSSBeforeBytes: Int?
    var serverRSSWaitingBytes: Int?
    var serverRSSPerWaiterBytes: Int?
    var serverCPUSeconds: Double?
    /// The server's CPU from the first push to the end (answering the waiters).
    var serverPushCPUSeconds: Double?
    /// With `--also-server`: the deliveries to devices on the other servers, and their latencies.
    var otherServersDelivered: Int?
    var otherServersP50Milliseconds: Double?
    var otherServersP99Milliseconds: Double?

    var text: String {
        var lines = [
            "fanout: \(devices) devices over \(scopes) scope(s), \(pushes) push(es)",
            String(format: "  connect burst: %d waiting after %.2f s", waitingBeforePush, connectSeconds),
            "  woken with the event: \(delivered) of \(expectedDeliveries)\(unexpected > 0 ? " (\(unexpected) unexpected)" : "")",
            String(
                format: "  push → answer: p50 %.1f ms, p99 %.1f ms, max %.1f ms", p50Milliseconds, p99Milliseconds,
                maxMilliseconds),
            otherServersDelivered.map {
                String(
                    format: "  of which on the other servers: %d, p50 %.1f ms, p99 %.1f ms", $0,
                    otherServersP50Milliseconds ?? 0, otherServersP99Milliseconds ?? 0)
            } ?? "",
            "  errors: \(errors.isEmpty ? "none" : errors.sorted { $0.key < $1.key }.map { "\($0.key) × \($0.value)" }.joined(separator: ", "))",
        ]
        lines.removeAll { $0.isEmpty }
        if let before = serverRSSBeforeBytes, let waiting = serverRSSWaitingBytes, let per = serverRSSPerWaiterBytes {
            lines.append(
                String(
                    format: "  server RSS: %.1f MiB before, %.1f MiB waiting, %.1f KiB per waiting connection",
                    Double(before) / 1_048_576, Double(waiting) / 1_048_576, Double(per) / 1024))
        }
        if let cpu = serverCPUSeconds, let pushes = serverPushCPUSeconds {
            lines.append(String(format: "  server CPU: %.2f s in all, %.2f s from the push on", cpu, pushes))
        }
        lines.append(String(format: "  this process's CPU from the push on: %.2f s", clientPushCPUSeconds))
        return lines.joined(separator: "\n")
    }
}

/// Another process's resident memory and CPU time, from `/proc` (Linux; zeros elsewhere).
struct ProcessSample: Sendable {
    var rss: Int
    var cpuSeconds: Double

    init(pid: Int32) {
        rss = ProcessMemory.bytes("VmRSS", pid: String(pid))
        cpuSeconds = 0
        if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        {
            // After the command's closing parenthesis: state is field 3, utime and stime fields 14 and 15.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) {
                cpuSeconds = (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
            }
        }
    }
}
