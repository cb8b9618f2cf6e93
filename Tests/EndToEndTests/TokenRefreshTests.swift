import Foundation
import Testing

/// Short-lived tokens (issue 47): `sync-agent --token-command` gets a new token whenever the server refuses
/// the one in use, so two devices whose tokens live two seconds sync with the live stream for a dozen seconds
/// without a pause, and nothing is lost or pushed twice.
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
        let a = await stack.agent("a", token: try stack.token(sub: "a", scopes: ["tokens-1"], ttl: 2))
        let b = await stack.agent("b", token: try stack.token(sub: "b", scopes: ["tokens-1"], ttl: 2))
        // Both hold the live stream (the server ends it when the token expires) while a edits for 12 s.
        async let writing = a(
            "run", "--simulate", "4", "--scope", "tokens-1", "--duration", "12", "--token-command", Self.command("a"))
        async let reading = b("run", "--duration", "12", "--token-command", Self.command("b"))
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
            #expect(kinds["token", default: 0] >= 3, "\(name) refreshed its token as it expired: \(kinds)")
            #expect(kinds["pause"] == nil && kinds["error"] == nil, "\(name) never paused: \(kinds)")
        }
    }
}
