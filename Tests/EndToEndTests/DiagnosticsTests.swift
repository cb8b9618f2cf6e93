import Foundation
import SyncEngine
import SyncModels
import Testing

/// `sync-agent diagnostics --out FILE`: what support needs, and none of the user's content.
@Suite struct DiagnosticsTests {
    @Test func theFileHoldsTheJournalCountsSchemaAndVersionsAndNoUserContent() async throws {
        let stack = try await Stack()
        let scope = "acme-payroll-7c1"
        let token = try await stack.token(sub: "dana.whitfield", scopes: [scope])
        let a = stack.agent("a", token: token)
        let title = "Salary review Whitfield 4471"
        let body = "bank account 9921-0044 at Quokka Savings"
        let item = "call the Zanzibar notary"
        let fileName = "passport-scan-5512.pdf"
        let note = try await a("note", "create", "--scope", scope, "--title", title, "--body", body, "--tag", "hr-only")
        try await a("note", "checklist", note, "add", item)
        let file = stack.directory.appendingPathComponent(fileName)
        try Data("the scanned passport of Dana Whitfield".utf8).write(to: file)
        try await a("note", "attach", note, file.path)
        try await a("sync")
        // A verification journals each scope by name: the file must show it by its digest only.
        _ = try await a("verify")
        let offlineTitle = "Offline draft Pangolin 3318"
        try await a("note", "create", "--scope", scope, "--title", offlineTitle)

        let out = stack.directory.appendingPathComponent("diagnostics.json")
        try await a("diagnostics", "--out", out.path)
        let data = try Data(contentsOf: out)
        let text = String(decoding: data, as: UTF8.self)

        // None of the user's content, wherever it might hide: titles, body, checklist, tag, file name and
        // content, the token and each of its parts, its subject, the scope's name.
        let secrets =
            [
                title, body, item, "hr-only", fileName, "passport-scan", "Dana Whitfield", offlineTitle, token,
                "dana.whitfield", scope,
            ] + token.split(separator: ".").map(String.init)
        for secret in secrets { #expect(!text.contains(secret), "the diagnostics contain \(secret)") }

        // What support needs.
        let diagnostics = try SyncDiagnostics.decode(data)
        let digest = SyncDiagnostics.scopeDigest(scope)
        #expect(diagnostics.software.app == "sync-agent" && !diagnostics.software.appVersion.isEmpty)
        #expect(diagnostics.software.sqlite.hasPrefix("3."), "\(diagnostics.software)")
        #expect(diagnostics.scopes.map(\.scope) == [digest])
        #expect(diagnostics.scopes.first?.pending == 1, "the offline note is pending: \(diagnostics.scopes)")
        #expect((diagnostics.scopes.first?.confirmed ?? 0) >= 3, "\(diagnostics.scopes)")
        #expect(diagnostics.events.contains { $0.status == "pending" && $0.count == 1 }, "\(diagnostics.events)")
        #expect(Array(diagnostics.cursor.keys) == [digest], "\(diagnostics.cursor)")
        let kinds = Set(diagnostics.journal.map(\.kind))
        #expect(kinds.isSuperset(of: ["push.ok", "verify", "blob.upload"]), "\(kinds.sorted())")
        #expect(
            diagnostics.journal.contains { $0.kind == "verify" && $0.detail.contains(digest) },
            "\(diagnostics.journal.filter { $0.kind == "verify" })")
        let events = try #require(diagnostics.schema.first { $0.type == "table" && $0.name == "events" })
        #expect(events.sql.hasPrefix("CREATE TABLE") && (events.rows ?? 0) >= 4, "\(events)")
        #expect(
            diagnostics.schema.contains { $0.type == "index" } && diagnostics.schema.contains { $0.type == "trigger" })
        #expect(diagnostics.storage.pageCount > 0 && diagnostics.metadataKeys.contains("cursor"))
        #expect((diagnostics.blobBytes ?? 0) > 0, "the attachment's bytes in the cache")

        // The journal on the command line (`sync-agent log`), filtered.
        let whole = try await a("log", "--limit", "10000")
        // The device's own journal may name its scopes; nothing the user wrote, nor the token.
        for secret in secrets where secret != scope {
            #expect(!whole.contains(secret), "the journal contains \(secret)")
        }
        let pushes = try await a("log", "--kind", "push").split(separator: "\n")
        #expect(!pushes.isEmpty && pushes.allSatisfy { $0.contains("  push.") }, "\(pushes)")
        let lines = try await a("log", "--json", "--since", "1h", "--limit", "3").split(separator: "\n")
        #expect(lines.count == 3, "\(lines)")
        let newest = try CanonicalJSON.decode(SyncJournal.Entry.self, from: Data(try #require(lines.last).utf8))
        #expect(newest.kind == diagnostics.journal.last?.kind && newest.at == diagnostics.journal.last?.at)
        #expect(try await a("log", "--since", "2000-01-01T00:00:00Z", "--kind", "no.such.kind").isEmpty)
        #expect(try await a("log", "--since", "1d").split(separator: "\n").count == min(100, diagnostics.journal.count))
    }
}
