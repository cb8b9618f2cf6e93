import AsyncHTTPClient
import Foundation
import NIOCore
import SyncModels
import SyncProtocol
import SyncServer
import SyncServerTesting
import SyncTestSupport
import Testing

/// The `sync-server` executable itself: the token subcommand, and serving until SIGTERM with a graceful
/// shutdown that does not wait out long-polls.
@Suite struct ExecutableTests {
    /// The built `sync-server`, next to the test bundle.
    static var executable: URL {
        let candidates = [
            Bundle.main.executableURL?.deletingLastPathComponent(), Bundle.main.bundleURL,
            Bundle.main.bundleURL.deletingLastPathComponent(),
        ].compactMap { $0?.appendingPathComponent("sync-server") }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[0]
    }

    /// Runs sync-server to its end: its exit status and its standard output followed by its standard error.
    static func run(_ arguments: [String], environment: [String: String]) async throws -> (Int32, String) {
        let result = try await ChildProcess.runOnThread(executable.path, arguments, environment: environment)
        return (result.status, String(decoding: result.stdout + result.stderr, as: UTF8.self))
    }

    @Test func tokenSubcommandMintsAVerifiableToken() async throws {
        // An hour, and the expiry checked against the times around the run: on a loaded machine the process
        // alone took over a minute, which a token of 60 seconds did not outlive.
        let before = Date()
        let (status, output) = try await Self.run(
            ["token", "--sub", "dev", "--scopes", "a,b", "--ttl", "3600"],
            environment: ["SYNC_JWT_SECRET": TestServer.secret])
        let after = Date()
        #expect(status == 0, "\(output)")
        let identity = try await TokenVerifier(secret: TestServer.secret)
            .identity(authorization: "Bearer " + output.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(identity.subject == "dev" && identity.scopes == ["a", "b"])
        // Valid for the hour asked for, from when it was minted.
        let expiry = identity.expiresAt ?? .distantPast
        #expect(expiry >= before.addingTimeInterval(3599) && expiry <= after.addingTimeInterval(3601), "\(expiry)")
        let (refused, message) = try await Self.run(["token", "--sub", "dev", "--scopes", "a"], environment: [:])
        #expect(refused != 0 && message.contains("SYNC_JWT_SECRET"))
    }

    @Test func servesUntilSIGTERMAndShutsDownWithoutWaitingOutLongPolls() async throws {
        try await TestDatabase.with { database in
            let directory = try TemporaryDirectory()
            let log = directory.path("server.log")
            let process = try ChildProcess.start(
                Self.executable.path, ["--port", "0"],
                environment: [
                    "SYNC_DATABASE_URL": database.url.urlString, "SYNC_JWT_SECRET": TestServer.secret,
                    "SYNC_DB_POOL_SIZE": "2", "SYNC_MAX_WAIT_SECONDS": "300",
                ],
                output: log)
            defer {
                if process.isRunning { process.terminate() }
                process.waitUntilExit()
            }
            let port = try await Self.listeningPort(log, while: process)
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            do {
                let token = try await TokenVerifier(secret: TestServer.secret).mint(
                    subject: "t", scopes: ["x"], ttl: 60)
                // Bounds against a hang, not measures: a loaded machine may take seconds for each step.
                let deadline = ContinuousClock.now + .seconds(120)
                var readiness: UInt?
                while readiness != 200 && ContinuousClock.now < deadline {
                    readiness = try? await http.execute(
                        HTTPClientRequest(url: "http://127.0.0.1:\(port)/readyz"), timeout: .seconds(10)
                    ).status.code
                    if readiness != 200 { try await Task.sleep(for: .milliseconds(200)) }
                }
                #expect(readiness == 200)
                let poll = Task {
                    var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/pull?wait=300")
                    request.headers.add(name: "Authorization", value: "Bearer \(token)")
                    let start = ContinuousClock.now
                    let response = try await http.execute(request, timeout: .seconds(400))
                    _ = try await response.body.collect(upTo: 1 << 20)
                    return (response.status.code, ContinuousClock.now - start)
                }
                // The poll is waiting in the server before the signal (its metrics say so).
                func parked() async throws -> Double {
                    let response = try await http.execute(
                        HTTPClientRequest(url: "http://127.0.0.1:\(port)/metrics"), timeout: .seconds(30))
                    let text = String(buffer: try await response.body.collect(upTo: 1 << 22))
                    let line = text.split(separator: "\n").first { $0.hasPrefix("sync_longpolls_parked ") }
                    return line.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
                }
                while try await parked() < 1 && ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(try await parked() == 1, "the long-poll is waiting in the server")
                let signalled = ContinuousClock.now
                kill(process.processIdentifier, SIGTERM)
                let (status, elapsed) = try await poll.value
                #expect(status == 200)
                // The poll asked to wait 300 s; a loaded machine may take a while to shut down, never that long.
                #expect(elapsed < .seconds(120), "the long-poll held the shutdown up: \(elapsed)")
                while process.isRunning && ContinuousClock.now - signalled < .seconds(120) {
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(!process.isRunning)
                #expect(process.terminationStatus == 0)
                try await http.shutdown()
            } catch {
                try? await http.shutdown()
                throw error
            }
        }
    }

    /// Reads the server's log until it says which port it listens on.
    /// The port the server logs it listens on (`sync.port=`), read from its log as it starts.
    static func listeningPort(_ log: String, while process: ChildProcess.Running) async throws -> Int {
        var text = ""
        // A bound against a hang: a loaded machine may take a minute to start the process.
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if let range = text.range(of: "sync.port=") {
                let digits = text[range.upperBound...].prefix { $0.isNumber }
                if let port = Int(digits), text[range.upperBound...].count > digits.count { return port }
            }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw ConfigurationError(message: "the server did not report its port: \(text)")
    }
}
