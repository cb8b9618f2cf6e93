import Foundation
import SyncTestSupport
import Testing

/// A real stack for one test: a fresh PostgreSQL database on the test PostgreSQL server, a `sync-server`
/// process on a free loopback port, and `sync-agent` invocations on SQLite files in a temporary directory.
/// Everything is stopped and removed when the test ends.
final class Stack: @unchecked Sendable {
    // @unchecked: `server` is only touched from the owning test's task (start/kill/restart are sequential).

    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The directory holding the built executables: the test binary's own directory.
    static let productsDirectory: URL = {
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        while url.pathComponents.count > 1 {
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("sync-server").path) { return url }
            url.deleteLastPathComponent()
        }
        return repositoryRoot.appendingPathComponent(".build/debug")
    }()

    static let secret = "end-to-end-test-secret-0123456789abcdef"

    let directory: URL
    let databaseName: String
    let databaseURL: String
    let adminURL: String
    let port: Int
    let noteQuota: Int
    /// `SYNC_*` settings the server is started with, beside the stack's own.
    let serverEnvironment: [String: String]
    private var server: ChildProcess.Running?

    var serverURL: String { "http://127.0.0.1:\(port)" }

    /// Whether the database is on the Citus cluster of `scripts/citus.sh` (its tables distributed by the
    /// server at start-up) rather than on the test PostgreSQL.
    let citus: Bool

    /// - Parameter citus: a database of the Citus cluster (`scripts/citus.sh create-database`), the server
    ///   started with `SYNC_CITUS=true`.
    init(noteQuota: Int = 1000, serverEnvironment: [String: String] = [:], citus: Bool = false) async throws {
        self.noteQuota = noteQuota
        self.citus = citus
        self.serverEnvironment = citus ? serverEnvironment.merging(["SYNC_CITUS": "true"]) { $1 } : serverEnvironment
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        databaseName = "e2e_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16))"
        if citus {
            adminURL = try Self.citusURL()
            databaseURL = try await Self.run(Self.citusScript, ["create-database", databaseName])
                .trimmingCharacters(in: .whitespacesAndNewlines)
        } else {
            adminURL = try await Self.postgresURL()
            _ = try await Self.run("/usr/bin/env", ["psql", adminURL, "-qc", "CREATE DATABASE \(databaseName)"])
            var components = URLComponents(string: adminURL)!
            components.path = "/\(databaseName)"
            databaseURL = components.string!
        }
        port = try Self.freePort()
        try await startServer()
    }

    /// Stops the server and drops the database on a thread of its own: a `deinit` cannot wait without
    /// blocking, and the test that released the stack may be on a thread of the concurrency pool.
    deinit {
        let (server, citus, databaseName, adminURL, directory) = (server, citus, databaseName, adminURL, directory)
        server?.terminate()
        Thread {
            server?.waitUntilExit()
            if citus {
                _ = try? Self.runBlocking(Self.citusScript, ["drop-database", databaseName])
            } else {
                _ = try? Self.runBlocking(
                    "/usr/bin/env", ["psql", adminURL, "-qc", "DROP DATABASE IF EXISTS \(databaseName) WITH (FORCE)"])
            }
            try? FileManager.default.removeItem(at: directory)
        }.start()
    }

    static var citusScript: String { repositoryRoot.appendingPathComponent("scripts/citus.sh").path }

    /// The Citus coordinator of `SYNC_CITUS_URL` (set by `make test` and `make citus` when Citus is there).
    static func citusURL() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["SYNC_CITUS_URL"], !url.isEmpty else {
            throw StackError("no Citus cluster: SYNC_CITUS_URL is not set (make citus starts one)")
        }
        return url
    }

    /// The test PostgreSQL: `SYNC_DATABASE_URL` (set by `make test`), or a cluster started by
    /// `scripts/postgres.sh` when a test is run on its own.
    static func postgresURL() async throws -> String {
        if let url = ProcessInfo.processInfo.environment["SYNC_DATABASE_URL"], !url.isEmpty { return url }
        let output = try await run(repositoryRoot.appendingPathComponent("scripts/postgres.sh").path, ["start"])
        return output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    // MARK: - Server

    func startServer() async throws {
        server = try await launchServer(port: port, log: "server.log")
    }

    /// Starts another `sync-server` on the same database, on a port of its own, as a second server of a
    /// deployment is; the caller stops it (`kill` and `exited()`). Returns its base URL and process.
    func startAnotherServer() async throws -> (url: String, process: ChildProcess.Running) {
        let port = try Self.freePort()
        return ("http://127.0.0.1:\(port)", try await launchServer(port: port, log: "server-\(port).log"))
    }

    /// A `sync-server` on this stack's database at `port`, its output in `log` (in `directory`), once it
    /// answers `/readyz`; killed if it does not within 30 s.
    private func launchServer(port: Int, log: String) async throws -> ChildProcess.Running {
        var environment = ProcessInfo.processInfo.environment
        environment["SYNC_DATABASE_URL"] = databaseURL
        environment["SYNC_JWT_SECRET"] = Self.secret
        environment.merge(serverEnvironment) { $1 }
        let process = try ChildProcess.start(
            Self.productsDirectory.appendingPathComponent("sync-server").path,
            ["--port", String(port), "--note-quota", String(noteQuota)], environment: environment,
            output: directory.appendingPathComponent(log).path)
        for _ in 0..<300 {
            if (try? await Self.run(
                "/usr/bin/env", ["curl", "-sf", "-o", "/dev/null", "http://127.0.0.1:\(port)/readyz"]))
                != nil
            {
                return process
            }
            if !process.isRunning {
                let output = (try? String(contentsOf: directory.appendingPathComponent(log), encoding: .utf8)) ?? ""
                throw StackError("sync-server exited: \(output.suffix(2000))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        kill(process.processIdentifier, SIGKILL)
        await process.exited()
        throw StackError("sync-server did not become ready on port \(port)")
    }

    /// The server's process id (nil when it is not running).
    var serverProcessIdentifier: pid_t? { server?.processIdentifier }

    /// `kill -9` the server: no shutdown, no flush.
    func killServer() async {
        guard let server else { return }
        kill(server.processIdentifier, SIGKILL)
        await server.exited()
        self.server = nil
    }

    /// `sync-server compact` on this stack's database, started without waiting (its output is discarded).
    func startCompaction(environment: [String: String] = [:]) throws -> ChildProcess.Running {
        try ChildProcess.start(
            Self.productsDirectory.appendingPathComponent("sync-server").path, ["compact"],
            environment: ProcessInfo.processInfo.environment.merging(
                ["SYNC_DATABASE_URL": databaseURL, "SYNC_LOG_LEVEL": "error"].merging(environment) { $1 }
            ) { $1 })
    }

    /// `sync-server compact [arguments]` on this stack's database; its JSON report.
    func compact(_ arguments: [String] = [], environment: [String: String] = [:]) async throws -> String {
        try await Self.run(
            Self.productsDirectory.appendingPathComponent("sync-server").path, ["compact"] + arguments,
            environment: ["SYNC_DATABASE_URL": databaseURL, "SYNC_LOG_LEVEL": "error"].merging(environment) { $1 })
    }

    /// A token signed with the server's secret.
    func token(sub: String = "tester", scopes: [String], ttl: Int = 3600) async throws -> String {
        let process = Self.productsDirectory.appendingPathComponent("sync-server").path
        return try await Self.run(
            process, ["token", "--sub", sub, "--scopes", scopes.joined(separator: ","), "--ttl", String(ttl)],
            environment: ["SYNC_JWT_SECRET": Self.secret]
        ).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A SQL query's single-column rows on this test's database.
    func sql(_ query: String) async throws -> [String] {
        try await Self.run("/usr/bin/env", ["psql", databaseURL, "-tAc", query]).split(separator: "\n").map(String.init)
    }

    // MARK: - Agents

    func agent(_ name: String, token: String) -> Agent {
        Agent(
            executable: Self.productsDirectory.appendingPathComponent("sync-agent"),
            database: directory.appendingPathComponent("\(name).sqlite").path, server: serverURL, token: token)
    }

    // MARK: - Processes

    struct StackError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Runs a process to completion; throws with its stderr on a nonzero exit. The wait is on a thread of its
    /// own, never on one of Swift's cooperative pool: the pool has a thread per core and is shared by every
    /// async test of this process and the servers some run in it, and a test holding one while its child
    /// ran (seconds, on a loaded machine) stalled every other test for as long (a second `make test` beside
    /// the first starved engines of other suites until their waits ran out).
    @discardableResult
    static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) async throws
        -> String
    {
        try await offPool { try runBlocking(executable, arguments, environment: environment) }
    }

    /// `run` on the calling thread: only where nothing can wait (`deinit`) or outside the pool.
    @discardableResult
    static func runBlocking(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws
        -> String
    {
        let result = try runCapturingBlocking(executable, arguments, environment: environment)
        guard result.status == 0 else {
            throw StackError(
                "\(URL(fileURLWithPath: executable).lastPathComponent) \(arguments.first ?? "") exited \(result.status): \(result.stderr)"
            )
        }
        return result.stdout
    }

    /// Runs a program to its end (on a thread of its own, as `run`) and returns its exit status and outputs.
    static func runCapturing(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:]
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await offPool { try runCapturingBlocking(executable, arguments, environment: environment) }
    }

    private static func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    /// `runCapturing` on the calling thread. Through `ChildProcess` (posix_spawn), not Foundation's `Process`,
    /// whose `run()` on Linux crashes the test process now and then.
    static func runCapturingBlocking(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:]
    ) throws -> (status: Int32, stdout: String, stderr: String) {
        let result = try ChildProcess.run(
            executable, arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new })
        return (
            result.status, String(decoding: result.stdout, as: UTF8.self),
            String(decoding: result.stderr, as: UTF8.self)
        )
    }

    /// A loopback port free now: the one the kernel gives a socket bound to port 0, closed again. In the
    /// process, not through a child: starting one blocked a thread of Swift's cooperative pool.
    static func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw StackError("no free port: socket() failed, errno \(errno)") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(socket, address, length) == 0 && getsockname(socket, address, &length) == 0
            }
        }
        guard bound else { throw StackError("no free port: bind() failed, errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// One `sync-agent` replica: a SQLite file and the CLI.
struct Agent: Sendable {
    let executable: URL
    let database: String
    let server: String
    var token: String
    /// `--key-file`: the replica encrypted at rest under the keys of this file.
    var keyFile: String?

    /// The options every command gets: the replica, the server, the token, the key file if any.
    var common: [String] {
        ["--db", database, "--server", server, "--token", token] + (keyFile.map { ["--key-file", $0] } ?? [])
    }

    /// Runs `sync-agent <arguments>` and returns its standard output; throws on a nonzero exit. Waits on a
    /// thread of its own (`Stack.run`), never holding one of the concurrency pool.
    @discardableResult
    func callAsFunction(_ arguments: String...) async throws -> String {
        try await Stack.run(executable.path, arguments + common).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func capturing(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await Stack.runCapturing(executable.path, arguments + common)
    }

    /// Starts `sync-agent <arguments>` without waiting for it.
    func start(_ arguments: [String]) throws -> ChildProcess.Running {
        try ChildProcess.start(
            executable.path, arguments + common, environment: ProcessInfo.processInfo.environment)
    }

    func state() async throws -> [String: NoteJSON] {
        try JSONDecoder().decode([String: NoteJSON].self, from: Data(try await self("export", "--state").utf8))
    }

    func status() async throws -> StatusJSON {
        try JSONDecoder().decode(StatusJSON.self, from: Data(try await self("status").utf8))
    }
}

struct NoteJSON: Decodable, Equatable {
    struct Item: Decodable, Equatable {
        var id: String
        var text: String
        var done: Bool
    }
    var title: String
    var body: String
    var tags: [String]
    var pinned: Bool
    var viewCount: Int
    var checklist: [Item]
    var deleted: Bool
}

struct StatusJSON: Decodable {
    struct Rejected: Decodable {
        var id: String
        var code: String
        var message: String
    }
    var pending: Int
    var confirmed: Int
    var rejected: [Rejected]
    var cursor: String?
    var lastError: String?
    struct JournalEntry: Decodable {
        var kind: String
        var detail: String
    }
    var journal: [JournalEntry]
    var fileBytes: Int
    var lastCompaction: JournalEntry?
    var openConflicts: Int?
}
