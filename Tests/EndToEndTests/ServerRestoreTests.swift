import Foundation
import SyncEngine
import Testing

/// A server whose database is restored from a backup (`pg_dump`, then `pg_restore` with the server stopped)
/// lost what came after the backup, and the devices that synced past it hold the only copies. A device
/// whose cursor is ahead of the server's history gets 410 `reset.required`; before it resets, its copies of
/// the events the server lost become pending again, so the reset keeps them and its next push gives them
/// back. Every device then has every note, the server each event once.
@Suite(.serialized) struct ServerRestoreTests {
    static let scope = "restored"

    /// `pg_dump` of the stack's database; the dump's path.
    static func backUp(_ stack: Stack) async throws -> String {
        let backup = stack.directory.appendingPathComponent("backup.dump").path
        try await Stack.run("/usr/bin/env", ["pg_dump", "--format=custom", "--file", backup, stack.databaseURL])
        return backup
    }

    /// The database restored from `backup` with the server stopped, then the server started again.
    static func restore(_ stack: Stack, from backup: String) async throws {
        await stack.killServer()
        try await Stack.run(
            "/usr/bin/env",
            ["pg_restore", "--clean", "--if-exists", "--single-transaction", "--dbname", stack.databaseURL, backup])
        try await stack.startServer()
    }

    @Test func devicesGiveBackWhatARestoredServerLost() async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: [Self.scope])
        let a = stack.agent("a", token: token)
        let b = stack.agent("b", token: token)
        for index in 0..<3 { try await a("note", "create", "--scope", Self.scope, "--title", "before \(index)") }
        try await a("sync")
        let backup = try await Self.backUp(stack)
        let backedUp = try await stack.sql("SELECT count(*) FROM events")

        // After the backup: a note from each device, a retitle of an older one, and both devices have it all.
        try await a("note", "create", "--scope", Self.scope, "--title", "after a")
        try await a("sync")
        try await b("sync")
        try await b("note", "create", "--scope", Self.scope, "--title", "after b")
        let older = try #require(try await b.state().first { $0.value.title == "before 1" }?.key)
        try await b("note", "set-title", older, "before 1, renamed")
        try await b("sync")
        try await a("sync")
        let titles: Set = ["before 0", "before 1, renamed", "before 2", "after a", "after b"]
        #expect(Set(try await a.state().values.map(\.title)) == titles)
        let events = try await stack.sql("SELECT count(*) FROM events")

        try await Self.restore(stack, from: backup)
        #expect(
            try await stack.sql("SELECT count(*) FROM events") == backedUp, "the server lost what came after the backup"
        )

        // Each device syncs; the first gives back all it had, the second finds it given back already.
        try await b("sync")
        try await a("sync")
        try await b("sync")
        let fresh = stack.agent("fresh", token: token)
        try await fresh("sync")
        for device in [a, b, fresh] {
            #expect(Set(try await device.state().values.map(\.title)) == titles, "\(device.database)")
            #expect(try await device.status().pending == 0)
            let verified = try await JSONDecoder().decode(
                [ScopeVerification].self, from: Data(try device("verify").utf8))
            #expect(verified.map(\.outcome) == [.matched], "\(device.database)")
        }
        #expect(try await stack.sql("SELECT count(*) FROM events") == events, "every event is on the server again")
        #expect(
            try await stack.sql("SELECT count(*) - count(DISTINCT event_id) FROM events") == ["0"], "and each once")
    }

    /// Other devices push after the restore before the device that alone holds a lost event syncs again: the
    /// server's head passes its cursor, so no 410 comes, and another device's event now has the lost one's
    /// seq. Its verification finds the range that differs, takes the server's event and makes its own
    /// pending again, and its next push gives it back.
    @Test func aDeviceBehindTheNewHeadFindsTheLossByVerifyingAndGivesItBack() async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: [Self.scope])
        let a = stack.agent("a", token: token)
        let c = stack.agent("c", token: token)
        for index in 0..<3 { try await a("note", "create", "--scope", Self.scope, "--title", "before \(index)") }
        try await a("sync")
        try await c("sync")
        let backup = try await Self.backUp(stack)
        try await c("note", "create", "--scope", Self.scope, "--title", "only on c")
        try await c("sync")

        try await Self.restore(stack, from: backup)
        // After the restore, a takes the lost event's seq and more.
        for index in 0..<2 { try await a("note", "create", "--scope", Self.scope, "--title", "after \(index)") }
        try await a("sync")
        try await c("sync")
        let titles: Set = ["before 0", "before 1", "before 2", "only on c", "after 0", "after 1"]
        #expect(Set(try await c.state().values.map(\.title)) != titles, "c missed the event at its old seq")

        let repaired = try await JSONDecoder().decode([ScopeVerification].self, from: Data(try c("verify").utf8))
        #expect(repaired.map(\.outcome) == [.repaired])
        #expect(repaired.first?.repairs.reduce(0) { $0 + $1.repended } == 1, "\(repaired)")
        try await c("sync")
        try await a("sync")
        let fresh = stack.agent("fresh", token: token)
        try await fresh("sync")
        for device in [a, c, fresh] {
            #expect(Set(try await device.state().values.map(\.title)) == titles, "\(device.database)")
            let verified = try await JSONDecoder().decode(
                [ScopeVerification].self, from: Data(try device("verify").utf8))
            #expect(verified.map(\.outcome) == [.matched], "\(device.database)")
        }
        #expect(
            try await stack.sql("SELECT count(*) - count(DISTINCT event_id) FROM events") == ["0"], "each event once")
    }
}
