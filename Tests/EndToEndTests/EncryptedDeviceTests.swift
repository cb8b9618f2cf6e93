import Foundation
import Testing

/// A device encrypted at rest (issue 47), through `sync-agent` and a real server: nothing readable in any
/// file it writes, even killed in the middle of a write; `encrypt` and `rekey` killed at every step leave a
/// whole replica; `logout` pushes first, shreds, and a new login converges.
@Suite struct EncryptedDeviceTests {
    static let title = "Merger plan for Northwind Traders"
    static let body = "Offer 41.5 million, walk away above 44"

    /// The files of `agent`'s replica: the database, its WAL, shared memory and journals, and anything else
    /// named after it, blobs included.
    static func files(of agent: Agent) throws -> [String: Data] {
        let url = URL(fileURLWithPath: agent.database)
        let directory = url.deletingLastPathComponent()
        var files: [String: Data] = [:]
        let names = try FileManager.default.subpathsOfDirectory(atPath: directory.path)
        for name in names where name.hasPrefix(url.lastPathComponent) {
            var isDirectory: ObjCBool = false
            let path = directory.appendingPathComponent(name).path
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue {
                files[name] = try Data(contentsOf: URL(fileURLWithPath: path))
            }
        }
        return files
    }

    static func readable(_ files: [String: Data], secrets: [String]) -> [String] {
        var found: [String] = []
        for (name, bytes) in files {
            for secret in secrets where bytes.range(of: Data(secret.utf8)) != nil { found.append("\(name): \(secret)") }
            if bytes.starts(with: Data("SQLite format 3".utf8)) { found.append("\(name): SQLite header") }
        }
        return found
    }

    @Test func aDeviceKilledInTheMiddleOfWritingLeavesNothingReadable() async throws {
        let stack = try await Stack()
        var a = stack.agent("secret", token: try await stack.token(sub: "s", scopes: ["enc-1"]))
        a.keyFile = stack.directory.appendingPathComponent("secret.key").path
        for index in 0..<20 {
            try await a("note", "create", "--scope", "enc-1", "--title", "\(Self.title) \(index)", "--body", Self.body)
        }
        try await a("sync")
        // A user editing and syncing, killed without warning.
        let running = try a.start(["run", "--simulate", "50", "--scope", "enc-1"])
        // Once it has its database open and is writing (a loaded machine may take seconds to get there).
        let wal = a.database + "-wal"
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline
            && ((try? FileManager.default.attributesOfItem(atPath: wal)[.size] as? Int) ?? 0) == 0
        {
            try await Task.sleep(for: .milliseconds(100))
        }
        try await Task.sleep(for: .seconds(2))
        kill(running.processIdentifier, SIGKILL)
        await running.exited()
        let files = try Self.files(of: a)
        #expect(files.keys.contains("secret.sqlite-wal"), "killed with a WAL: \(files.keys.sorted())")
        #expect(Self.readable(files, secrets: [Self.title, Self.body, a.token]) == [])
        // It opens again with all of it.
        let state = try await a.state()
        #expect(state.values.filter { $0.title.hasPrefix(Self.title) }.count == 20)
        // Support's export says the file is encrypted, and holds none of it.
        let export = URL(fileURLWithPath: a.database + ".diagnostics.json")
        try await a("diagnostics", "--out", export.path)
        let diagnostics = try String(contentsOf: export, encoding: .utf8)
        #expect(diagnostics.contains("\"encrypted\" : true") && !diagnostics.contains(Self.title))
        try FileManager.default.removeItem(at: export)
        // Without the key: nothing.
        var keyless = a
        keyless.keyFile = nil
        let refused = try await keyless.capturing(["status"])
        #expect(refused.status != 0)
    }

    @Test func encryptKilledAtEveryStepLeavesAWholeReplica() async throws {
        let stack = try await Stack()
        let token = try await stack.token(sub: "s", scopes: ["enc-2"])
        for step in ["checkpointed", "copyWritten", "copySynced", "renamed"] {
            var a = stack.agent("plain-\(step)", token: token)
            for index in 0..<30 {
                try await a("note", "create", "--scope", "enc-2", "--title", "\(Self.title) \(index)")
            }
            let before = try await a.state()
            a.keyFile = stack.directory.appendingPathComponent("plain-\(step).key").path
            let killed = try await a.capturing(["encrypt", "--crash-at", step])
            #expect(killed.status != 0, "killed at \(step)")
            #expect(try await a.state() == before, "after a kill at \(step)")
            #expect(Self.readable(try Self.files(of: a), secrets: [Self.title]) == [], "encrypted after \(step)")
        }
    }

    @Test func rekeyKilledAtEveryStepLeavesAWholeReplica() async throws {
        let stack = try await Stack()
        let token = try await stack.token(sub: "s", scopes: ["enc-3"])
        for step in ["nextKeyStored", "checkpointed", "copyWritten", "copySynced", "renamed", "keyCommitted"] {
            var a = stack.agent("rekey-\(step)", token: token)
            a.keyFile = stack.directory.appendingPathComponent("rekey-\(step).key").path
            for index in 0..<30 {
                try await a("note", "create", "--scope", "enc-3", "--title", "\(Self.title) \(index)")
            }
            let before = try await a.state()
            let killed = try await a.capturing(["rekey", "--crash-at", step])
            #expect(killed.status != 0, "killed at \(step)")
            #expect(try await a.state() == before, "after a kill at \(step)")
            let keys = try String(contentsOfFile: a.keyFile!, encoding: .utf8)
            #expect(keys.hasPrefix("current ") && !keys.contains("next "), "one key after reopening: \(step)")
        }
    }

    @Test func logoutPushesFirstShredsAndANewLoginConverges() async throws {
        let stack = try await Stack()
        var a = stack.agent("leaving", token: try await stack.token(sub: "a", scopes: ["enc-4"]))
        a.keyFile = stack.directory.appendingPathComponent("leaving.key").path
        var b = stack.agent("staying", token: try await stack.token(sub: "b", scopes: ["enc-4"]))
        b.keyFile = stack.directory.appendingPathComponent("staying.key").path
        try await a("note", "create", "--scope", "enc-4", "--title", Self.title)
        try await a("sync")
        try await a("note", "create", "--scope", "enc-4", "--title", "written offline, pushed by logout")
        let out = try await a("logout")
        #expect(out.contains("\"discarded\":0"), "\(out)")
        #expect(try Self.files(of: a).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: a.keyFile!))
        // Pending edits with no server to push them to: refused until their count is confirmed.
        var offline = stack.agent("offline", token: a.token)
        offline.keyFile = stack.directory.appendingPathComponent("offline.key").path
        try await offline("note", "create", "--scope", "enc-4", "--title", "never pushed")
        let refused = try await Stack.runCapturing(
            offline.executable.path, ["logout", "--db", offline.database, "--key-file", offline.keyFile!])
        #expect(refused.status != 0 && refused.stderr.contains("--discard-pending 1"), "\(refused.stderr)")
        #expect(FileManager.default.fileExists(atPath: offline.database))
        // The next login on the same device is a new replica that bootstraps.
        try await a("sync")
        try await b("sync")
        let state = try await a.state()
        let other = try await b.state()
        #expect(state.count == 2 && state == other)
        #expect(try await a.status().pending == 0)
    }
}
