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
        let process = Process()
        process.executableURL = root.appendingPathComponent("scripts/postgres.sh")
        process.arguments = ["start"]
        let output = Pipe()
        process.standardOutput = output
        try! process.run()
        let data = output.fileHandleForReading.readAllRetryingInterrupts()
        process.waitUntilExit()
        precondition(process.terminationStatus == 0, "scripts/postgres.sh start failed")
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
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
    ///     added to the coordinator's (Citus keeps its nodes per database).
    ///   - body: the test, given the database.
    public static func with<Result>(citus: Bool = false, _ body: (TestDatabase) async throws -> Result)
        async throws -> Result
    {
        let name = "test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        let database: TestDatabase
        if citus {
            guard citusURL != nil else {
                throw TestDatabaseError(message: "no Citus cluster: SYNC_CITUS_URL is not set (scripts/citus.sh start)")
            }
            let url = try script("citus.sh", ["create-database", name])
            database = TestDatabase(url: try DatabaseURL(url), name: name)
        } else {
            try await admin("CREATE DATABASE \(name)")
            database = TestDatabase(url: serverURL.with(database: name), name: name)
        }
        func drop() async throws {
            if citus {
                _ = try script("citus.sh", ["drop-database", name])
            } else {
                try await admin("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            }
        }
        do {
            let result = try await body(database)
            try await drop()
            return result
        } catch {
            try? await drop()
            throw error
        }
    }

    /// The repository's `scripts/` folder.
    static let scripts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts")

    /// Runs `scripts/<name> <arguments>`; its last line of output.
    static func script(_ name: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = scripts.appendingPathComponent(name)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readAllRetryingInterrupts()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestDatabaseError(
                message: "scripts/\(name) \(arguments.joined(separator: " ")) exited \(process.terminationStatus)")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return String(text.split(separator: "\n").last ?? "")
    }

    /// Runs one statement on the server's maintenance database.
    public static func admin(_ sql: String) async throws {
        _ = try await connect(serverURL.with(database: "postgres")) { connection in
            try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
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
        try await connection { connection in
            var values: [Int64] = []
            for try await value in try await connection.query(query, logger: Self.logger).decode(Int64.self) {
                values.append(value)
            }
            return values
        }
    }

    private static func connect<Result>(_ url: DatabaseURL, _ body: (PostgresConnection) async throws -> Result)
        async throws -> Result
    {
        try await url.withConnection(logger: logger, body)
    }
}

/// A test database that cannot be made.
public struct TestDatabaseError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
