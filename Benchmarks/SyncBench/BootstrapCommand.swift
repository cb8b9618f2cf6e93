import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NotesDomain
import NotesStore
import SyncCompression
import SyncEngine
import SyncEngineHTTPClient
import SyncEventStore
import SyncModels
import SyncProtocol
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `sync-bench bootstrap`: can a device keep up with the server it talks to?
///
/// 1. Pushes `--events` events of the Notes workload into `--scopes` scopes of a running server (skipped with
///    `--events 0`, for a server that already holds them).
/// 2. A fresh device (a `NotesClient` on a new SQLite file, a `SyncEngine` over `HTTPTransport`) pulls and
///    applies all of them, while the user edits a note `--edits-per-second` times a second. Prints the rate
///    for each tenth of the log, where the time went (waiting for the server and the wire, applying on the
///    device), and the latency of the local edits.
/// 3. The in-run baseline: a plain HTTP client (AsyncHTTPClient, no store) pulls exactly the pages the device
///    pulled (same cursors, same page sizes) through `GET /v1/pull` and decodes them.
/// 4. With `--outbox N`: a second device makes N events offline, then syncs; prints how long the outbox took
///    to drain.
struct BootstrapCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bootstrap",
        abstract:
            "Time a fresh device pulling and applying a Notes log, against a plain HTTP client pulling the same pages.")

    @Option(help: "Base URL of the server.") var server: String = "http://127.0.0.1:8080"
    @Option(help: "Bearer token granting bench-0 … bench-N and the outbox scope (or SYNC_TOKEN).") var token: String?
    @Option(help: "Events to push first (0: push nothing; the server already holds the log).") var events: Int = 200_000
    @Option(help: "Scopes the log is spread over (bench-0, bench-1, …); the device pulls all of them.") var scopes = 16
    @Option(help: "Notes per scope the events edit (the history shape).") var notes: Int = 500
    @Option(
        help:
            "The log: history (every event edits one of --notes notes per scope, many events per note), records (every event creates a note of its own) or long-tail (most notes with one event; 30 % of the events on 2 notes per scope, about 1,900 each at 200,000 events)."
    )
    var shape: LogShape = .history
    @Option(help: "The device's first page size.") var pageSize: Int = SyncEngine.Configuration().pageSize
    @Option(help: "The device's smallest page size.") var minPageSize: Int = SyncEngine.Configuration().minPageSize
    @Option(help: "The device's largest page size.") var maxPageSize: Int = SyncEngine.Configuration().maxPageSize
    @Option(
        help:
            "Events between the cursors the device asks for inside each page, so it applies a long page in several transactions (0: none, one transaction per page)."
    )
    var markEvery: Int = SyncEngine.Configuration().markEvery
    @Option(help: "Milliseconds one transaction applying pulled events may hold the store's write lock.")
    var applyBudget: Double =
        Double(SyncEngine.Configuration().applyBudget.components.attoseconds) / 1e15
        + Double(SyncEngine.Configuration().applyBudget.components.seconds) * 1000
    @Option(help: "Seconds the notes projection may hold pulled pages in memory during the pull (0: write each page).")
    var projectionLag: Double = Self.seconds(SyncEngine.Configuration().projectionLag)
    @Option(help: "Local edits per second while the device bootstraps (0: none).") var editsPerSecond: Double = 20
    @Option(help: "Pending events a second device makes offline and then pushes (0: skip).") var outbox: Int = 0
    @Flag(inversion: .prefixedNo, help: "Run the fresh device's bootstrap and its baseline.")
    var bootstrap = true
    @Option(help: "The devices' HTTP client: nio (AsyncHTTPClient, as sync-agent) or urlsession (URLSession).")
    var transport: TransportKind = .nio
    @Option(help: "Events per push batch, at most, for the outbox device.")
    var pushBatch: Int = SyncEngine.Configuration().batch.maxEvents
    @Option(help: "Bytes per push batch, at most, for the outbox device.")
    var pushBytes: Int = SyncEngine.Configuration().batch.maxBytes
    @Option(
        help:
            "The scope of the outbox device: the token must grant it, and it must start empty (a scope holds at most 1,000 notes)."
    ) var outboxScope: String = "bench-outbox"
    @Option(help: "Directory for the devices' files (a temporary one, removed after, by default).")
    var directory: String?
    @Flag(help: "Print one JSON object instead of text.") var json = false

    func validate() throws {
        guard events >= 0, scopes > 0, notes > 0, minPageSize > 0, pageSize >= minPageSize, maxPageSize >= pageSize,
            outbox >= 0, pushBatch > 0, pushBytes > 0
        else {
            throw ValidationError("counts must be positive and --min-page-size ≤ --page-size ≤ --max-page-size")
        }
    }

    var scopeList: [Scope] { get throws { try (0..<scopes).map { try Scope("bench-\($0)") } } }

    func run() async throws {
        guard let token = token ?? ProcessInfo.processInfo.environment["SYNC_TOKEN"] else {
            throw ValidationError("pass --token or set SYNC_TOKEN (sync-server token --sub bench --scopes …)")
        }
        let base = server.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        let folder =
            directory.map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("sync-bench-bootstrap-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { if directory == nil { try? FileManager.default.removeItem(at: folder) } }
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            var report = BootstrapReport()
            if events > 0 { report.push = try await pushLog(base: base, token: token, http: http) }
            if bootstrap {
                report.device = try await bootstrapDevice(base: base, token: token, folder: folder)
                report.baseline = try await pullBaseline(
                    base: base, token: token, pages: report.device.pages, http: http)
                report.device.pages = []
            }
            if outbox > 0 { report.outbox = try await drainOutbox(base: base, token: token, folder: folder) }
            try await http.shutdown()
            if json {
                print(String(decoding: try JSONEncoder.sortedKeys.encode(report), as: UTF8.self))
            } else {
                print(report.text)
            }
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    // MARK: - 1. The log

    func pushLog(base: String, token: String, http: HTTPClient) async throws -> BootstrapReport.Push {
        let codec = WireCodec()
        var bodies: [PushCommand.Body] = []
        for (index, scope) in try scopeList.enumerated() {
            let count = events / scopes + (index < events % scopes ? 1 : 0)
            let log =
                switch shape {
                case .history: NotesWorkload(notes: notes, seed: UInt64(index + 1), scope: scope).events(count: count)
                case .records: RecordsWorkload(seed: UInt64(index + 1), scope: scope).events(count: count)
                case .longTail:
                    RecordsWorkload(seed: UInt64(index + 1), scope: scope, hot: 2, hotShare: 0.3).events(count: count)
                }
            for start in stride(from: 0, to: log.count, by: 1000) {
                let batch = log[start..<min(start + 1000, log.count)].map { event -> Event in
                    var event = event
                    event.seq = nil
                    event.receivedAt = nil
                    return event
                }
                let raw = try codec.encode(PushRequest(replica: batch[0].dot.replica, events: batch))
                bodies.append(
                    PushCommand.Body(
                        wire: ByteBuffer(bytes: Gzip.compress(raw, level: 5)), raw: raw.count, count: batch.count))
            }
        }
        let started = ContinuousClock.now
        let outcome = try await PushCommand.push(
            bodies, to: base + "/v1/push", token: token, gzip: true, concurrency: 8, http: http)
        let seconds = Self.seconds(ContinuousClock.now - started)
        guard outcome.rejected == 0 else {
            throw ValidationError("the server rejected \(outcome.rejected) events of the workload (note quota?)")
        }
        return BootstrapReport.Push(
            events: outcome.accepted + outcome.duplicate, seconds: seconds,
            eventsPerSecond: Double(outcome.accepted + outcome.duplicate) / seconds)
    }

    // MARK: - 2. The device

    func bootstrapDevice(base: String, token: String, folder: URL) async throws -> BootstrapReport.Device {
        let path = folder.appendingPathComponent("device-\(UUID()).sqlite").path
        let client = try NotesClient.open(path: path)
        let transport = RecordingTransport(try self.transport.make(base: base, token: token))
        let rounds = Mutex<[(at: ContinuousClock.Instant, round: SyncRound)]>([])
        var configuration = SyncEngine.Configuration(scopes: try scopeList)
        configuration.pageSize = pageSize
        configuration.minPageSize = minPageSize
        configuration.maxPageSize = maxPageSize
        configuration.markEvery = markEvery
        configuration.applyBudget = .microseconds(Int64(applyBudget * 1000))
        configuration.projectionLag = .milliseconds(Int64(projectionLag * 1000))
        configuration.onRound = { round in rounds.withLock { $0.append((ContinuousClock.now, round)) } }
        configuration.autoCompactAfter = nil  // the bench decides when to prune
        let engine = try SyncEngine(store: client.store, transport: transport, configuration: configuration)
        let note = try await client.create(scope: try scopeList[0], title: "written on the device")

        let started = ContinuousClock.now
        let (wall, cpu, latencies) = try await Editing(client: client, note: note, perSecond: editsPerSecond)
            .whileEditing { try await engine.syncNow() }
        // The edits made while the last page was applied are still pending: a last cycle pushes them.
        try await engine.syncNow()

        let log = rounds.withLock { $0 }
        let applied = log.reduce(0) { $0 + $1.round.inserted }
        var device = BootstrapReport.Device(
            events: applied, seconds: Self.seconds(wall),
            eventsPerSecond: Double(applied) / Self.seconds(wall), cpuSeconds: cpu,
            rounds: log.count,
            applySeconds: log.reduce(0) { $0 + Self.seconds($1.round.apply) },
            flushSeconds: log.reduce(0) { $0 + Self.seconds($1.round.flush) },
            waitSeconds: log.reduce(0) { $0 + Self.seconds($1.round.waited) },
            roundTripSeconds: log.reduce(0) { $0 + Self.seconds($1.round.roundTrip) },
            largestPage: log.map(\.round.pageLimit).max() ?? 0,
            longestApplyMilliseconds: log.map { Self.seconds($0.round.longestTransaction) * 1000 }.max() ?? 0,
            tenths: Self.tenths(log.map { ($0.at, $0.round.inserted) }, start: started, total: applied),
            edits: latencies.count,
            editP50Milliseconds: PushCommand.percentile(latencies, 0.50),
            editP99Milliseconds: PushCommand.percentile(latencies, 0.99),
            editMaxMilliseconds: latencies.max() ?? 0,
            receivedBytesWire: log.reduce(0) { $0 + $1.round.traffic.receivedWire },
            databaseBytes: try client.store.database.maintenance.statistics().fileBytes)
        device.pages = transport.pages.withLock { $0 }
        let counts = try await client.store.counts()
        guard counts[.pending] == 0, counts[.rejected] == 0 else {
            throw ValidationError("the device ended with \(counts) events by status")
        }
        return device
    }

    /// The rate of each tenth of `total` events, from the times rounds ended and what each applied (the moment
    /// a tenth completed is interpolated inside the round that completed it).
    static func tenths(_ rounds: [(ContinuousClock.Instant, Int)], start: ContinuousClock.Instant, total: Int)
        -> [Double]
    {
        guard total > 0 else { return [] }
        var marks: [ContinuousClock.Instant] = []
        var done = 0
        var roundStart = start
        for (time, count) in rounds {
            let before = done
            done += count
            while marks.count < 10, done * 10 >= total * (marks.count + 1) {
                let target = Double(total * (marks.count + 1)) / 10
                let share = count == 0 ? 1 : (target - Double(before)) / Double(count)
                marks.append(roundStart + (time - roundStart) * share)
            }
            roundStart = time
        }
        var rates: [Double] = []
        var previous = start
        for mark in marks {
            rates.append(Double(total) / 10 / max(seconds(mark - previous), 1e-9))
            previous = mark
        }
        return rates
    }

    // MARK: - 3. The baseline

    func pullBaseline(base: String, token: String, pages: [RecordingTransport.Page], http: HTTPClient) async throws
        -> BootstrapReport.Baseline
    {
        let codec = WireCodec()
        let scopes = try scopeList.map(\.name).joined(separator: ",")
        var pulled = 0
        var bytes = 0
        var rounds: [(ContinuousClock.Instant, Int)] = []
        let started = ContinuousClock.now
        for page in pages {
            var components = URLComponents(string: base + "/v1/pull")!
            components.queryItems =
                [URLQueryItem(name: "scopes", value: scopes), URLQueryItem(name: "limit", value: String(page.limit))]
                + (page.cursor.map { [URLQueryItem(name: "cursor", value: $0)] } ?? [])
            var request = HTTPClientRequest(url: components.url!.absoluteString)
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            request.headers.add(name: "Accept-Encoding", value: "gzip")
            let response = try await http.execute(request, timeout: .seconds(120))
            let body = try await response.body.collect(upTo: 256 << 20)
            bytes += body.readableBytes
            guard response.status == .ok else { throw ValidationError("GET /v1/pull answered \(response.status)") }
            var data = Data(buffer: body)
            if Gzip.isGzip(data) { data = try Gzip.decompress(data, maxOutputBytes: 256 << 20) }
            let answer = try codec.decode(PullResponse.self, from: data)
            pulled += answer.events.count
            rounds.append((ContinuousClock.now, answer.events.count))
        }
        let seconds = Self.seconds(ContinuousClock.now - started)
        return BootstrapReport.Baseline(
            pages: pages.count, events: pulled, seconds: seconds,
            eventsPerSecond: Double(pulled) / seconds, bytesWire: bytes,
            tenths: Self.tenths(rounds, start: started, total: pulled))
    }

    // MARK: - 4. The outbox

    func drainOutbox(base: String, token: String, folder: URL) async throws -> BootstrapReport.Outbox {
        let scope = try Scope(outboxScope)
        let client = try NotesClient.open(path: folder.appendingPathComponent("outbox-\(UUID()).sqlite").path)
        let log = NotesWorkload(notes: min(notes, 900), seed: UInt64.random(in: 1...UInt64.max), scope: scope)
            .events(count: outbox)
        for start in stride(from: 0, to: log.count, by: 5000) {
            try await client.store.append(
                log[start..<min(start + 5000, log.count)].map {
                    EventDraft(scope: $0.scope, stream: $0.stream, type: $0.type, payload: $0.payload)
                })
        }
        let rounds = Mutex<[SyncRound]>([])
        var configuration = SyncEngine.Configuration(scopes: [scope])
        configuration.batch = PushBatchPolicy(maxEvents: pushBatch, maxBytes: pushBytes)
        configuration.onRound = { round in rounds.withLock { $0.append(round) } }
        let engine = try SyncEngine(
            store: client.store, transport: try transport.make(base: base, token: token),
            configuration: configuration)
        // The user keeps editing while the outbox drains: each edit waits for the store's write lock.
        let note = try await client.create(scope: scope, title: "edited while the outbox drains")
        let (wall, cpu, latencies) = try await Editing(client: client, note: note, perSecond: editsPerSecond)
            .whileEditing { try await engine.syncNow() }
        let seconds = Self.seconds(wall)
        try await engine.syncNow()
        let counts = try await client.store.counts()
        guard counts[.pending] == 0 else { throw ValidationError("\(counts[.pending] ?? 0) events still pending") }
        let log2 = rounds.withLock { $0 }
        return BootstrapReport.Outbox(
            events: outbox, seconds: seconds, eventsPerSecond: Double(outbox) / seconds, cpuSeconds: cpu,
            rounds: log2.count,
            applySeconds: log2.reduce(0) { $0 + Self.seconds($1.apply) },
            waitSeconds: log2.reduce(0) { $0 + Self.seconds($1.waited) },
            largestBatch: log2.map(\.pushed).max() ?? 0,
            longestApplyMilliseconds: log2.map { Self.seconds($0.longestTransaction) * 1000 }.max() ?? 0,
            edits: latencies.count,
            editP99Milliseconds: PushCommand.percentile(latencies, 0.99), editMaxMilliseconds: latencies.max() ?? 0)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// The user editing a note while the device syncs: a title every `1 / perSecond` seconds, each timed.
final class Editing: Sendable {
    let client: NotesClient
    let note: NoteID
    let perSecond: Double
    private let stopped = Mutex(false)

    init(client: NotesClient, note: NoteID, perSecond: Double) {
        self.client = client
        self.note = note
        self.perSecond = perSecond
    }

    func stop() { stopped.withLock { $0 = true } }

    /// Runs `body` while editing; returns its wall and CPU time and the edits' latencies.
    func whileEditing(_ body: () async throws -> Void) async throws -> (Duration, Double, [Double]) {
        let cpuBefore = CPUTime.now
        let started = ContinuousClock.now
        let edits = Task { try await run() }
        do {
            try await body()
        } catch {
            stop()
            _ = try? await edits.value
            throw error
        }
        let wall = ContinuousClock.now - started
        let cpu = CPUTime.now - cpuBefore
        stop()
        return (wall, cpu, try await edits.value)
    }

    /// Edits until stopped; returns each edit's latency in milliseconds.
    func run() async throws -> [Double] {
        guard perSecond > 0 else { return [] }
        var latencies: [Double] = []
        var index = 0
        while !stopped.withLock({ $0 }) {
            try await Task.sleep(for: .microseconds(Int64(1_000_000 / perSecond)))
            let start = ContinuousClock.now
            try await client.setTitle(note, "edit \(index)")
            latencies.append(milliseconds(ContinuousClock.now - start))
            index += 1
        }
        return latencies
    }
}

/// A transport recording the cursor and size of every page the engine asked for (the baseline pulls
/// the same pages).
final class RecordingTransport: SyncTransport {
    struct Page: Codable, Sendable {
        var cursor: String?
        var limit: Int
        var pushed: Int
        var events: Int
    }

    let inner: any SyncTransport
    let pages = Mutex<[Page]>([])

    init(_ inner: any SyncTransport) { self.inner = inner }

    func sync(_ request: SyncRequest) async throws(SyncFailure) -> TransportExchange {
        let exchange = try await inner.sync(request)
        pages.withLock {
            $0.append(
                Page(
                    cursor: request.cursor, limit: request.limit ?? 500, pushed: request.events.count,
                    events: exchange.response.events.count))
        }
        return exchange
    }
}

/// CPU time of this process (user and system), in seconds.
enum CPUTime {
    static var now: Double {
        #if canImport(Glibc)
            var usage = rusage()
            getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
            return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
                + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        #else
            return 0
        #endif
    }
}

/// What `sync-bench bootstrap` measured.
struct BootstrapReport: Codable, Sendable {
    struct Push: Codable, Sendable {
        var events: Int
        var seconds: Double
        var eventsPerSecond: Double
    }

    struct Device: Codable, Sendable {
        var events = 0
        var seconds = 0.0
        var eventsPerSecond = 0.0
        var cpuSeconds = 0.0
        var rounds = 0
        /// Summed over rounds: applying answers, waiting for them, and their round trips (which overlap the
        /// applies).
        var applySeconds = 0.0
        /// Writing projection records buffered during the pull (part of applying, outside the pages'
        /// transactions).
        var flushSeconds = 0.0
        var waitSeconds = 0.0
        var roundTripSeconds = 0.0
        var largestPage = 0
        var longestApplyMilliseconds = 0.0
        /// Events/s of each tenth of the log, in order.
        var tenths: [Double] = []
        var edits = 0
        var editP50Milliseconds = 0.0
        var editP99Milliseconds = 0.0
        var editMaxMilliseconds = 0.0
        var receivedBytesWire = 0
        var databaseBytes = 0
        var pages: [RecordingTransport.Page] = []
    }

    struct Baseline: Codable, Sendable {
        var pages = 0
        var events = 0
        var seconds = 0.0
        var eventsPerSecond = 0.0
        var bytesWire = 0
        /// Events/s of each tenth of the log, as for the device: where both slow down together, the server
        /// does.
        var tenths: [Double] = []
    }

    struct Outbox: Codable, Sendable {
        var events: Int
        var seconds: Double
        var eventsPerSecond: Double
        var cpuSeconds: Double
        var rounds: Int
        var applySeconds: Double
        var waitSeconds: Double
        var largestBatch: Int
        var longestApplyMilliseconds: Double
        /// Local edits made while it drained, and their latency.
        var edits: Int
        var editP99Milliseconds: Double
        var editMaxMilliseconds: Double
    }

    var push: Push?
    var device = Device()
    var baseline = Baseline()
    var outbox: Outbox?

    /// The last tenth's rate over the first's.
    var flatness: Double { Self.flatness(device.tenths) }

    /// The last of `tenths` over the first (0 without them).
    static func flatness(_ tenths: [Double]) -> Double {
        guard let first = tenths.first, let last = tenths.last, first > 0 else { return 0 }
        return last / first
    }

    /// `tenths` as printed: each rate, then the last over the first.
    static func tenthsText(_ tenths: [Double]) -> String {
        tenths.map { String(format: "%.0f", $0) }.joined(separator: " ")
            + String(format: " (last / first %.2f)", flatness(tenths))
    }

    var text: String {
        var lines: [String] = []
        if let push {
            lines.append(
                String(
                    format: "push: %d events in %.2f s (%.0f events/s)", push.events, push.seconds, push.eventsPerSecond
                ))
        }
        lines += [
            String(
                format: "device: %d events in %.2f s: %.0f events/s (%.1f CPU s), %d rounds, pages up to %d",
                device.events, device.seconds, device.eventsPerSecond, device.cpuSeconds, device.rounds,
                device.largestPage),
            "  events/s by tenth: " + Self.tenthsText(device.tenths),
            String(
                format:
                    "  time: applying %.2f s (%.0f%%; pages %.2f s, buffered projection writes %.2f s), waiting for the server and the wire %.2f s (%.0f%%); round trips %.2f s; longest transaction %.1f ms",
                device.applySeconds + device.flushSeconds,
                100 * (device.applySeconds + device.flushSeconds) / max(device.seconds, 1e-9), device.applySeconds,
                device.flushSeconds, device.waitSeconds,
                100 * device.waitSeconds / max(device.seconds, 1e-9), device.roundTripSeconds,
                device.longestApplyMilliseconds),
            String(
                format: "  local edits while it ran: %d, p50 %.2f ms, p99 %.2f ms, max %.2f ms", device.edits,
                device.editP50Milliseconds, device.editP99Milliseconds, device.editMaxMilliseconds),
            String(
                format:
                    "baseline (plain HTTP client, the same %d pages): %d events in %.2f s: %.0f events/s; device / baseline = %.2f",
                baseline.pages, baseline.events, baseline.seconds, baseline.eventsPerSecond,
                device.eventsPerSecond / max(baseline.eventsPerSecond, 1e-9)),
        ]
        if !baseline.tenths.isEmpty {
            lines.append("  baseline events/s by tenth: " + Self.tenthsText(baseline.tenths))
        }
        if let outbox {
            lines.append(
                String(
                    format:
                        "outbox: %d pending events pushed in %.2f s (%.0f events/s, %.1f CPU s), %d rounds, batches up to %d; applying %.2f s (longest %.1f ms), waiting %.2f s; local edits %d, p99 %.2f ms, max %.2f ms",
                    outbox.events, outbox.seconds, outbox.eventsPerSecond, outbox.cpuSeconds, outbox.rounds,
                    outbox.largestBatch, outbox.applySeconds, outbox.longestApplyMilliseconds, outbox.waitSeconds,
                    outbox.edits,
                    outbox.editP99Milliseconds, outbox.editMaxMilliseconds))
        }
        return lines.joined(separator: "\n")
    }
}

/// What the log `sync-bench bootstrap` pushes is made of.
enum LogShape: String, ExpressibleByArgument, Codable, Sendable {
    /// Many events per note: the Notes workload on a few hundred notes per scope.
    case history
    /// One event per note: every event creates a note of its own.
    case records
    /// Most notes with one event, a few with thousands.
    case longTail = "long-tail"
}

/// Which `SyncTransport` the bench's devices use.
enum TransportKind: String, ExpressibleByArgument, Codable, Sendable {
    case nio, urlsession

    func make(base: String, token: String) throws -> any SyncTransport {
        guard let url = URL(string: base) else { throw ValidationError("not a URL: \(base)") }
        switch self {
        case .nio: return HTTPClientTransport(baseURL: url, token: token)
        case .urlsession: return HTTPTransport(baseURL: url, token: token)
        }
    }
}
