import Foundation
import GRDB
import NotesDomain
import NotesStore
import SyncEngine
import SyncEventStore
import SyncModels
import SyncTestSupport
import Testing

/// Per-scope checksums against a real `sync-server` on PostgreSQL (docs/PROTOCOL.md, "Checksums"): the sums a
/// device keeps equal the server's however either side compacted, and a device whose file was damaged behind
/// the store's back finds the first bad range, pulls it again and ends equal to a fresh device. Serialized:
/// each case runs a server and several devices, and the whole suite shares two cores.
@Suite(.serialized) struct ChecksumTests {
    static let scope = "sums"

    struct Device {
        let client: NotesClient
        let engine: SyncEngine
        let path: String

        init(_ stack: Stack, _ name: String, token: String, pageSize: Int = 40, autoCompactAfter: Int? = 60) throws {
            path = stack.directory.appendingPathComponent("\(name).sqlite").path
            client = try NotesClient.open(path: path)
            var configuration = SyncEngine.Configuration()
            configuration.pageSize = pageSize
            configuration.minPageSize = min(pageSize, 100)
            configuration.autoCompactAfter = autoCompactAfter
            configuration.verifyInterval = nil
            engine = try SyncEngine(
                store: client.store, transport: HTTPTransport(baseURL: URL(string: stack.serverURL)!, token: token),
                configuration: configuration)
        }
    }

    /// Random edits on three devices, server folds, device prunes, folding on arrival and a device
    /// bootstrapped from the folded history: every device's sums equal the server's checksum at its cursor.
    @Test(arguments: [11, 12, 13] as [UInt64])
    func sumsEqualTheServersThroughFoldingPruningAndBootstrap(seed: UInt64) async throws {
        print("ChecksumTests seed \(seed)")
        var random = SplitMix64(seed: seed)
        let stack = try await Stack()
        let token = try await stack.token(scopes: [Self.scope])
        let devices = try (0..<3).map { try Device(stack, "device-\($0)", token: token) }
        var notes: [NoteID] = []
        for round in 0..<6 {
            for _ in 0..<40 {
                let device = devices[Int.random(in: 0..<devices.count, using: &random)]
                // An edit of a note this device has not seen yet (or has seen deleted) is refused: skipped.
                do {
                    switch Int.random(in: 0..<10, using: &random) {
                    case 0..<2 where notes.count < 30 || notes.isEmpty:
                        notes.append(try await device.client.create(scope: Scope(Self.scope), title: "n\(notes.count)"))
                    case 2..<5 where !notes.isEmpty:
                        try await device.client.setTitle(notes.randomElement(using: &random)!, "t\(round)")
                    case 5..<8 where !notes.isEmpty:
                        try await device.client.setBody(notes.randomElement(using: &random)!, "body \(round) \(seed)")
                    case 8 where !notes.isEmpty:
                        try await device.client.addTag(notes.randomElement(using: &random)!, "tag\(round % 3)")
                    case 9 where notes.count > 5:
                        let note = notes.remove(at: Int.random(in: 0..<notes.count, using: &random))
                        try await device.client.delete(note)
                    default:
                        continue
                    }
                } catch let error as EventStoreError where error.code == "note.unknown" {
                    continue
                }
            }
            for device in devices where Bool.random(using: &random) || round == 5 { try await device.engine.syncNow() }
            if round % 2 == 1 { _ = try await stack.compact() }
            if round == 3 {
                for device in devices { try await device.engine.syncNow() }
                _ = try await devices[0].engine.compact()
            }
        }
        for device in devices { try await device.engine.syncNow() }
        _ = try await stack.compact()
        for device in devices { try await device.engine.syncNow() }
        // A new device pulls the folded history; a low `autoCompactAfter` makes it fold on arrival.
        let fresh = try Device(stack, "fresh", token: token, pageSize: 25, autoCompactAfter: 20)
        try await fresh.engine.syncNow()
        for device in devices + [fresh] {
            let results = try await device.engine.verify(repair: false, deep: true)
            #expect(results.map(\.outcome) == [.matched], "seed \(seed) \(device.path): \(results)")
        }
        let states = try await (devices + [fresh]).asyncMap { try await $0.client.exportState() }
        #expect(Set(states).count == 1, "every device shows the same notes")
    }

    /// A device's file damaged behind the store's back, one way at a time: `verify` finds the range, pulls it
    /// again, and the device ends equal to a fresh one; a pending event survives the repair.
    @Test(arguments: ["delete a confirmed row", "alter a payload", "reset the sums", "drop a projection row"])
    func aDamagedDeviceRepairsTheBadRangeAndEndsEqualToAFreshOne(damage: String) async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: [Self.scope])
        let writer = try Device(stack, "writer", token: token, autoCompactAfter: nil)
        var notes: [NoteID] = []
        for index in 0..<120 {
            notes.append(try await writer.client.create(scope: Scope(Self.scope), title: "note \(index)"))
            try await writer.client.setBody(notes[index], "body of \(index)")
        }
        try await writer.engine.syncNow()
        let device = try Device(stack, "device", token: token, autoCompactAfter: nil)
        try await device.engine.syncNow()
        #expect(try await device.engine.verify(repair: false).map(\.outcome) == [.matched])
        try await device.engine.store.database.writer.write { db in
            switch damage {
            case "delete a confirmed row":
                try db.execute(sql: "DELETE FROM events WHERE scope = ? AND seq = 150", arguments: [Self.scope])
            case "alter a payload":
                try db.execute(
                    sql: """
                        UPDATE events SET payload = CAST(replace(CAST(payload AS TEXT), 'note 70', 'note 7O') AS BLOB)
                        WHERE scope = ? AND type = 'note.created' AND CAST(payload AS TEXT) LIKE '%note 70"%'
                        """, arguments: [Self.scope])
            case "drop a projection row":
                try db.execute(sql: "DELETE FROM notes WHERE rowid = (SELECT min(rowid) FROM notes)")
            default:
                try db.execute(sql: "UPDATE scope_checksums SET applied = 0, held = 0")
            }
            #expect(db.changesCount >= 1, "the damage was done")
        }
        // A local edit waiting in the outbox while the repair runs.
        try await device.client.setTitle(notes[3], "offline edit")
        let results = try await device.engine.verify(repair: false, deep: true)
        #expect(results.map(\.outcome) == [.mismatched], "\(results)")
        let repaired = try await device.engine.verify(deep: true)
        #expect(repaired.map(\.outcome) == [.repaired], "\(repaired)")
        if damage == "delete a confirmed row" || damage == "alter a payload" {
            #expect(repaired[0].repairs.count == 1, "one bad range: \(repaired)")
            #expect(repaired[0].downloaded <= 1_000, "only the bad range was pulled again")
        }
        #expect(try await device.engine.verify(repair: false, deep: true).map(\.outcome) == [.matched])
        #expect(try await device.client.note(notes[3])?.title == "offline edit", "the pending edit survived")
        try await device.engine.syncNow()
        try await writer.engine.syncNow()
        let fresh = try Device(stack, "fresh", token: token, autoCompactAfter: nil)
        try await fresh.engine.syncNow()
        #expect(try await device.client.exportState() == fresh.client.exportState())
        #expect(try await device.client.note(notes[70])?.title == "note 70")
    }
}

extension ChecksumTests {
    /// `sync-agent verify` syncs, verifies deep and prints each scope's outcome as JSON; a row deleted behind
    /// the agent's back is repaired by the next run, and `--no-repair` reports a mismatch with exit code 1.
    @Test func syncAgentVerifyReportsAndRepairs() async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: [Self.scope])
        let agent = stack.agent("verifier", token: token)
        for index in 0..<5 { try await agent("note", "create", "--scope", Self.scope, "--title", "note \(index)") }
        try await agent("sync")
        let clean = try await JSONDecoder().decode([ScopeVerification].self, from: Data(try agent("verify").utf8))
        #expect(clean.map(\.outcome) == [.matched])
        let queue = try DatabaseQueue(path: agent.database)
        try await queue.write { db in try db.execute(sql: "DELETE FROM events WHERE seq = 3") }
        try queue.close()
        let refused = try await agent.capturing(["verify", "--no-repair"])
        #expect(refused.status == 1)
        let found = try JSONDecoder().decode([ScopeVerification].self, from: Data(refused.stdout.utf8))
        #expect(found.map(\.outcome) == [.mismatched])
        let repaired = try await JSONDecoder().decode([ScopeVerification].self, from: Data(try agent("verify").utf8))
        #expect(repaired.map(\.outcome) == [.repaired] && repaired[0].downloaded >= 1)
    }

    /// A server upgraded from before checksums: its devices cannot verify the scopes that held events then
    /// (`unavailable`) until `sync-server backfill-checksums` gives those events their checksums; then they
    /// verify whole, and a device bootstrapped afterwards too.
    @Test func devicesOfAServerUpgradedFromBeforeChecksumsVerifyOnceItIsBackfilled() async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: [Self.scope])
        let agent = stack.agent("upgraded", token: token)
        for index in 0..<5 { try await agent("note", "create", "--scope", Self.scope, "--title", "note \(index)") }
        try await agent("sync")
        // The database as migration 0008-checksums leaves one whose events came before it.
        _ = try await stack.sql(
            "UPDATE events SET checksum = NULL; UPDATE scopes SET checksum = 0, checksum_from = head")
        let before = try await agent.capturing(["verify", "--no-repair"])
        let unverified = try JSONDecoder().decode([ScopeVerification].self, from: Data(before.stdout.utf8))
        #expect(unverified.map(\.outcome) == [.unavailable], "\(before.stderr)")

        struct Report: Decodable {
            struct Scope: Decodable {
                var scope: String
                var events: Int
                var checksumFrom: Int64
            }
            var scopes: [Scope]
        }
        let output = try await Stack.run(
            Stack.productsDirectory.appendingPathComponent("sync-server").path, ["backfill-checksums", "--batch", "2"],
            environment: ["SYNC_DATABASE_URL": stack.databaseURL, "SYNC_LOG_LEVEL": "error"])
        let report = try JSONDecoder().decode(Report.self, from: Data(output.utf8))
        #expect(report.scopes.map(\.scope) == [Self.scope])
        #expect(report.scopes.first?.events == 5 && report.scopes.first?.checksumFrom == 0, "\(output)")

        let after = try await JSONDecoder().decode([ScopeVerification].self, from: Data(try agent("verify").utf8))
        #expect(after.map(\.outcome) == [.matched])
        let fresh = stack.agent("fresh", token: token)
        try await fresh("sync")
        let bootstrapped = try await JSONDecoder().decode(
            [ScopeVerification].self, from: Data(try fresh("verify").utf8))
        #expect(bootstrapped.map(\.outcome) == [.matched])
    }

    /// A row cannot be duplicated in the log: its event id and its seq are each unique in the scope, so
    /// the copy is refused and nothing is there for a verification to find.
    @Test func theLogRefusesADuplicatedRow() async throws {
        let directory = try TemporaryDirectory()
        let client = try NotesClient.open(path: directory.path("device.sqlite"))
        _ = try await client.create(scope: Scope(Self.scope), title: "one")
        try await client.store.database.writer.write { db in
            try db.execute(sql: "UPDATE events SET status = 'confirmed', seq = 1")
        }
        let copy = """
            INSERT INTO events (event_id, scope, stream, stream_version, type, schema_version, payload, hlc,
                dot_replica, dot_counter, status, seq, checksum)
            SELECT event_id, scope, stream, stream_version, type, schema_version, payload, hlc, dot_replica,
                dot_counter, status, seq, checksum FROM events
            """
        await #expect(throws: DatabaseError.self) {
            try await client.store.database.writer.write { db in try db.execute(sql: copy) }
        }
        let renamed = copy.replacingOccurrences(of: "SELECT event_id,", with: "SELECT lower(hex(randomblob(16))),")
        await #expect(throws: DatabaseError.self, "the same seq under another id") {
            try await client.store.database.writer.write { db in try db.execute(sql: renamed) }
        }
    }
}

extension Sequence {
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var values: [T] = []
        for element in self { values.append(try await transform(element)) }
        return values
    }
}
