import Foundation
import Logging
import PostgresNIO
import SyncServer
import SyncTestSupport

/// A fresh PostgreSQL database per test, on the server of `SYNC_DATABASE_URL` (set by
/// `scripts/with-postgres.sh`); when the variable is unset, the throwaway cluster of `scripts/postgres.sh`
/// is started once for the whole test run.
public struct TestDatabase: Sendable {
    public let url: DatabaseURL
    public let name: String

    /// The server URL every test database is created on.
    public static let serverURL: DatabaseURL = {
        if let text = ProcessInfo.processInfo.environment["SYNC_DATABASE_URL"], !text.isEmpty {
            return try! DatabaseURL(text)
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let result = try! ChildProcess.run(
            root.appendingPathComponent("scripts/postgres.sh").path, ["start"],
            environment: ProcessInfo.processInfo.environment)
        precondition(
            result.status == 0, "scripts/postgres.sh start failed: \(String(decoding: result.stderr, as: UTF8.self))")
        let text = String(decoding: result.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return try! DatabaseURL(String(text.split(separator: "\n").last ?? ""))
    }()

    public static let logger = Logger(label: "test-database")

    /// The coordinator of the Citus cluster of `SYNC_CITUS_URL` (set by `scripts/citus.sh` through `make test`
    /// and `make citus`), whose databases the tests on Citus create; nil when there is none.
    public static let citusURL: DatabaseURL? = {
        guard let text = ProcessInfo.processInfo.environment["SYNC_CITUS_URL"], !text.isEmpty else { return nil }
        return try! DatabaseURL(text)
    }()

    /// Runs `body` with a new, empty database that is dropped afterwards (even when `body` throws).
    ///
    /// - Parameters:
    ///   - citus: on the Citus cluster of `scripts/citus.sh` (`SYNC_CITUS_URL`) instead: the database is
    ///     created on the coordinator and on every worker, each with the Citus extension, and the workers are
    ///     added to the coordinator's (Citus keeps its nodes per database), as `scripts/citus.sh
    ///     create-database` does, without a process: Foundation's `Process.run()` on Linux crashes now and
    ///     then (it reads past a directory entry while listing its open descriptors), and a hundred tests
    ///     starting processes at once made it crash a test run.
    ///   - body: the test, given the database.
    public static func with<Result>(citus: Bool = false, _ body: (TestDatabase) async throws -> Result)
        async throws -> Result
    {
        let name = "test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        let servers = citus ? try await citusNodes() : [serverURL]
        let database = TestDatabase(url: servers[0].with(database: name), name: name)
        do {
            for server in servers { try await admin("CREATE DATABASE \(name)", on: server) }
            if citus { try await joinCitusNodes(servers, database: name) }
            let result = try await body(database)
            for server in servers { try await drop(name, on: server) }
            return result
        } catch {
            for server in servers { try? await drop(name, on: server) }
            // A PSQLError prints only "Generic description"; what PostgreSQL said is in its reflection.
            if error is PSQLError { throw TestDatabaseError(message: String(reflecting: error)) }
            throw error
        }
    }

    /// Drops the database `name` of `server`, if it exists, once nothing is connected to it.
    ///
    /// `DROP DATABASE … WITH (FORCE)` alone fails now and then on Citus ("being accessed by other users"): it
    /// terminates the sessions and waits 5 s for them to end while holding the database's lock, but a Citus
    /// maintenance daemon whose loopback connection it terminated opens another, which waits for that lock,
    /// and the daemon waits for its connection. So new connections are refused first and the sessions are
    /// terminated until none is left (a refused connection fails at once, and the daemon then sees its
    /// SIGTERM and exits); the drop comes after.
    static func drop(_ name: String, on server: DatabaseURL) async throws {
        do {
            _ = try await connect(server.with(database: "postgres")) { connection in
                let exists =
                    try await connection.query(
                        "SELECT 1 FROM pg_database WHERE datname = \(name)", logger: logger
                    ).collect().count == 1
                guard exists else { return }
                try await connection.query(
                    PostgresQuery(unsafeSQL: "ALTER DATABASE \(name) ALLOW_CONNECTIONS false"), logger: logger)
                for _ in 0..<300 {
                    let sessions = try await connection.query(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = \(name)",
                        logger: logger
                    ).collect().count
                    if sessions == 0 { break }
                    try await Task.sleep(for: .milliseconds(100))
                }
                try await connection.query(
                    PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"), logger: logger)
            }
        } catch {
            throw TestDatabaseError(
                message: "dropping \(name) on \(server.host):\(server.port) failed: \(String(reflecting: error))")
        }
    }

    /// The Citus cluster's nodes, the coordinator first, as its `pg_dist_node` lists them.
    static func citusNodes() async throws -> [DatabaseURL] {
        guard let coordinator = citusURL else {
            throw TestDatabaseError(message: "no Citus cluster: SYNC_CITUS_URL is not set (scripts/citus.sh start)")
        }
        let workers = try await connect(coordinator) { connection in
            var found: [DatabaseURL] = []
            let rows = try await connection.query(
                "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' ORDER BY nodeid",
                logger: logger)
            for try await (host, port) in rows.decode((String, Int32).self) {
                var worker = coordinator
                worker.host = host
                worker.port = Int(port)
                found.append(worker)
            }
            return found
        }
        return [coordinator] + workers
    }

    /// How many shards each distributed table of a test database has (see `joinCitusNodes`).
    public static let testShardCount = 4

    /// Creates the Citus extension in the new database `name` of every node and adds the workers to the
    /// coordinator's, one database at a time: adding a node updates catalogs that every database of the
    /// worker shares (its roles), and two databases doing it at once fail with "tuple concurrently updated".
    /// The lock is an advisory lock in the cluster's own database, which every test process shares.
    ///
    /// The database's tables are split in `testShardCount` shards each, not Citus's default of 32: a test's
    /// tables are made on every test's new database, and at 32 shards making them cost 7 CPU-seconds a test
    /// (4 at 4 shards), which made the server's suites on the cluster take six minutes of `make test`.
    /// Four shards over two workers still put scopes on both, which is all the suites need; the end-to-end
    /// tests of `CitusTests` keep the server's own default.
    static func joinCitusNodes(_ servers: [DatabaseURL], database name: String) async throws {
        for server in servers {
            _ = try await connect(server.with(database: name)) { connection in
                try await connection.query("CREATE EXTENSION citus", logger: logger)
            }
        }
        _ = try await connect(servers[0].with(database: "postgres")) { connection in
            try await connection.query(
                PostgresQuery(unsafeSQL: "ALTER DATABASE \(name) SET citus.shard_count = \(testShardCount)"),
                logger: logger)
        }
        let lockKey: Int64 = 0x5359_4E43_7E57  // "SYNC" test
        _ = try await connect(servers[0]) { lock in
            try await lock.query("SELECT pg_advisory_lock(\(lockKey))", logger: logger)
            do {
                _ = try await connect(servers[0].with(database: name)) { connection in
                    let coordinator = servers[0]
                    try await connection.query(
                        "SELECT citus_set_coordinator_host(\(coordinator.host), \(coordinator.port)::int)",
                        logger: logger)
                    for worker in servers.dropFirst() {
                        try await connection.query(
                            "SELECT citus_add_node(\(worker.host), \(worker.port)::int)", logger: logger)
                    }
                }
                try await lock.query("SELECT pg_advisory_unlock(\(lockKey))", logger: logger)
            } catch {
                _ = try? await lock.query("SELECT pg_advisory_unlock(\(lockKey))", logger: logger)
                throw error
            }
        }
    }

    /// Runs one statement on the server's maintenance database.
    public static func admin(_ sql: String) async throws {
        try await admin(sql, on: serverURL)
    }

    /// Runs one statement on the maintenance database of the server that holds this database and, when it is
    /// on the Citus cluster, of every node of it: a server reaches the nodes directly (`CitusWorkers`), so what
    /// makes "the database" unavailable must reach them all.
    public func adminOnEveryNode(_ sql: String) async throws {
        let citus = Self.citusURL.map { $0.host == url.host && $0.port == url.port } ?? false
        for server in citus ? try await Self.citusNodes() : [url] { try await Self.admin(sql, on: server) }
    }

    /// Runs one statement on the maintenance database of `server`. An error names the statement, the server
    /// and what PostgreSQL said (a `PSQLError` alone prints nothing but "Generic description").
    static func admin(_ sql: String, on server: DatabaseURL) async throws {
        do {
            _ = try await connect(server.with(database: "postgres")) { connection in
                try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
            }
        } catch {
            throw TestDatabaseError(
                message: "\(sql) on \(server.host):\(server.port) failed: \(String(reflecting: error))")
        }
    }

    /// Runs `body` on a direct connection to this database.
    public func connection<Result>(_ body: (PostgresConnection) async throws -> Result) async throws -> Result {
        try await Self.connect(url, body)
    }

    /// Runs one statement on this database.
    public func execute(_ query: PostgresQuery) async throws {
        _ = try await connection { connection in
            try await connection.query(query, logger: Self.logger)
        }
    }

    /// The Int64 values of the first column of a query.
    public func integers(_ query: PostgresQuery) async throws -> [Int64] {
        try await values(query, as: Int64.self)
    }

    /// The text values of the first column of a query.
    public func strings(_ query: PostgresQuery) async throws -> [String] {
        try await values(query, as: String.self)
    }

    private func values<Value: PostgresDecodable & Sendable>(_ query: PostgresQuery, as type: Value.Type)
        async throws -> [Value]
    {
        try await connection { connection in
            var values: [Value] = []
            for try await value in try await connection.query(query, logger: Self.logger).decode(Value.self) {
                values.append(value)
            }
            return values
        }
    }

    /// Runs `body` on a direct connection to `url`, connecting again (up to 5 times, a second apart) when
    /// connecting failed, as a client does: while another test opens 2,000 connections at once, PostgreSQL
    /// on two cores once took over 10 s (PostgresNIO's connect timeout) to answer a new one, and a test whose
    /// own statements had nothing to do with it failed. A statement that failed is never sent twice.
    private static func connect<Result>(_ url: DatabaseURL, _ body: (PostgresConnection) async throws -> Result)
        async throws -> Result
    {
        try await url.withConnection(logger: logger, reconnects: 5, body)
    }
}

/// A test database that cannot be made.
public struct TestDatabaseError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
