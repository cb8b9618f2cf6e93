import ArgumentParser
import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes
import NIOPosix
import PostgresNIO
import ServiceLifecycle
import SyncCompression
import SyncServer

/// `sync-bench bare-server`: the floor under a one-event push, a server built of the same parts as sync-server
/// (Hummingbird, PostgresNIO, the same gzip, requests on their connection's loop with a pool per loop) that does
/// nothing a push does beyond them.
///
/// `POST /v1/push` takes the body, gunzips it, stores it with one prepared `INSERT` and answers one accepted event,
/// without authentication, JSON, validation, idempotency or notification. What sync-server spends per push above
/// this server's CPU is its own code; what this server spends is what HTTP, gzip, the database round trip and the
/// kernel cost on this machine. `sync-bench push --baseline bare` runs it in a child process for the same pushes.
struct BareServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bare-server",
        abstract: "Serve the floor of a one-event push (Hummingbird + PostgresNIO, one INSERT); prints its port.")

    /// The table the bare server stores its pushes in (created at start if missing).
    static let table = "bench_bare_push"

    @Option(help: "PostgreSQL URL; the server stores the pushes in the table bench_bare_push there.")
    var databaseURL: String

    @Option(help: "Port to listen on (0: any free port).")
    var port: Int = 0

    @Option(help: "Connections in all, split over the event loops as sync-server's (SYNC_DB_POOL_SIZE).")
    var poolSize: Int = 16

    @Flag(
        help:
            "Answer the push in a NIO channel handler below Hummingbird's router, with futures and one prepared statement on a connection per event loop: no Swift task, router or async handler per request."
    )
    var belowRouter = false

    @Flag(
        help:
            "With --below-router: run the insert in a task on the connection's loop, through the loop's pool (PostgresNIO's async API), as a push's async code would, instead of with a future."
    )
    var inATask = false

    @Option(help: "Seconds before an idle connection is pinged, 0 never (sync-server's SYNC_DB_KEEPALIVE_SECONDS).")
    var keepAliveSeconds: Int = 30

    func run() async throws {
        var logger = Logger(label: "bare-server")
        logger.logLevel = .warning
        let address = try DatabaseAddress(databaseURL)
        let executors = LoopExecutors.singleton
        let perLoop = max(1, (poolSize + executors.loops.count - 1) / executors.loops.count)
        var pools: [ObjectIdentifier: LoopPool] = [:]
        var services: [any Service] = []
        for loop in executors.loops {
            var configuration = address.clientConfiguration
            configuration.options.connectTimeout = .seconds(5)
            let pool = LoopPool(
                configuration: configuration, size: perLoop,
                keepAlive: keepAliveSeconds > 0 ? .seconds(keepAliveSeconds) : nil, loop: loop, logger: logger)
            pools[ObjectIdentifier(loop)] = pool
            guard let executor = executors.executor(for: loop) else { continue }
            services.append(LoopPoolService(pool: pool, executor: executor, logger: logger))
        }
        let router = Router()
        router.post("/v1/push") { [pools, logger] request, _ -> Response in
            var body = try await request.body.collect(upTo: 1 << 20)
            var data = body.readData(length: body.readableBytes) ?? Data()
            if request.headers[.contentEncoding] == "gzip" { data = try Gzip.decompress(data, maxOutputBytes: 1 << 24) }
            guard let loop = executors.current?.loop, let pool = pools[ObjectIdentifier(loop)] else {
                throw HTTPError(.internalServerError, message: "a request off the event loops")
            }
            do {
                try await pool.client.withConnection { connection in
                    pool.leased(connection)
                    defer { pool.released(connection) }
                    try await connection.execute(BareInsert(body: ByteBuffer(data: data)), logger: logger)
                }
            } catch {
                throw HTTPError(.internalServerError, message: String(reflecting: error))
            }
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return Response(
                status: .ok, headers: headers,
                body: .init(byteBuffer: ByteBuffer(string: #"{"results":[{"status":"accepted"}]}"#)))
        }
        try await PGBaselineCommand.withConnection(databaseURL: databaseURL) { connection, logger in
            _ = try await connection.query(
                PostgresQuery(
                    unsafeSQL:
                        "CREATE TABLE IF NOT EXISTS \(Self.table) (id bigserial PRIMARY KEY, body bytea NOT NULL)"),
                logger: logger)
        }
        // Below the router: each loop's own connection, with the insert prepared on it.
        var statements: [ObjectIdentifier: PreparedQuery] = [:]
        if belowRouter {
            for (index, loop) in executors.loops.enumerated() {
                let connection = try await PostgresConnection.connect(
                    on: loop,
                    configuration: address.connectionConfiguration, id: index, logger: logger
                ).get()
                statements[ObjectIdentifier(loop)] = try await connection.prepare(query: BareInsert.sql).get()
            }
        }
        let app = Application(
            router: router,
            server: HTTPServerBuilder { [statements, pools, logger, inATask] responder in
                LoopBoundHTTP1Channel(
                    inner: HTTP1Channel(
                        responder: responder,
                        configuration: .init(
                            additionalChannelHandlers: statements.isEmpty
                                ? []
                                : [
                                    BarePushHandler(
                                        statements: statements, pools: inATask ? pools : [:], logger: logger)
                                ])),
                    executors: executors)
            },
            configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: nil),
            services: services,
            onServerRunning: { channel in
                FileHandle.standardOutput.write(
                    Data("bare-server listening on \(channel.localAddress?.port ?? 0)\n".utf8))
            },
            logger: logger)
        try await app.runService()
    }
}

extension BareServerCommand {
    struct Measurement: Sendable {
        var eventsPerSecond: Double
        var cpuMicrosecondsPerPush: Double
    }

    /// Starts `sync-bench bare-server` on `databaseURL` in a child process, pushes `bodies` to it as `sync-bench push`
    /// does (after a warm-up of up to 500 of them), and measures its CPU time per push; then stops it and drops its
    /// table.
    static func measure(_ bodies: [PushCommand.Body], databaseURL: String, concurrency: Int, gzip: Bool) async throws
        -> Measurement
    {
        let child = Process()
        child.executableURL = URL(
            fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        child.arguments = ["bare-server", "--database-url", databaseURL]
        let output = Pipe()
        child.standardOutput = output
        try child.run()
        defer {
            if child.isRunning { child.terminate() }
            child.waitUntilExit()
        }
        // Stopped if it has not said its port within a minute, which ends the read below.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(60))
            if child.isRunning { child.terminate() }
        }
        defer { watchdog.cancel() }
        let port = try await Task.detached { try readPort(output.fileHandleForReading) }.value
        watchdog.cancel()
        let http = PushCommand.client(concurrency: concurrency)
        let url = "http://127.0.0.1:\(port)/v1/push"
        let measured: (outcome: PushCommand.Outcome, seconds: Double, cpu: Double)
        do {
            _ = try await PushCommand.push(
                Array(bodies.prefix(500)), to: url, token: "bare", gzip: gzip, concurrency: concurrency, http: http)
            let before = ProcessCPU.seconds(of: child.processIdentifier)
            let started = ContinuousClock.now
            let outcome = try await PushCommand.push(
                bodies, to: url, token: "bare", gzip: gzip, concurrency: concurrency, http: http)
            let elapsed = ContinuousClock.now - started
            measured = (
                outcome, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
                ProcessCPU.seconds(of: child.processIdentifier) - before
            )
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
        child.terminate()
        child.waitUntilExit()
        try await PGBaselineCommand.withConnection(databaseURL: databaseURL) { connection, logger in
            _ = try await connection.query(PostgresQuery(unsafeSQL: "DROP TABLE IF EXISTS \(table)"), logger: logger)
        }
        return Measurement(
            eventsPerSecond: Double(measured.outcome.accepted) / measured.seconds,
            cpuMicrosecondsPerPush: measured.cpu * 1e6 / Double(bodies.count))
    }

    /// The port of the line `bare-server listening on <port>` that the child writes once it listens.
    private static func readPort(_ handle: FileHandle) throws -> Int {
        var text = ""
        while true {
            let data = handle.availableData
            guard !data.isEmpty else { throw ValidationError("bare-server ended before listening") }
            text += String(decoding: data, as: UTF8.self)
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("bare-server listening on ") }),
                let port = Int(line.dropFirst("bare-server listening on ".count))
            {
                return port
            }
        }
    }
}

/// `bare-server --below-router`: `POST /v1/push` answered in the channel's pipeline, on its event loop, with the
/// loop's prepared insert run by a future; every other request goes on to Hummingbird.
private final class BarePushHandler: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    // @unchecked: the state is used on the channel's event loop only.
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    private let statements: [ObjectIdentifier: PreparedQuery]
    /// With `--in-a-task`, the loops' pools the insert runs on from a task.
    private let pools: [ObjectIdentifier: LoopPool]
    private let logger: Logger
    /// The body of the push being read, nil when the request is not one.
    private var body: ByteBuffer?
    private var gzip = false

    init(statements: [ObjectIdentifier: PreparedQuery], pools: [ObjectIdentifier: LoopPool], logger: Logger) {
        self.statements = statements
        self.pools = pools
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head) where head.method == .post && head.path == "/v1/push":
            body = context.channel.allocator.buffer(capacity: 1024)
            gzip = head.headerFields[.contentEncoding] == "gzip"
        case .body(var chunk) where body != nil:
            body?.writeBuffer(&chunk)
        case .end where body != nil:
            let buffer = body ?? ByteBuffer()
            body = nil
            answer(buffer, context: context)
        default:
            context.fireChannelRead(data)
        }
    }

    private func answer(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        var data = Data(buffer: buffer)
        if gzip, let inflated = try? Gzip.decompress(data, maxOutputBytes: 1 << 24) { data = inflated }
        if let pool = pools[ObjectIdentifier(context.eventLoop)],
            let executor = LoopExecutors.singleton.executor(for: context.eventLoop)
        {
            let body = ByteBuffer(data: data)
            Task(executorPreference: executor) { [logger] in
                let status: HTTPResponse.Status
                do {
                    try await pool.client.withConnection { connection in
                        pool.leased(connection)
                        defer { pool.released(connection) }
                        try await connection.execute(BareInsert(body: body), logger: logger)
                    }
                    status = .ok
                } catch {
                    status = .internalServerError
                }
                self.respond(status, context: bound.value)
            }
            return
        }
        guard let statement = statements[ObjectIdentifier(context.eventLoop)] else {
            respond(.internalServerError, context: context)
            return
        }
        statement.execute([PostgresData(type: .bytea, value: ByteBuffer(data: data))]).hop(to: context.eventLoop)
            .whenComplete { result in
                let status: HTTPResponse.Status
                switch result {
                case .success: status = .ok
                case .failure: status = .internalServerError
                }
                self.respond(status, context: bound.value)
            }
    }

    private func respond(_ status: HTTPResponse.Status, context: ChannelHandlerContext) {
        let body = ByteBuffer(string: #"{"results":[{"status":"accepted"}]}"#)
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        fields[.contentLength] = String(body.readableBytes)
        context.write(wrapOutboundOut(.head(HTTPResponse(status: status, headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

/// The push's one statement on the bare server.
private struct BareInsert: PostgresPreparedStatement {
    static let sql = "INSERT INTO \(BareServerCommand.table) (body) VALUES ($1)"
    typealias Row = ()
    var body: ByteBuffer

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(body)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row {}
}
