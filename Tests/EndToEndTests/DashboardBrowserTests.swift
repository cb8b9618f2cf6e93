import Foundation
import SyncTestSupport
import Testing

/// The dashboard in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`, driven
/// through Selenium; `scripts/bootstrap.sh` installs them) opens `/dashboard` of a real `sync-server` that two
/// `sync-agent` devices pushed to, sees both scopes with their event counts and both devices with their
/// positions, then sees the counts move after more pushes without a reload (`scripts/dashboard-browser-check.py`
/// does the browser's part and checks the 401 and 403 answers too). It saves a screenshot:
/// `SYNC_DASHBOARD_SCREENSHOT` names where (the server README's picture is one), else the stack's directory.
@Suite struct DashboardBrowserTests {
    static let adminToken = "dashboard-admin-token-0123456789"

    @Test func theDashboardShowsScopesAndDevicesAndFollowsNewPushes() async throws {
        let stack = try await Stack(serverEnvironment: ["SYNC_ADMIN_TOKEN": Self.adminToken])
        let scopes = ["dash-alpha", "dash-beta"]
        let a = stack.agent("a", token: try await stack.token(sub: "ana", scopes: [scopes[0]]))
        let b = stack.agent("b", token: try await stack.token(sub: "ben", scopes: [scopes[1]]))
        for index in 0..<3 { try await a("note", "create", "--scope", scopes[0], "--title", "alpha \(index)") }
        for index in 0..<2 { try await b("note", "create", "--scope", scopes[1], "--title", "beta \(index)") }
        try await a("sync")
        try await b("sync")
        // What the page must show, read from the database rather than from the API it shows.
        let heads = try await stack.sql("SELECT scope || '=' || head FROM scopes ORDER BY scope")
        #expect(heads.count == 2, "\(heads)")
        let positions = try await stack.sql(
            "SELECT scope || '=' || replica || ':' || acknowledged_seq FROM replica_progress ORDER BY scope, replica")
        #expect(positions.count == 2, "one device per scope: \(positions)")

        let screenshot =
            ProcessInfo.processInfo.environment["SYNC_DASHBOARD_SCREENSHOT"]
            ?? stack.directory.appendingPathComponent("dashboard.png").path
        let next = stack.directory.appendingPathComponent("next-counts")
        let output = stack.directory.appendingPathComponent("browser.log")
        var arguments = [
            Stack.repositoryRoot.appendingPathComponent("scripts/dashboard-browser-check.py").path,
            "--url", stack.serverURL, "--admin-token", Self.adminToken,
            "--device-token", try await stack.token(sub: "ana", scopes: [scopes[0]]),
            "--screenshot", screenshot, "--then-expect-file", next.path, "--timeout", "90",
        ]
        arguments += heads.flatMap { ["--expect", $0] }
        arguments += positions.flatMap { ["--expect-replica", $0] }
        let browser = try ChildProcess.start(
            "/usr/bin/env", ["python3"] + arguments, environment: ProcessInfo.processInfo.environment,
            output: output.path)
        defer { browser.terminate() }

        // The page showed the first counts: push more from both devices, and tell the check what to wait for.
        try await waitForLine("READY", in: output, while: browser)
        for index in 0..<4 { try await a("note", "create", "--scope", scopes[0], "--title", "alpha more \(index)") }
        try await b("note", "create", "--scope", scopes[1], "--title", "beta more")
        try await a("sync")
        try await b("sync")
        let moved = try await stack.sql("SELECT scope || '=' || head FROM scopes ORDER BY scope")
        #expect(moved != heads, "\(moved)")
        try Data((moved.joined(separator: "\n") + "\n").utf8).write(to: next.appendingPathExtension("tmp"))
        try FileManager.default.moveItem(at: next.appendingPathExtension("tmp"), to: next)

        await browser.exited()
        let log = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        #expect(browser.terminationStatus == 0, "the browser check failed:\n\(log.suffix(4000))")
        #expect(log.split(separator: "\n").last == "OK", "\(log.suffix(2000))")
        #expect(FileManager.default.fileExists(atPath: screenshot))
    }

    /// Waits until the file the check writes to holds `line`, failing when the check ends first.
    func waitForLine(_ line: String, in file: URL, while process: ChildProcess.Running) async throws {
        while true {
            let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
            if text.split(separator: "\n").contains(where: { $0 == line }) { return }
            guard process.isRunning else {
                Issue.record("the browser check ended before \(line):\n\(text.suffix(4000))")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(200))
        }
    }
}
