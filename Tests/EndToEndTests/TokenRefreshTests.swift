import Foundation
import Testing

/// Short-lived tokens (issue 47): `sync-agent --token-command` gets a new token whenever the server refuses
/// the one in use, so two devices whose tokens live two seconds sync with the live stream for a minute
/// without a pause, and nothing is lost or pushed twice; `sync-load --token-lifetime` gives every device of a
/// load run such tokens, and its verdict holds.
@Suite struct TokenRefreshTests {
    /// The command that prints a new two-second token for `subject`.
    static func command(_ subject: String) -> String {
        let server = Stack.productsDirectory.appendingPathComponent("sync-server").path
        return "SYNC_JWT_SECRET='\(Stack.secret)' '\(server)' token --sub \(subject) --scopes tokens-1 --ttl 2"
    }

    /// The kinds of `agent`'s journal entries and how many of each.
    static func journal(of agent: Agent) async throws -> [String: Int] {
        let rows = try await Stack.run(
            "/usr/bin/env",
            [
                "python3", "-c",
                "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); [print(k, n) for k, n in c.execute('SELECT kind, count(*) FROM sync_journal GROUP BY kind')]",
                agent.database,
            ])
        var kinds: [String: Int] = [:]
        for line in rows.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2 { kinds[String(parts[0])] = Int(parts[1]) }
        }
        return kinds
    }

    @Test func twoDevicesOnTwoSecondTokensSyncLiveWithoutAPauseAndLoseNothing() async throws {
        let stack = try await Stack()
        let a = stack.agent("a", token: try await stack.token(sub: "a", scopes: ["tokens-1"], ttl: 2))
        let b = stack.agent("b", token: try await stack.token(sub: "b", scopes: ["tokens-1"], ttl: 2))
        // Both hold the live stream (the server ends it when the token expires) while a edits for a minute:
        // about thirty expiries each.
        async let writing = a(
            "run", "--simulate", "2", "--scope", "tokens-1", "--duration", "60", "--token-command", Self.command("a"))
        async let reading = b("run", "--duration", "60", "--token-command", Self.command("b"))
        _ = try await (writing, reading)
        // Their first tokens expired long ago: a sync refreshes first.
        try await a("sync", "--token-command", Self.command("a"))
        try await b("sync", "--token-command", Self.command("b"))

        let held = try await a.state()
        #expect(try await held == b.state() && !held.isEmpty, "both devices hold the same notes")
        let status = try await a.status()
        #expect(status.pending == 0 && status.rejected.isEmpty)
        let events = try await stack.sql("SELECT count(*), count(DISTINCT event_id) FROM events")
        let counts = events.first?.split(separator: "|") ?? []
        #expect(counts.count == 2 && counts[0] == counts[1] && Int(counts[0]) == status.confirmed, "\(events)")
        for (name, agent) in [("a", a), ("b", b)] {
            let kinds = try await Self.journal(of: agent)
            #expect(kinds["token", default: 0] >= 10, "\(name) refreshed its token as it expired: \(kinds)")
            #expect(kinds["pause"] == nil && kinds["error"] == nil, "\(name) never paused: \(kinds)")
        }
    }

    /// Full replicas and thin devices on the live stream, every token good for two seconds: each device asks
    /// for a new one when the server refuses its own (a replica through its engine's token provider, a thin
    /// device itself), and the verdict finds nothing lost, duplicated or diverged.
    @Test func aLoadRunOnTwoSecondTokensPassesItsVerdict() async throws {
        let stack = try await LoadTests.stack()
        let out = stack.directory.appendingPathComponent("report")
        let result = try await Stack.runCapturing(
            LoadTests.load,
            [
                "run", "--server", stack.serverURL, "--jwt-secret", Stack.secret, "--devices", "12", "--replicas", "4",
                "--scopes", "2", "--duration", "8", "--ramp-up", "1", "--rate", "2", "--faults", "0", "--offline", "0",
                "--crash-interval", "0", "--token-lifetime", "2", "--seed", "3", "--out", out.path,
                "--data-dir", stack.directory.appendingPathComponent("devices").path,
            ])
        #expect(result.status == 0, "\(result.stderr.suffix(3000))")
        // The verdict passed, and the server holds each event once.
        let step = try await CitusTests.passedStep(out, stack)
        // Nine seconds on two-second tokens: every one of the 16 devices renewed its token at least twice.
        #expect((step.tokensRenewed ?? 0) >= 32, "tokens renewed: \(String(describing: step.tokensRenewed))")
        let markdown = try String(contentsOf: out.appendingPathComponent("report.md"), encoding: .utf8)
        #expect(markdown.contains("tokens that last 2 s") && markdown.contains("tokens expired and renewed"))
    }
}
