import Foundation
import Testing

/// Titles written on two offline devices: after sync both show the same winner and the same open conflict
/// (`sync-agent conflicts`), a resolution (`sync-agent note resolve`) closes it everywhere, and devices that
/// bootstrap later, from the log or from the server's folded history (`note.snapshot`), agree.
@Suite(.serialized) struct ConflictEndToEndTests {
    struct ConflictJSON: Decodable, Equatable {
        struct Value: Decodable, Equatable {
            var value: String
            var replica: String
            var hlc: String
        }
        var note: String
        var field: String
        var values: [Value]
        var winner: Value
    }

    func conflicts(_ agent: Agent) async throws -> [ConflictJSON] {
        try await JSONDecoder().decode([ConflictJSON].self, from: Data(try agent("conflicts", "--json").utf8))
    }

    @Test func concurrentTitlesAreKeptResolvedAndAgreedOnByLateDevices() async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        let b = stack.agent("b", token: token)
        let note = try await a("note", "create", "--scope", "team-1", "--title", "Groceries")
        try await a("sync")
        try await b("sync")
        #expect(try await a("conflicts") == "no open conflicts")

        // Both offline: each retitles the note without seeing the other.
        try await a("note", "set-title", note, "Groceries (Sat)")
        try await b("note", "set-title", note, "Party shopping")
        try await a("sync")
        try await b("sync")
        try await a("sync")
        for agent in [a, b] {
            // Journaled by the engine that pulled the other title, and counted.
            let status = try await agent.status()
            #expect(status.openConflicts == 1)
            #expect(status.journal.contains { $0.kind == "conflict.open" && $0.detail == "note:\(note)" })
        }
        try await b("sync")  // acknowledges what the last syncs brought: everything is stable
        try await a("sync")

        let open = try await conflicts(a)
        #expect(try await conflicts(b) == open, "both devices show the same conflict")
        let conflict = try #require(open.first)
        #expect(open.count == 1 && conflict.note == note && conflict.field == "title")
        #expect(Set(conflict.values.map(\.value)) == ["Groceries (Sat)", "Party shopping"])
        #expect(conflict.winner == conflict.values.first)
        #expect(try await a.state()[note]?.title == conflict.winner.value)
        #expect(try await a("export", "--state") == b("export", "--state"))
        let table = try await b("conflicts")
        #expect(table.hasPrefix("NOTE"), "\(table)")
        #expect(table.contains("\"Groceries (Sat)\"") && table.contains("\"Party shopping\"") && table.contains(note))
        // A header and one line per value, the values in one column, the shown one marked.
        let lines = table.split(separator: "\n").map(String.init)
        func column(_ text: String, _ line: String) -> Int? {
            line.range(of: text).map { line.distance(from: line.startIndex, to: $0.lowerBound) }
        }
        #expect(lines.count == 3, "\(table)")
        if lines.count == 3 {
            #expect(column("\"", lines[1]) == column("VALUE", lines[0]))
            #expect(column("\"", lines[2]) == column("VALUE", lines[0]))
            #expect(lines[1].hasPrefix(note) && lines[1].contains("*") && lines[2].hasPrefix(" "))
            #expect(lines[1].contains("\"\(conflict.winner.value)\""))
        }

        // The server folds the note, conflict included, into a snapshot; a new device bootstraps from it.
        _ = try await stack.compact()
        #expect(try await stack.sql("SELECT count(*) FROM events") == ["0"], "the history is folded")
        #expect(try await stack.sql("SELECT count(*) FROM folded_events WHERE type = 'note.snapshot'") == ["1"])
        let c = stack.agent("c", token: token)
        try await c("sync")
        #expect(try await conflicts(c) == open, "a device bootstrapped from the snapshot shows the same conflict")
        #expect(try await c("export", "--state") == a("export", "--state"))

        // One device resolves; every device converges with no conflict.
        let resolution = try await b.capturing(["note", "resolve", note, "--title", "Groceries for the party"])
        #expect(resolution.status == 0, "\(resolution.stderr)")
        try await b("sync")
        try await a("sync")
        try await c("sync")
        for agent in [a, b, c] {
            #expect(try await conflicts(agent).isEmpty)
            #expect(try await agent.state()[note]?.title == "Groceries for the party")
            #expect(try await agent.status().openConflicts == 0)
        }
        for agent in [a, c] {
            let journal = try await agent.status().journal
            #expect(journal.contains { $0.kind == "conflict.resolved" && $0.detail == "note:\(note)" })
        }
        let resolvedAgain = try await a.capturing(["note", "resolve", note, "--title", "again"])
        #expect(resolvedAgain.status != 0, "nothing left to resolve")
        #expect(try await a("conflicts") == "no open conflicts")

        // A device bootstrapped after the resolution, from the log and from the folded history, agrees.
        let d = stack.agent("d", token: token)
        try await d("sync")
        #expect(try await d("export", "--state") == a("export", "--state"))
        for agent in [a, b, c] { try await agent("sync") }
        for agent in [a, b, c, d] { try await agent("sync") }
        _ = try await stack.compact()
        let e = stack.agent("e", token: token)
        try await e("sync")
        #expect(try await conflicts(e).isEmpty)
        #expect(try await e("export", "--state") == a("export", "--state"))
        #expect(try await e.state()[note]?.title == "Groceries for the party")
    }
}
