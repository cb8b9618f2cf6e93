import ArgumentParser
import AsyncHTTPClient
import Foundation
import GRDB
import Logging
import NIOCore
import NotesDomain
import NotesServer
import NotesStore
import PostgresNIO
import SyncCompression
import SyncEngine
import SyncEngineHTTPClient
import SyncModels
import SyncProtocol
import SyncServer
import SyncTestSupport
import Synchronization

/// `sync-bench churn`: does storage grow with live state or with history?
///
/// 1. A writer creates `--notes` notes over `--scopes` scopes (`churn-0`, …), then makes `--operations`
///    operations of the Notes workload (typing and erasing, titles, tags added and removed, checklist items
///    added, ticked and removed, pins, views, notes deleted and created), pushed in order through
///    `POST /v1/push` as one replica does. `--warm-up` operations come first, uncounted, so that storage is
///    measured on notes at the ages the workload settles at rather than on notes that are all new.
/// 2. At each checkpoint a device (a `NotesClient` over `SyncEngine`) syncs. With `--compaction`, the
///    server's compaction then folds up to the stable point (`SyncServerApp.compact`, as `sync-server
///    compact --vacuum`) and the device prunes its log (`SyncEngine.compact`). Prints the server's bytes (its
///    tables with indexes and TOAST) and the device's file bytes, beside the live state alone (the device's
///    live notes copied into a fresh SQLite file).
/// 3. A fresh device bootstraps the whole history: seconds, events, bytes on the wire; its state must equal
///    the first device's.
/// 4. With `--compaction`: the cost. A backlog of `--cost-operations` is folded while a client pushes small
///    batches; the push latency beside the same pushes with no compaction running, and the fold's rate.
///
/// Needs a running `sync-server` whose database is `--database-url`, with a note quota above
/// `--notes / --scopes` (`--note-quota`), and a token granting the scopes.
struct ChurnCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "churn",
        abstract: "Storage under churn with and without compaction, a fresh device's bootstrap, compaction's cost.")

    @Option(help: "Base URL of the server.") var server: String = "http://127.0.0.1:8080"
    @Option(help: "Bearer token granting churn-0 … churn-N (or SYNC_TOKEN).") var token: String?
    @Option(help: "The server's PostgreSQL URL (or SYNC_DATABASE_URL).") var databaseURL: String?
    @Option(help: "Live notes, created first.") var notes: Int = 10_000
    @Option(help: "Scopes the notes are spread over.") var scopes: Int = 10
    @Option(help: "Operations after the notes exist.") var operations: Int = 1_000_000
    @Option(
        help:
            "Operations made (and, with --compaction, folded) before the counted ones, so that the notes reach the ages the workload settles at (a note lives about 33 operations). 0: the notes start new."
    ) var warmUp: Int = 0
    @Option(help: "Operation counts at which storage is measured, comma-separated.")
    var checkpoints: String = "100000,250000,500000,1000000"
    @Flag(inversion: .prefixedNo, help: "Compact the server and prune the device at each checkpoint.")
    var compaction = true
    @Option(
        help:
            "With --compaction, operations between two folds (the device syncs and the server compacts, as its service does with SYNC_COMPACTION_RATIO 1; default: --notes)."
    ) var compactEvery: Int?
    @Option(help: "Operations of the backlog compaction folds while pushes are timed (0: skip).")
    var costOperations: Int = 200_000
    @Option(help: "Seed of the workload.") var seed: UInt64 = 1
    @Option(help: "Directory for the devices' files (a temporary one, removed after, by default).")
    var directory: String?
    @Flag(help: "Print one JSON object instead of text.") var json = false

    func validate() throws {
        guard notes > 0, scopes > 0, operations >= 0, costOperations >= 0, warmUp >= 0 else {
            throw ValidationError("counts must be positive")
        }
        guard !checkpointList.isEmpty else { throw ValidationError("--checkpoints lists operation counts") }
    }

    var checkpointList: [Int] {
        checkpoints.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            .filter { $0 > 0 && $0 <= operations }.sorted()
    }

    func run() async throws {
        guard let token = token ?? ProcessInfo.processInfo.environment["SYNC_TOKEN"] else {
            throw ValidationError("--token or SYNC_TOKEN is required")
        }
        guard let databaseURL = databaseURL ?? ProcessInfo.processInfo.environment["SYNC_DATABASE_URL"] else {
            throw ValidationError("--database-url or SYNC_DATABASE_URL is required")
        }
        let folder =
            directory.map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("churn-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { if directory == nil { try? FileManager.default.removeItem(at: folder) } }
        var httpConfiguration = HTTPClient.Configuration()
        httpConfiguration.decompression = .disabled
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: httpConfiguration)
        do {
            try await run(http: http, token: token, databaseURL: databaseURL, folder: folder)
            try await http.shutdown()
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    func run(http: HTTPClient, token: String, databaseURL: String, folder: URL) async throws {
        let scopeList = try (0..<scopes).map { try Scope("churn-\($0)") }
        let bench = ChurnRun(
            server: server, token: token, databaseURL: databaseURL, scopes: scopeList, compaction: compaction,
            http: http, folder: folder)
        var writer = ChurnWriter(seed: seed, scopes: scopeList)

        var report = ChurnReport(
            compaction: compaction, notes: notes, scopes: scopes, operations: operations, seed: seed)
        report.warmUp = warmUp
        let device = try bench.device("device")
        let setup = writer.createNotes(notes)
        try await bench.push(setup, writer: &writer)
        if warmUp > 0 {
            var warmed = 0
            try await operate(
                until: warmUp, done: &warmed, bench: bench, writer: &writer, device: device, report: &report)
            if !json { print("warm-up: \(warmUp) operations") }
        }
        var done = 0
        let started = ContinuousClock.now
        for checkpoint in checkpointList {
            try await operate(
                until: checkpoint, done: &done, bench: bench, writer: &writer, device: device, report: &report)
            report.checkpoints.append(try await bench.measure(at: checkpoint, device: device, writer: writer))
            if !json {
                let last = report.checkpoints[report.checkpoints.count - 1]
                print(
                    "\(checkpoint) operations: server \(Self.mib(last.serverBytes)) MiB (\(last.serverRows) rows), device \(Self.mib(last.deviceBytes)) MiB, live state \(Self.mib(last.liveStateBytes)) MiB"
                )
            }
        }
        report.writeSeconds = BootstrapCommand.seconds(ContinuousClock.now - started)
        let (bootstrap, keepingLog, fresh) = try await bench.bootstrap(expected: device)
        report.bootstrap = bootstrap
        report.bootstrapKeepingLog = keepingLog
        if compaction, costOperations > 0 {
            // Every replica the server has seen acknowledges the backlog before it is folded.
            report.cost = try await bench.cost(operations: costOperations, writer: &writer, devices: [device] + fresh)
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
        } else {
            print(report.text)
        }
    }

    /// Makes and pushes operations until `done` reaches `target`, folding every `--compact-every` with
    /// `--compaction` (as the server's service would).
    func operate(
        until target: Int, done: inout Int, bench: ChurnRun, writer: inout ChurnWriter,
        device: (client: NotesClient, engine: SyncEngine), report: inout ChurnReport
    ) async throws {
        var batch: [Event] = []
        while done < target {
            batch += writer.nextOperation()
            done += 1
            if batch.count >= 1000 {
                try await bench.push(batch, writer: &writer)
                batch.removeAll(keepingCapacity: true)
            }
            if compaction, done % (compactEvery ?? notes) == 0, done < target {
                try await bench.push(batch, writer: &writer)
                batch.removeAll(keepingCapacity: true)
                report.folds += 1
                report.foldSeconds += try await bench.fold(device: device, writer: writer)
            }
        }
        try await bench.push(batch, writer: &writer)
    }

    static func mib(_ bytes: Int) -> String { String(format: "%.1f", Double(bytes) / 1_048_576) }
}

/// The writer: one replica editing many notes, its notes' states in memory.
struct ChurnWriter {
    let replica: ReplicaID
    let scopes: [Scope]
    var random: SplitMix64
    var ids = EventIDGenerator()
    var counter: UInt64 = 0
    var physical: UInt64 = 0
    var hlcCounter: UInt16 = 0
    /// Live notes per scope, and every note's state as this writer knows it.
    var live: [[NoteID]]
    var states: [NoteID: NoteState] = [:]
    /// The highest seq the server gave this writer's events, per scope.
    var heads: [Scope: Int64] = [:]

    /// The workload's mix: what a person does to a note, by weight.
    static let mix: [(NoteEdit, Int)] = [
        (.typing, 22), (.erase, 18), (.title, 10), (.tagAdd, 7), (.tagRemove, 7), (.itemAdd, 7),
        (.itemRemove, 7), (.itemText, 4), (.itemDone, 6), (.pin, 2), (.view, 5), (.delete, 3),
    ]

    init(seed: UInt64, scopes: [Scope]) {
        replica = ReplicaID(high: 0xC4C4_0000 &+ seed, low: seed)
        self.scopes = scopes
        random = SplitMix64(seed: seed)
        live = Array(repeating: [], count: scopes.count)
    }

    mutating func event(_ scope: Int, _ note: NoteID, _ payload: NotePayload) -> Event {
        let wall = UInt64(Date().timeIntervalSince1970 * 1000)
        if wall > physical {
            physical = wall
            hlcCounter = 0
        } else if hlcCounter == .max {
            physical += 1
            hlcCounter = 0
        } else {
            hlcCounter += 1
        }
        counter += 1
        let hlc = HLCTimestamp(physical: physical, counter: hlcCounter, node: replica.high)
        let dot = Dot(replica: replica, counter: counter)
        states[note, default: NoteState()].apply(payload, hlc: hlc, dot: dot)
        return Event(
            id: ids.next(wall: wall, using: &random), scope: scopes[scope], stream: note.stream,
            streamVersion: Int64(counter), type: payload.type.rawValue, hlc: hlc, dot: dot, payload: payload.json)
    }

    mutating func create(in scope: Int) -> Event {
        let note = NoteID(uuid: UUID(uuid: NoteEditor.randomUUID(&random)))
        var state = NoteState()
        let payload = NoteEditor.payload(.create, state: &state, replica: replica, using: &random)!
        live[scope].append(note)
        return event(scope, note, payload)
    }

    mutating func createNotes(_ count: Int) -> [Event] {
        (0..<count).map { create(in: $0 % scopes.count) }
    }

    /// One operation: an edit of a random live note; a deleted note is replaced by a new one at once.
    mutating func nextOperation() -> [Event] {
        while true {
            let scope = Int.random(in: 0..<scopes.count, using: &random)
            guard !live[scope].isEmpty else { return [create(in: scope)] }
            let index = Int.random(in: 0..<live[scope].count, using: &random)
            let note = live[scope][index]
            var pick = Int.random(in: 0..<Self.mix.reduce(0) { $0 + $1.1 }, using: &random)
            let edit = Self.mix.first { entry in
                pick -= entry.1
                return pick < 0
            }!.0
            var state = states[note] ?? NoteState()
            guard let payload = NoteEditor.payload(edit, state: &state, replica: replica, using: &random) else {
                continue
            }
            states[note] = state
            let made = event(scope, note, payload)
            if edit == .delete {
                live[scope].remove(at: index)
                states[note] = nil
                return [made, create(in: scope)]
            }
            return [made]
        }
    }
}

/// The parts of one run that talk to the stack.
struct ChurnRun: Sendable {
    let server: String
    let token: String
    let databaseURL: String
    let scopes: [Scope]
    let compaction: Bool
    let http: HTTPClient
    let folder: URL

    /// A device on a fresh file. `policy`: its own compaction policy, the engine's default (a new device
    /// bootstraps with it); otherwise the run's (without compaction nothing prunes, with it the engine's own
    /// policy does between checkpoints), or, with `keepingLog`, none: it logs every event it pulls.
    func device(_ name: String, policy: DevicePolicy = .run) throws -> (client: NotesClient, engine: SyncEngine) {
        let client = try NotesClient.open(path: folder.appendingPathComponent("\(name)-\(UUID()).sqlite").path)
        guard let url = URL(string: server) else { throw ValidationError("not a URL: \(server)") }
        var configuration = SyncEngine.Configuration(scopes: scopes)
        configuration.rebaser = NotesRebaser(replica: client.store.replica)
        switch policy {
        case .run: if !compaction { configuration.autoCompactAfter = nil }
        case .defaults: break
        case .keepingLog: configuration.autoCompactAfter = nil
        }
        let engine = try SyncEngine(
            store: client.store, transport: HTTPClientTransport(baseURL: url, token: token),
            configuration: configuration)
        return (client, engine)
    }

    /// Pushes `events` in order, in batches of 1,000, one at a time (as one replica does); keeps the heads.
    func push(_ events: [Event], writer: inout ChurnWriter) async throws {
        for start in stride(from: 0, to: events.count, by: 1000) {
            let batch = Array(events[start..<min(start + 1000, events.count)])
            let results = try await pushBatch(batch, replica: writer.replica)
            for (event, result) in zip(batch, results) {
                guard let seq = result.seq, result.status != .rejected else {
                    throw ValidationError(
                        "the server refused an event: \(result.code?.rawValue ?? "") \(result.message ?? "")")
                }
                writer.heads[event.scope] = max(writer.heads[event.scope] ?? 0, seq)
            }
        }
    }

    /// One push; its results and how long it took.
    func pushBatch(_ batch: [Event], replica: ReplicaID) async throws -> [PushResult] {
        let raw = try WireCodec().encode(PushRequest(replica: replica, events: batch))
        var request = HTTPClientRequest(url: server + "/v1/push")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Content-Encoding", value: "gzip")
        request.headers.add(name: "Accept-Encoding", value: "gzip")
        request.body = .bytes(ByteBuffer(bytes: Gzip.compress(raw, level: 5)))
        let response = try await http.execute(request, timeout: .seconds(300))
        let body = try await response.body.collect(upTo: 64 << 20)
        var data = Data(buffer: body)
        if response.headers["Content-Encoding"].first == "gzip" { data = try Gzip.decompress(data) }
        guard response.status == .ok else {
            throw ValidationError("push answered \(response.status): \(String(decoding: data, as: UTF8.self))")
        }
        return try WireCodec().decode(PushResponse.self, from: data).results
    }

    /// The writer says what it has read: a pull from its heads, naming itself (its acknowledged position).
    func acknowledge(_ writer: ChurnWriter) async throws {
        var cursor = ScopeCursor()
        for (scope, seq) in writer.heads { cursor.advance(scope, to: seq) }
        var components = URLComponents(string: server + "/v1/pull")!
        components.queryItems = PullRequest(cursor: cursor, scopes: scopes, limit: 1, replica: writer.replica)
            .queryItems.map { URLQueryItem(name: $0.name, value: $0.value) }
        var request = HTTPClientRequest(url: components.string!)
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        let response = try await http.execute(request, timeout: .seconds(60))
        _ = try await response.body.collect(upTo: 64 << 20)
        guard response.status == .ok else { throw ValidationError("acknowledging pull answered \(response.status)") }
    }

    /// Syncs the device up to the head and has every replica acknowledge it (the server reads a scope's
    /// stable point at most once a second).
    func settle(_ devices: [(client: NotesClient, engine: SyncEngine)], writer: ChurnWriter) async throws {
        for device in devices { try await device.engine.syncNow() }
        try await acknowledge(writer)
        try await Task.sleep(for: .milliseconds(1100))
        // The second sync's first request acknowledges everything the first one brought.
        for device in devices { try await device.engine.syncNow() }
    }

    /// A fold between checkpoints: the device syncs (twice: its second request acknowledges what the first
    /// brought), the writer acknowledges its heads, the server compacts. The device prunes by its own policy.
    func fold(device: (client: NotesClient, engine: SyncEngine), writer: ChurnWriter) async throws -> Double {
        try await device.engine.syncNow()
        try await acknowledge(writer)
        try await device.engine.syncNow()
        return try await compactServer().seconds
    }

    func compactServer() async throws -> CompactionReport {
        var configuration = ServerConfiguration()
        configuration.databaseURL = databaseURL
        var logger = Logger(label: "churn")
        logger.logLevel = .warning
        return try await SyncServerApp.compact(
            configuration: configuration, domain: NotesServerDomain(), scopes: scopes.map(\.name), vacuum: true,
            logger: logger)
    }

    func measure(at operations: Int, device: (client: NotesClient, engine: SyncEngine), writer: ChurnWriter)
        async throws -> ChurnReport.Checkpoint
    {
        try await settle([device], writer: writer)
        var foldSeconds = 0.0
        var pruned = 0
        if compaction {
            let report = try await compactServer()
            foldSeconds = report.seconds
            try await Task.sleep(for: .milliseconds(1100))
            try await device.engine.syncNow()
            pruned = try await device.engine.compact()?.foldedEvents ?? 0
        } else {
            try await vacuum()
        }
        _ = try device.client.store.database.checkpoint()
        let (bytes, rows) = try await serverSpace()
        return ChurnReport.Checkpoint(
            operations: operations, serverBytes: bytes, serverRows: rows,
            deviceBytes: try device.client.store.database.maintenance.statistics().fileBytes,
            deviceEvents: try await device.client.store.counts().values.reduce(0, +),
            liveStateBytes: try liveStateBytes(device.client), foldSeconds: foldSeconds, prunedEvents: pruned)
    }

    /// The device's live notes alone, in a fresh SQLite file: what a store holding only the live state takes.
    func liveStateBytes(_ client: NotesClient) throws -> Int {
        let rows = try client.store.database.writer.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT id, scope, title, body, tags, pinned, view_count, checklist, deleted, created, state
                    FROM notes WHERE deleted = 0 AND created = 1
                    """)
        }
        let path = folder.appendingPathComponent("live-\(UUID()).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE notes (id TEXT PRIMARY KEY, scope TEXT NOT NULL, title TEXT NOT NULL,
                        body TEXT NOT NULL, tags TEXT NOT NULL, pinned INTEGER NOT NULL, view_count INTEGER NOT NULL,
                        checklist TEXT NOT NULL, deleted INTEGER NOT NULL, created INTEGER NOT NULL, state BLOB NOT NULL)
                    """)
            for row in rows {
                try db.execute(
                    sql: "INSERT INTO notes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    arguments: StatementArguments(row.databaseValues))
            }
        }
        try queue.vacuum()
        return try queue.read { db in
            (try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0) * (try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0)
        }
    }

    static let serverTables = [
        "events", "folded_events", "streams", "scopes", "replica_progress", "scope_compaction", "live_notes",
        "note_counts",
    ]

    func withPostgres<T: Sendable>(_ body: @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        var logger = Logger(label: "churn-postgres")
        logger.logLevel = .warning
        return try await DatabaseURL(databaseURL).withConnection(logger: logger, body)
    }

    /// The server's tables with their indexes and TOAST, and how many events it stores.
    func serverSpace() async throws -> (bytes: Int, rows: Int) {
        try await withPostgres { connection in
            var bytes = 0
            let logger = Logger(label: "churn-postgres")
            for try await size in try await connection.query(
                """
                SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::int8 FROM pg_class c
                JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname = ANY(\(Self.serverTables)::text[])
                """, logger: logger
            ).decode(Int64.self) { bytes = Int(size) }
            var rows = 0
            for try await count in try await connection.query(
                "SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM folded_events)", logger: logger
            ).decode(Int64.self) { rows = Int(count) }
            return (bytes, rows)
        }
    }

    func vacuum() async throws {
        try await withPostgres { connection in
            _ = try await connection.query("VACUUM (ANALYZE) events", logger: Logger(label: "churn-postgres"))
        }
    }

    /// What a device prunes by (see `device(_:policy:)`).
    enum DevicePolicy {
        case run, defaults, keepingLog
    }

    /// A fresh device with the engine's default policy pulls the whole history (it folds on arrival what
    /// every other replica has seen, when the pull is long: see `SyncEngine.Configuration.foldOnArrival`),
    /// then one that logs every event, the in-run baseline. Their states must equal `expected`'s.
    func bootstrap(expected: (client: NotesClient, engine: SyncEngine)) async throws -> (
        ChurnReport.Bootstrap, keepingLog: ChurnReport.Bootstrap, [(client: NotesClient, engine: SyncEngine)]
    ) {
        try await expected.engine.syncNow()
        let (report, fresh) = try await bootstrapDevice("fresh", policy: .defaults, expected: expected)
        let (keepingLog, logging) = try await bootstrapDevice("fresh-log", policy: .keepingLog, expected: expected)
        return (report, keepingLog, [fresh, logging])
    }

    /// One fresh device's bootstrap: from its first request to the end of its sync (a purge of what it folded
    /// included), checked against `expected`.
    func bootstrapDevice(
        _ name: String, policy: DevicePolicy, expected: (client: NotesClient, engine: SyncEngine)
    ) async throws -> (ChurnReport.Bootstrap, (client: NotesClient, engine: SyncEngine)) {
        let fresh = try device(name, policy: policy)
        let started = ContinuousClock.now
        try await fresh.engine.syncNow()
        let seconds = BootstrapCommand.seconds(ContinuousClock.now - started)
        let traffic = fresh.engine.status.traffic
        let converged = try await fresh.client.exportState() == expected.client.exportState()
        guard converged else { throw ValidationError("the bootstrapped device's state differs from the device's") }
        let events = fresh.engine.status.pulledEvents
        let report = ChurnReport.Bootstrap(
            seconds: seconds, events: events, eventsPerSecond: Double(events) / seconds,
            bytesOnTheWire: traffic.receivedWire, bytesRaw: traffic.receivedRaw,
            deviceBytes: try fresh.client.store.database.maintenance.statistics().fileBytes,
            loggedEvents: try await fresh.client.store.counts()[.confirmed] ?? 0)
        return (report, fresh)
    }

    /// Push latency while compaction folds a backlog, beside the same pushes with nothing else running.
    func cost(operations: Int, writer: inout ChurnWriter, devices: [(client: NotesClient, engine: SyncEngine)])
        async throws -> ChurnReport.Cost
    {
        var backlog: [Event] = []
        for _ in 0..<operations { backlog += writer.nextOperation() }
        try await push(backlog, writer: &writer)
        try await settle(devices, writer: writer)
        // Small pushes of 50 events, as devices make them, timed one by one.
        var probes: [[Event]] = []
        for _ in 0..<4000 {
            var batch: [Event] = []
            while batch.count < 50 { batch += writer.nextOperation() }
            probes.append(batch)
        }
        let replica = writer.replica
        let next = Mutex(0)
        let running = Mutex(true)
        let folding = Task { () async throws -> CompactionReport in
            defer { running.withLock { $0 = false } }
            return try await compactServer()
        }
        var during: [Double] = []
        while running.withLock({ $0 }) {
            let index = next.withLock { value in
                value += 1
                return value - 1
            }
            guard index < probes.count / 2 else { break }
            let start = ContinuousClock.now
            _ = try await pushBatch(probes[index], replica: replica)
            during.append(BootstrapCommand.seconds(ContinuousClock.now - start) * 1000)
        }
        let folded = try await folding.value
        var idle: [Double] = []
        for index in (probes.count / 2)..<(probes.count / 2 + max(during.count, 50)) where index < probes.count {
            let start = ContinuousClock.now
            _ = try await pushBatch(probes[index], replica: replica)
            idle.append(BootstrapCommand.seconds(ContinuousClock.now - start) * 1000)
        }
        let events = folded.scopes.reduce(0) { $0 + $1.foldedEvents }
        return ChurnReport.Cost(
            foldedEvents: events, foldSeconds: folded.seconds,
            foldedPerSecond: Double(events) / max(folded.seconds, 1e-9), pushes: during.count,
            pushP50Milliseconds: PushCommand.percentile(during, 0.5),
            pushP99Milliseconds: PushCommand.percentile(during, 0.99),
            idlePushes: idle.count, idlePushP50Milliseconds: PushCommand.percentile(idle, 0.5),
            idlePushP99Milliseconds: PushCommand.percentile(idle, 0.99))
    }
}

struct ChurnReport: Codable, Sendable {
    struct Checkpoint: Codable, Sendable {
        var operations: Int
        var serverBytes: Int
        var serverRows: Int
        var deviceBytes: Int
        var deviceEvents: Int
        var liveStateBytes: Int
        var foldSeconds: Double
        var prunedEvents: Int
    }

    struct Bootstrap: Codable, Sendable {
        var seconds: Double
        /// Events the device pulled.
        var events: Int
        var eventsPerSecond: Double
        var bytesOnTheWire: Int
        var bytesRaw: Int
        var deviceBytes: Int
        /// Of those events, the ones its log holds after the sync (the others were folded on arrival).
        var loggedEvents: Int?
    }

    struct Cost: Codable, Sendable {
        var foldedEvents: Int
        var foldSeconds: Double
        var foldedPerSecond: Double
        var pushes: Int
        var pushP50Milliseconds: Double
        var pushP99Milliseconds: Double
        var idlePushes: Int
        var idlePushP50Milliseconds: Double
        var idlePushP99Milliseconds: Double
    }

    var compaction: Bool
    var notes: Int
    var scopes: Int
    var operations: Int
    /// Operations made before the counted ones (`--warm-up`); absent in reports from before the option.
    var warmUp: Int?
    var seed: UInt64
    var checkpoints: [Checkpoint] = []
    var writeSeconds = 0.0
    /// Folds between checkpoints, and the seconds they took.
    var folds = 0
    var foldSeconds = 0.0
    var bootstrap: Bootstrap?
    /// The same bootstrap by a device that logs every event it pulls (no pruning): the in-run baseline.
    var bootstrapKeepingLog: Bootstrap?
    var cost: Cost?

    /// The warm-up as the texts say it before the operations: "N operations of warm-up, then ", or nothing.
    var warmUpPhrase: String {
        guard let warmUp, warmUp > 0 else { return "" }
        return "\(warmUp.formatted()) operations of warm-up, then "
    }

    /// How the bytes beyond the live state (what history and its bookkeeping cost) at `last` compare with
    /// those at `first`.
    static func beyondLiveState(_ bytes: KeyPath<Checkpoint, Int>, _ last: Checkpoint, _ first: Checkpoint) -> Double {
        Double(last[keyPath: bytes] - last.liveStateBytes)
            / Double(max(1, first[keyPath: bytes] - first.liveStateBytes))
    }

    var text: String {
        var lines = [
            "churn: \(notes) notes in \(scopes) scopes, \(warmUpPhrase)\(operations) operations, compaction \(compaction ? "on" : "off")",
            "| operations | server MiB | server rows | device MiB | device events | live state MiB | fold s |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for point in checkpoints {
            lines.append(
                "| \(point.operations) | \(ChurnCommand.mib(point.serverBytes)) | \(point.serverRows) | \(ChurnCommand.mib(point.deviceBytes)) | \(point.deviceEvents) | \(ChurnCommand.mib(point.liveStateBytes)) | \(String(format: "%.1f", point.foldSeconds)) |"
            )
        }
        if let first = checkpoints.first, let last = checkpoints.last, checkpoints.count > 1 {
            lines.append(
                String(
                    format: "last / first: server %.2f×, device %.2f×; last / live state: server %.2f×, device %.2f×",
                    Double(last.serverBytes) / Double(first.serverBytes),
                    Double(last.deviceBytes) / Double(first.deviceBytes),
                    Double(last.serverBytes) / Double(last.liveStateBytes),
                    Double(last.deviceBytes) / Double(last.liveStateBytes)))
            lines.append(
                String(
                    format: "beyond the live state, last / first: server %.2f×, device %.2f×",
                    Self.beyondLiveState(\.serverBytes, last, first),
                    Self.beyondLiveState(\.deviceBytes, last, first)))
        }
        if folds > 0 {
            lines.append(String(format: "folds between checkpoints: %d, %.1f s in all", folds, foldSeconds))
        }
        if let bootstrap {
            for (label, run) in [("bootstrap", bootstrap), ("bootstrap keeping the log", bootstrapKeepingLog)] {
                guard let run else { continue }
                lines.append(
                    String(
                        format:
                            "%@: %.2f s, %d events (%.0f/s), %d logged, %.1f MiB on the wire (%.1f MiB raw), device %.1f MiB",
                        label, run.seconds, run.events, run.eventsPerSecond, run.loggedEvents ?? run.events,
                        Double(run.bytesOnTheWire) / 1_048_576, Double(run.bytesRaw) / 1_048_576,
                        Double(run.deviceBytes) / 1_048_576))
            }
        }
        if let cost {
            lines.append(
                String(
                    format:
                        "cost: folded %d events in %.1f s (%.0f/s); push of 50 p50/p99 %.1f/%.1f ms during (%d), %.1f/%.1f ms idle (%d)",
                    cost.foldedEvents, cost.foldSeconds, cost.foldedPerSecond, cost.pushP50Milliseconds,
                    cost.pushP99Milliseconds, cost.pushes, cost.idlePushP50Milliseconds, cost.idlePushP99Milliseconds,
                    cost.idlePushes))
        }
        return lines.joined(separator: "\n")
    }
}
