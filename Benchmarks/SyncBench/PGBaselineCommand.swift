import ArgumentParser
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// `sync-bench pg-baseline`: the rate of a raw PostgreSQL `COPY` of event rows, the ceiling the server's
/// append path is compared with.
///
/// Copies rows shaped like the server's `events` rows (same columns, same payload size) into a fresh table
/// created `LIKE events INCLUDING ALL` when the server's schema is there (so with the same primary key and
/// unique index), on the same database, then drops it.
struct PGBaselineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pg-baseline", abstract: "Measure a raw PostgreSQL COPY of event rows.")

    @Option(help: "PostgreSQL URL (SYNC_DATABASE_URL), the database the server uses.")
    var databaseURL: String?

    @Option(help: "Rows to copy.")
    var events: Int = 100_000

    @Option(help: "Approximate payload size per row, in bytes.")
    var payloadBytes: Int = 120

    @Flag(help: "Print one JSON object instead of text.")
    var json: Bool = false

    func run() async throws {
        guard let url = databaseURL ?? ProcessInfo.processInfo.environment["SYNC_DATABASE_URL"] else {
            throw ValidationError("pass --database-url or set SYNC_DATABASE_URL")
        }
        let result = try await Self.measure(databaseURL: url, rows: events, payloadBytes: payloadBytes)
        if json {
            print(String(decoding: try JSONEncoder().encode(result), as: UTF8.self))
        } else {
            print(
                String(
                    format: "pg-baseline: COPY of %d rows in %.2f s: %.0f rows/s", result.rows, result.seconds,
                    result.rowsPerSecond))
        }
    }

    struct Result: Codable, Sendable {
        var rows: Int
        var seconds: Double
        var rowsPerSecond: Double
    }

    static func measure(databaseURL: String, rows: Int, payloadBytes: Int) async throws -> Result {
        try await withConnection(databaseURL: databaseURL) { connection, logger in
            try await measure(on: connection, rows: rows, payloadBytes: payloadBytes, logger: logger)
        }
    }

    /// Runs `body` on a connection to `databaseURL`, closed afterwards.
    static func withConnection<Value: Sendable>(
        databaseURL: String, _ body: (PostgresConnection, Logger) async throws -> Value
    ) async throws -> Value {
        let address = try DatabaseAddress(databaseURL)
        let logger = Logger(label: "pg-baseline")
        let connection = try await PostgresConnection.connect(
            configuration: address.connectionConfiguration, id: 1, logger: logger)
        do {
            let result = try await body(connection, logger)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    static func measure(on connection: PostgresConnection, rows: Int, payloadBytes: Int, logger: Logger) async throws
        -> Result
    {
        let table = "bench_copy_\(UInt32.random(in: 0...UInt32.max))"
        let hasEvents =
            try await connection.query("SELECT to_regclass('events') IS NOT NULL", logger: logger)
            .collect().first?.decode(Bool.self) ?? false
        let create =
            hasEvents
            ? "CREATE TABLE \(table) (LIKE events INCLUDING ALL)"
            : """
            CREATE TABLE \(table) (scope text NOT NULL, seq bigint NOT NULL, event_id uuid NOT NULL UNIQUE,
              stream text NOT NULL, stream_version bigint NOT NULL, type text NOT NULL, schema_version integer NOT NULL,
              hlc text NOT NULL, dot_replica text NOT NULL, dot_counter bigint NOT NULL, payload jsonb NOT NULL,
              received_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (scope, seq))
            """
        try await connection.query(PostgresQuery(unsafeSQL: create), logger: logger)
        let chunks = makeChunks(rows: rows, payloadBytes: payloadBytes)
        let started = ContinuousClock.now
        do {
            try await connection.copyFrom(
                table: table,
                columns: [
                    "scope", "seq", "event_id", "stream", "stream_version", "type", "schema_version", "hlc",
                    "dot_replica", "dot_counter", "payload",
                ], logger: logger
            ) { writer in
                for chunk in chunks { try await writer.write(chunk) }
            }
        } catch {
            _ = try? await connection.query(PostgresQuery(unsafeSQL: "DROP TABLE \(table)"), logger: logger)
            throw error
        }
        let elapsed = ContinuousClock.now - started
        try await connection.query(PostgresQuery(unsafeSQL: "DROP TABLE \(table)"), logger: logger)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Result(rows: rows, seconds: seconds, rowsPerSecond: Double(rows) / seconds)
    }

    /// The rows in COPY text format, about 1 MiB per chunk, made before the clock starts.
    static func makeChunks(rows: Int, payloadBytes: Int) -> [ByteBuffer] {
        let filler = String(repeating: "x", count: max(0, payloadBytes - 60))
        let replica = "6d2c1f0e9a8b4c7d8e9f001122334455"
        var chunks: [ByteBuffer] = []
        var buffer = ByteBuffer()
        buffer.reserveCapacity(1 << 20)
        for row in 0..<rows {
            let scope = "bench-\(row % 16)"
            let seq = row / 16 + 1
            let id = UUID().uuidString.lowercased()
            let stream = "note:" + UUID().uuidString.lowercased()
            let hlc = String(format: "%016llx:0000:6d2c1f0e9a8b4c7d", UInt64(1_700_000_000_000 + row))
            let payload = #"{"title": "\#(filler)", "n": \#(row)}"#
            buffer.writeString(
                "\(scope)\t\(seq)\t\(id)\t\(stream)\t1\tnote.titleSet\t1\t\(hlc)\t\(replica)\t\(row + 1)\t\(payload)\n")
            if buffer.readableBytes >= 1 << 20 {
                chunks.append(buffer)
                buffer = ByteBuffer()
                buffer.reserveCapacity(1 << 20)
            }
        }
        if buffer.readableBytes > 0 { chunks.append(buffer) }
        return chunks
    }
}

/// A `postgres://user[:password]@host[:port]/database` URL, as the benchmarks' connections and pools take it.
struct DatabaseAddress: Sendable {
    var host: String
    var port: Int
    var user: String
    var password: String?
    var database: String

    init(_ url: String) throws {
        guard let components = URLComponents(string: url), let host = components.host, let user = components.user
        else { throw ValidationError("the database URL must look like postgres://user@host:port/database") }
        let database = String(components.path.drop { $0 == "/" })
        self.host = host
        self.port = components.port ?? 5432
        self.user = user
        self.password = components.password
        self.database = database.isEmpty ? user : database
    }

    var connectionConfiguration: PostgresConnection.Configuration {
        .init(host: host, port: port, username: user, password: password, database: database, tls: .disable)
    }

    var clientConfiguration: PostgresClient.Configuration {
        .init(host: host, port: port, username: user, password: password, database: database, tls: .disable)
    }
}
