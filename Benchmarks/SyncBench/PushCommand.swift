import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NotesDomain
import SyncCompression
import SyncModels
import SyncProtocol
import Synchronization

/// `sync-bench push`: how many events per second a running sync-server accepts.
///
/// Generates every batch before the clock starts (so the benchmark measures the server, not the client's
/// JSON encoding), then `--concurrency` workers push them as fast as the server answers. Prints events/s
/// accepted, push latency percentiles, and the request bytes raw vs gzip; with `--database-url` it then runs
/// a baseline on the same database and prints the ratio: the raw `COPY` of `pg-baseline` for the same number of
/// rows (`--baseline copy`, the ceiling of bulk pushes), or `pgbench` running the insert of a one-event push
/// with as many clients as the server has connections (`--baseline pgbench`, the ceiling of one-event pushes;
/// `PGBenchBaseline`), or both.
struct PushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push", abstract: "Measure events/s accepted by a running sync-server.")

    @Option(help: "Base URL of the server, e.g. http://127.0.0.1:8080.")
    var server: String = "http://127.0.0.1:8080"

    @Option(help: "Bearer token with the benchmark's scopes (or SYNC_TOKEN); mint one with sync-server token.")
    var token: String?

    @Option(help: "Events to push in total.")
    var events: Int = 100_000

    @Option(help: "Events per push.")
    var batch: Int = 500

    @Option(help: "Pushes in flight at once.")
    var concurrency: Int = 8

    @Option(
        help:
            "Scopes to spread pushes over, one scope per push as a device pushes its own scope (named bench-0, bench-1, …; the token must grant them)."
    )
    var scopes: Int = 16

    @Option(help: "Approximate payload size per event, in bytes.")
    var payloadBytes: Int = 120

    @Flag(inversion: .prefixedNo, help: "Send request bodies gzip-compressed.")
    var gzip: Bool = true

    @Option(help: "Also run a baseline (--baseline) on this database (the server's) and print the ratio.")
    var databaseURL: String?

    enum Baseline: String, ExpressibleByArgument, CaseIterable, Sendable {
        case copy, pgbench, both
    }

    @Option(
        help:
            "With --database-url: copy (a raw COPY of as many rows), pgbench (the insert of a one-event push, run by pgbench), or both."
    )
    var baseline: Baseline = .copy

    @Option(help: "pgbench clients: the server's pool size (SYNC_DB_POOL_SIZE, default 16).")
    var pgbenchClients: Int = 16

    @Option(help: "Seconds pgbench runs.")
    var pgbenchSeconds: Int = 5

    @Option(help: "The server's process id: report its CPU time per push (Linux, from /proc).")
    var serverPid: Int32?

    @Option(
        help:
            "PostgreSQL's postmaster process id: report PostgreSQL's CPU time per push, and per pgbench transaction with --baseline pgbench (its processes', live and ended; Linux, from /proc). Repeat it for a cluster (a Citus coordinator and its workers): their sum."
    )
    var postgresPid: [Int32] = []

    @Flag(
        help:
            "With --database-url and --batch 1: then push the same bodies to a bare server of the same parts (sync-bench bare-server, started here on that database) and report its CPU per push: the floor under the server's."
    )
    var bareServer: Bool = false

    @Flag(help: "Print one JSON object instead of text.")
    var json: Bool = false

    func validate() throws {
        guard events > 0, batch > 0, concurrency > 0, scopes > 0, pgbenchClients > 0, pgbenchSeconds > 0 else {
            throw ValidationError(
                "--events, --batch, --concurrency, --scopes, --pgbench-clients and --pgbench-seconds must be positive")
        }
        if bareServer, databaseURL == nil || batch != 1 {
            throw ValidationError("--bare-server needs --database-url and --batch 1 (it answers one event per push)")
        }
    }

    func run() async throws {
        guard let token = token ?? ProcessInfo.processInfo.environment["SYNC_TOKEN"] else {
            throw ValidationError("pass --token or set SYNC_TOKEN (sync-server token --sub bench --scopes bench-0,…)")
        }
        let bodies = try Self.makeBodies(
            events: events, batch: batch, scopes: scopes, payloadBytes: payloadBytes, gzip: gzip)
        let http = Self.client(concurrency: concurrency)
        let url = server.trimmingCharacters(in: CharacterSet(charactersIn: "/")) + "/v1/push"
        let serverBefore = serverPid.map(ProcessCPU.seconds(of:))
        let postgresBefore = ProcessCPU.seconds(ofTrees: postgresPid)
        let started = ContinuousClock.now
        let outcome: Outcome
        do {
            outcome = try await Self.push(
                bodies, to: url, token: token, gzip: gzip, concurrency: concurrency, http: http)
        } catch {
            try? await http.shutdown()
            throw error
        }
        let elapsed = ContinuousClock.now - started
        let serverCPU = serverPid.map(ProcessCPU.seconds(of:)).map { $0 - (serverBefore ?? 0) }
        let postgresCPU = ProcessCPU.seconds(ofTrees: postgresPid).map { $0 - (postgresBefore ?? 0) }
        try await http.shutdown()
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        var report = PushReport(
            events: events, batch: batch, concurrency: concurrency, scopes: scopes, gzip: gzip,
            accepted: outcome.accepted, duplicate: outcome.duplicate, rejected: outcome.rejected, seconds: seconds,
            eventsPerSecond: Double(outcome.accepted) / seconds,
            p50Milliseconds: Self.percentile(outcome.latencies, 0.50),
            p99Milliseconds: Self.percentile(outcome.latencies, 0.99),
            requestBytesRaw: bodies.reduce(0) { $0 + $1.raw },
            requestBytesWire: bodies.reduce(0) { $0 + $1.wire.readableBytes },
            responseBytesWire: outcome.responseBytes, pushes: bodies.count)
        report.serverCPUMicrosecondsPerPush = serverCPU.map { $0 * 1e6 / Double(bodies.count) }
        report.postgresCPUMicrosecondsPerPush = postgresCPU.map { $0 * 1e6 / Double(bodies.count) }
        if let databaseURL, baseline != .pgbench {
            let copy = try await PGBaselineCommand.measure(
                databaseURL: databaseURL, rows: events, payloadBytes: payloadBytes)
            report.copyRowsPerSecond = copy.rowsPerSecond
            report.ratioToCopy = report.eventsPerSecond / copy.rowsPerSecond
        }
        if let databaseURL, baseline != .copy {
            let before = ProcessCPU.seconds(ofTrees: postgresPid)
            let pgbench = try await PGBenchBaseline.measure(
                databaseURL: databaseURL, clients: pgbenchClients, seconds: pgbenchSeconds, scopes: scopes,
                payloadBytes: payloadBytes)
            if let before, let after = ProcessCPU.seconds(ofTrees: postgresPid), pgbench.transactionsPerSecond > 0 {
                let transactions = pgbench.transactionsPerSecond * Double(pgbench.seconds)
                report.pgbenchPostgresCPUMicrosecondsPerTransaction = (after - before) * 1e6 / transactions
            }
            report.pgbench = pgbench
            report.ratioToPGBench = report.eventsPerSecond / pgbench.transactionsPerSecond
        }
        if bareServer, let databaseURL {
            let bare = try await BareServerCommand.measure(
                bodies, databaseURL: databaseURL, concurrency: concurrency, gzip: gzip)
            report.bareEventsPerSecond = bare.eventsPerSecond
            report.bareServerCPUMicrosecondsPerPush = bare.cpuMicrosecondsPerPush
        }
        if json {
            print(String(decoding: try JSONEncoder().encode(report), as: UTF8.self))
        } else {
            print(report.text)
        }
    }

    /// An HTTP client with a connection for each push in flight.
    static func client(concurrency: Int) -> HTTPClient {
        HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(
                connectionPool: .init(
                    idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: concurrency)))
    }

    /// One pre-encoded push.
    struct Body: Sendable {
        var wire: ByteBuffer
        var raw: Int
        var count: Int
    }

    static func makeBodies(events: Int, batch: Int, scopes: Int, payloadBytes: Int, gzip: Bool) throws -> [Body] {
        let replica = ReplicaID.random()
        var ids = EventIDGenerator()
        let codec = WireCodec()
        let filler = String(repeating: "x", count: max(0, payloadBytes - 75))
        // A note.titleSet, padded to --payload-bytes with members its payload type does not have (every reader
        // ignores them).
        let titleSet = NotePayload.titleSet(.init(title: "bench"))
        guard case .object(let title) = titleSet.json else { preconditionFailure("a note payload is an object") }
        var bodies: [Body] = []
        var made = 0
        var counter: UInt64 = 0
        while made < events {
            let count = min(batch, events - made)
            var batchEvents: [Event] = []
            batchEvents.reserveCapacity(count)
            for _ in 0..<count {
                counter += 1
                let wall = UInt64(Date().timeIntervalSince1970 * 1000)
                let id = ids.next(wall: wall)
                batchEvents.append(
                    Event(
                        id: id, scope: try Scope("bench-\(bodies.count % scopes)"),
                        stream: "note:\(UUID().uuidString.lowercased())",
                        streamVersion: 1, type: titleSet.type.rawValue,
                        hlc: HLCTimestamp(physical: id.milliseconds, counter: 0, node: replica.high),
                        dot: Dot(replica: replica, counter: counter),
                        payload: .object(title.merging(["text": .string(filler), "n": .int(Int64(made))]) { $1 })))
                made += 1
            }
            let json = try codec.encode(PushRequest(replica: replica, events: batchEvents))
            let wire = gzip ? Gzip.compress(json, level: 5) : json
            bodies.append(Body(wire: ByteBuffer(bytes: wire), raw: json.count, count: count))
        }
        return bodies
    }

    struct Outcome: Sendable {
        var accepted = 0
        var duplicate = 0
        var rejected = 0
        var latencies: [Double] = []
        var responseBytes = 0
    }

    static func push(
        _ bodies: [Body], to url: String, token: String, gzip: Bool, concurrency: Int, http: HTTPClient
    ) async throws -> Outcome {
        let next = NextIndex()
        return try await withThrowingTaskGroup(of: Outcome.self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var outcome = Outcome()
                    while let index = next.take(below: bodies.count) {
                        var request = HTTPClientRequest(url: url)
                        request.method = .POST
                        request.headers.add(name: "Authorization", value: "Bearer \(token)")
                        request.headers.add(name: "Content-Type", value: "application/json")
                        if gzip {
                            request.headers.add(name: "Content-Encoding", value: "gzip")
                            request.headers.add(name: "Accept-Encoding", value: "gzip")
                        }
                        request.body = .bytes(bodies[index].wire)
                        let start = ContinuousClock.now
                        let response = try await http.execute(request, timeout: .seconds(120))
                        var body = try await response.body.collect(upTo: 64 << 20)
                        let latency = ContinuousClock.now - start
                        outcome.latencies.append(
                            Double(latency.components.seconds) * 1000 + Double(latency.components.attoseconds) / 1e15)
                        outcome.responseBytes += body.readableBytes
                        guard response.status == .ok else {
                            throw ValidationError(
                                "push answered \(response.status): \(body.readString(length: body.readableBytes) ?? "")"
                            )
                        }
                        var data = Data(buffer: body)
                        if response.headers["Content-Encoding"].first == "gzip" { data = try Gzip.decompress(data) }
                        let counts = Self.countStatuses(data)
                        if counts.0 + counts.1 + counts.2 == bodies[index].count {
                            outcome.accepted += counts.0
                            outcome.duplicate += counts.1
                            outcome.rejected += counts.2
                        } else {
                            for result in try WireCodec().decode(PushResponse.self, from: data).results {
                                switch result.status {
                                case .accepted: outcome.accepted += 1
                                case .duplicate: outcome.duplicate += 1
                                case .rejected: outcome.rejected += 1
                                }
                            }
                        }
                    }
                    return outcome
                }
            }
            var total = Outcome()
            for try await part in group {
                total.accepted += part.accepted
                total.duplicate += part.duplicate
                total.rejected += part.rejected
                total.latencies += part.latencies
                total.responseBytes += part.responseBytes
            }
            return total
        }
    }

    /// Counts `"status":"accepted"`, `…duplicate"`, `…rejected"` in a push answer: the client's share of
    /// the machine stays small; when the counts do not add up, the caller decodes the answer in full.
    static func countStatuses(_ data: Data) -> (Int, Int, Int) {
        let patterns = ["\"status\":\"accepted\"", "\"status\":\"duplicate\"", "\"status\":\"rejected\""].map {
            Array($0.utf8)
        }
        var counts = [0, 0, 0]
        data.withUnsafeBytes { bytes in
            var index = 0
            let prefix = Array("\"status\":\"".utf8)
            while index + prefix.count < bytes.count {
                if bytes[index] == prefix[0], bytes[index + 1] == prefix[1] {
                    for (kind, pattern) in patterns.enumerated() where index + pattern.count <= bytes.count {
                        if (0..<pattern.count).allSatisfy({ bytes[index + $0] == pattern[$0] }) {
                            counts[kind] += 1
                            break
                        }
                    }
                }
                index += 1
            }
        }
        return (counts[0], counts[1], counts[2])
    }

    static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * fraction).rounded()))]
    }
}

/// Hands out batch indexes to the workers.
final class NextIndex: Sendable {
    private let value = Mutex(0)

    func take(below count: Int) -> Int? {
        value.withLock { next in
            guard next < count else { return nil }
            defer { next += 1 }
            return next
        }
    }
}

/// What `sync-bench push` measured.
struct PushReport: Codable, Sendable {
    var events: Int
    var batch: Int
    var concurrency: Int
    var scopes: Int
    var gzip: Bool
    var accepted: Int
    var duplicate: Int
    var rejected: Int
    var seconds: Double
    var eventsPerSecond: Double
    var p50Milliseconds: Double
    var p99Milliseconds: Double
    var requestBytesRaw: Int
    var requestBytesWire: Int
    var responseBytesWire: Int
    /// Pushes made (nil in reports written before it was recorded).
    var pushes: Int?
    /// CPU time per push of the server's process and of PostgreSQL's (with --server-pid, --postgres-pid).
    var serverCPUMicrosecondsPerPush: Double?
    var postgresCPUMicrosecondsPerPush: Double?
    /// PostgreSQL's CPU time per transaction of the pgbench baseline (its setup included).
    var pgbenchPostgresCPUMicrosecondsPerTransaction: Double?
    var copyRowsPerSecond: Double?
    var ratioToCopy: Double?
    var pgbench: PGBenchBaseline.Result?
    var ratioToPGBench: Double?
    /// The same pushes to `sync-bench bare-server` (--bare-server): its events/s and CPU per push.
    var bareEventsPerSecond: Double?
    var bareServerCPUMicrosecondsPerPush: Double?

    var text: String {
        var lines = [
            "push: \(events) events, batch \(batch), concurrency \(concurrency), \(scopes) scopes, gzip \(gzip)",
            String(
                format: "  accepted %d (duplicate %d, rejected %d) in %.2f s: %.0f events/s", accepted, duplicate,
                rejected, seconds, eventsPerSecond),
            String(format: "  push latency p50 %.1f ms, p99 %.1f ms", p50Milliseconds, p99Milliseconds),
            String(
                format: "  request bytes raw %d, on the wire %d (%.1fx smaller); response bytes on the wire %d",
                requestBytesRaw, requestBytesWire, Double(requestBytesRaw) / Double(max(1, requestBytesWire)),
                responseBytesWire),
        ]
        if serverCPUMicrosecondsPerPush != nil || postgresCPUMicrosecondsPerPush != nil {
            lines.append(
                "  CPU per push (\(pushes ?? 0) pushes): server "
                    + (serverCPUMicrosecondsPerPush.map { String(format: "%.0f µs", $0) } ?? "not measured")
                    + ", PostgreSQL "
                    + (postgresCPUMicrosecondsPerPush.map { String(format: "%.0f µs", $0) } ?? "not measured"))
        }
        if let copyRowsPerSecond, let ratioToCopy {
            lines.append(
                String(format: "  raw COPY baseline %.0f rows/s; server / COPY = %.2f", copyRowsPerSecond, ratioToCopy))
        }
        if let pgbench, let ratioToPGBench {
            lines.append(
                String(
                    format:
                        "  pgbench baseline (%@, %d scopes) %.0f transactions/s, latency %.2f ms; server / pgbench = %.2f",
                    pgbench.command, pgbench.scopes, pgbench.transactionsPerSecond, pgbench.latencyMilliseconds ?? 0,
                    ratioToPGBench))
            if let perTransaction = pgbenchPostgresCPUMicrosecondsPerTransaction {
                lines.append(
                    String(
                        format: "  PostgreSQL CPU per pgbench transaction %.0f µs%@", perTransaction,
                        postgresCPUMicrosecondsPerPush.map {
                            String(format: "; per push / per transaction = %.2f", $0 / perTransaction)
                        } ?? ""))
            }
        }
        if let bareEventsPerSecond, let bareServerCPUMicrosecondsPerPush {
            lines.append(
                String(
                    format: "  bare server (Hummingbird, PostgresNIO, one INSERT) %.0f events/s, CPU per push %.0f µs",
                    bareEventsPerSecond, bareServerCPUMicrosecondsPerPush)
                    + (serverCPUMicrosecondsPerPush.map {
                        String(format: "; server / bare = %.2f", $0 / bareServerCPUMicrosecondsPerPush)
                    } ?? ""))
        }
        return lines.joined(separator: "\n")
    }
}

/// CPU time of processes, from /proc (Linux; zero elsewhere or when the process is gone).
enum ProcessCPU {
    /// The fields of `/proc/<pid>/stat` after the command's closing parenthesis (state is the first, field 3).
    private static func statFields(_ pid: String) -> [Substring]? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ")
    }

    private static func ticks(_ fields: [Substring], _ indexes: [Int]) -> Double {
        indexes.reduce(0) { $0 + (fields.count > $1 ? Double(fields[$1]) ?? 0 : 0) }
    }

    private static var ticksPerSecond: Double { Double(sysconf(Int32(_SC_CLK_TCK))) }

    /// User and system CPU seconds of `pid`.
    static func seconds(of pid: Int32) -> Double {
        guard let fields = statFields(String(pid)) else { return 0 }
        return ticks(fields, [11, 12]) / ticksPerSecond  // utime, stime: fields 14 and 15
    }

    /// The sum of `seconds(ofTree:)` over `parents` (nil when there are none): the postmasters of a cluster.
    static func seconds(ofTrees parents: [Int32]) -> Double? {
        parents.isEmpty ? nil : parents.reduce(0) { $0 + seconds(ofTree: $1) }
    }

    /// CPU seconds of `parent`, of its children that have ended (cutime, cstime) and of those still running
    /// (PostgreSQL's postmaster: its backends, its background processes).
    static func seconds(ofTree parent: Int32) -> Double {
        guard let own = statFields(String(parent)) else { return 0 }
        var total = ticks(own, [11, 12, 13, 14])
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for name in names where name.first?.isNumber == true {
            guard let fields = statFields(name), fields.count > 1, Int32(fields[1]) == parent else { continue }
            total += ticks(fields, [11, 12])
        }
        return total / ticksPerSecond
    }
}
