import Foundation
import SyncTestSupport

/// One more `sync-server` on a stack's database (the stack's own is the first), stopped when released.
final class ServerProcess: @unchecked Sendable {
    // @unchecked: `process` is set once in init and only stopped in deinit.
    let port: Int
    private let process: ChildProcess.Running

    var url: String { "http://127.0.0.1:\(port)" }

    init(stack: Stack) async throws {
        port = try Stack.freePort()
        let process = try ChildProcess.start(
            Stack.productsDirectory.appendingPathComponent("sync-server").path,
            ["--port", String(port), "--note-quota", String(stack.noteQuota)],
            environment: ProcessInfo.processInfo.environment.merging(
                ["SYNC_DATABASE_URL": stack.databaseURL, "SYNC_JWT_SECRET": Stack.secret].merging(
                    stack.serverEnvironment
                ) { $1 }
            ) { $1 },
            output: stack.directory.appendingPathComponent("server-\(port).log").path)
        self.process = process
        try await Stack.waitUntilAnswered("http://127.0.0.1:\(port)/readyz", while: { process.isRunning })
    }

    deinit {
        process.terminate()
        // Reaped on a thread of its own: a deinit cannot wait without blocking its thread, which may be
        // one of the concurrency pool's.
        Thread { [process] in process.waitUntilExit() }.start()
    }
}

/// nginx in front of sync-servers on loopback, configured by `deploy/nginx/sync.conf` with its placeholders
/// filled in (as `make chaos` does), stopped when released.
final class Nginx: @unchecked Sendable {
    // @unchecked: `process` is set once in init and only stopped in deinit.
    let port: Int
    private let process: ChildProcess.Running

    var url: String { "http://127.0.0.1:\(port)" }

    /// - Parameters:
    ///   - upstreams: the ports of the sync-servers.
    ///   - directory: a folder of the test's; nginx keeps its configuration, pid and logs in `nginx/` there.
    init(upstreams: [Int], directory: URL) async throws {
        port = try Stack.freePort()
        let folder = directory.appendingPathComponent("nginx")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let template = try String(
            contentsOf: Stack.repositoryRoot.appendingPathComponent("deploy/nginx/sync.conf"), encoding: .utf8)
        let servers = upstreams.map { "server 127.0.0.1:\($0) max_fails=1 fail_timeout=2s;" }.joined(separator: " ")
        let configuration = folder.appendingPathComponent("nginx.conf")
        try template.replacingOccurrences(of: "@RUN@", with: folder.path)
            .replacingOccurrences(of: "@PORT@", with: String(port))
            .replacingOccurrences(of: "@SERVERS@", with: servers)
            .write(to: configuration, atomically: true, encoding: .utf8)
        let executable = ["/usr/sbin/nginx", "/usr/bin/nginx"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        guard let executable else {
            throw Stack.StackError("nginx is not installed (scripts/bootstrap.sh installs it)")
        }
        let process = try ChildProcess.start(
            executable,
            ["-p", folder.path, "-c", configuration.path, "-e", folder.appendingPathComponent("error.log").path],
            environment: ProcessInfo.processInfo.environment)
        self.process = process
        try await Stack.waitUntilAnswered("http://127.0.0.1:\(port)/readyz", while: { process.isRunning })
    }

    deinit {
        process.terminate()
        // Reaped on a thread of its own: a deinit cannot wait without blocking its thread, which may be
        // one of the concurrency pool's.
        Thread { [process] in process.waitUntilExit() }.start()
    }
}

extension Stack {
    /// Waits until `url` answers 200, for up to 30 s, or until `running` says the process behind it ended.
    static func waitUntilAnswered(_ url: String, while running: () -> Bool) async throws {
        for _ in 0..<300 {
            if (try? await run("/usr/bin/env", ["curl", "-sf", "-o", "/dev/null", url])) != nil { return }
            guard running() else { throw StackError("the process behind \(url) exited") }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw StackError("\(url) did not answer in 30 s")
    }
}
