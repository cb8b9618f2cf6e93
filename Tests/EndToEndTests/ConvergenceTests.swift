import Foundation
import GRDB
import SyncTestSupport
import Testing

/// Real processes: PostgreSQL, `sync-server`, `sync-agent`s, on loopback. Serialized: each test starts its
/// own server, and two cores do not stretch further.
@Suite(.serialized) struct EndToEndTests {
    @Test func concurrentOfflineEditsConvergeWithTheDomainSemantics() async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        let b = stack.agent("b", token: token)

        let note = try await a(
            "note", "create", "--scope", "team-1", "--title", "Groceries", "--body", "milk", "--tag", "food")
        let first = try await a("note", "checklist", note, "add", "eggs")
        try await a("note", "view", note)
        try await a("sync")
        try await b("sync")
        #expect(try await b.state()[note]?.title == "Groceries")

        // Both offline now: concurrent edits of the same note.
        try await a("note", "set-title", note, "Groceries (A)")
        try await b("note", "set-title", note, "Groceries (B)")
        try await a("note", "tag", note, "remove", "food")
        try await b("note", "tag", note, "add", "food")  // concurrent re-add: add wins
        try await b("note", "tag", note, "add", "weekly")
        try await a("note", "checklist", note, "add", "bread", "--after", first)
        try await b("note", "checklist", note, "add", "butter", "--after", first)
        for _ in 0..<2 { try await a("note", "view", note) }
        for _ in 0..<3 { try await b("note", "view", note) }
        try await a("note", "pin", note, "true")

        try await a("sync")
        try await b("sync")
        try await a("sync")
        let exportA = try await a("export", "--state")
        let exportB = try await b("export", "--state")
        #expect(exportA == exportB, "converged replicas print identical bytes")

        let merged = try #require(try await a.state()[note])
        #expect(["Groceries (A)", "Groceries (B)"].contains(merged.title), "one title wins on both, by HLC")
        #expect(merged.tags == ["food", "weekly"], "add-wins: the concurrent re-add of food survives the remove")
        #expect(merged.viewCount == 1 + 2 + 3, "every view on every device counts")
        #expect(merged.pinned)
        #expect(merged.body == "milk")
        let texts = merged.checklist.map(\.text)
        #expect(texts.first == "eggs" && Set(texts.dropFirst()) == ["bread", "butter"] && texts.count == 3)
    }

    @Test func aNoteCreatedPastTheQuotaIsRejectedRolledBackAndShown() async throws {
        let stack = try await Stack(noteQuota: 2)
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        let b = stack.agent("b", token: token)
        _ = try await a("note", "create", "--scope", "team-1", "--title", "one")
        try await a("sync")
        // Offline, each creates the note that reaches the quota; A arrives first.
        let second = try await a("note", "create", "--scope", "team-1", "--title", "two (A)")
        let third = try await b("note", "create", "--scope", "team-1", "--title", "two (B)")
        #expect(try await b.state()[third] != nil, "B sees its note at once, offline")
        try await a("sync")
        try await b("sync")
        #expect(try await b.state()[third] == nil, "B's note was rolled back")
        #expect(try await b.state()[second]?.title == "two (A)")
        let status = try await b.status()
        #expect(status.pending == 0)
        #expect(status.rejected.count == 1 && status.rejected.first?.code == "validation.failed")
        #expect(status.rejected.first?.message.contains("notes") == true)
        try await a("sync")
        #expect(try await a("export", "--state") == b("export", "--state"))
    }

    @Test func killingTheAgentMidSyncLosesAndDuplicatesNothing() async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        var notes: [String] = []
        for index in 0..<40 {
            await notes.append(
                try a(
                    "note", "create", "--scope", "team-1", "--title", "note \(index)", "--body",
                    String(repeating: "x", count: 2000)))
        }
        for round in 0..<3 {
            let syncing = try a.start(["sync"])
            try await Task.sleep(for: .milliseconds(20 + 40 * round))
            kill(syncing.processIdentifier, SIGKILL)
            await syncing.exited()
        }
        try await a("sync")
        #expect(try await a.status().pending == 0)
        let counts = try await stack.sql("SELECT count(*) || ' ' || count(DISTINCT event_id) FROM events")
        let eventCount = try #require(Int(counts.first?.split(separator: " ").first ?? ""))
        #expect(counts.first == "\(eventCount) \(eventCount)", "no event stored twice")
        let b = stack.agent("b", token: token)
        try await b("sync")
        #expect(try await b.state().keys.sorted() == notes.sorted())
        #expect(try await a("export", "--state") == b("export", "--state"))
    }

    @Test func killingTheServerMidPushLosesAndDuplicatesNothing() async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        for index in 0..<40 {
            _ = try await a(
                "note", "create", "--scope", "team-1", "--title", "n\(index)", "--body",
                String(repeating: "y", count: 3000))
        }
        let syncing = try a.start(["sync"])
        try await Task.sleep(for: .milliseconds(30))
        await stack.killServer()
        await syncing.exited()
        try await stack.startServer()
        try await a("sync")
        #expect(try await a.status().pending == 0)
        let rows = try await stack.sql(
            "SELECT count(*) || ' ' || count(DISTINCT event_id) || ' ' || max(seq) FROM events")
        let parts = rows.first?.split(separator: " ").map(String.init) ?? []
        #expect(
            parts.count == 3 && parts[0] == parts[1] && parts[0] == parts[2], "each event once, seq gap-free: \(rows)")
        let b = stack.agent("b", token: token)
        try await b("sync")
        #expect(try await a("export", "--state") == b("export", "--state"))
    }

    @Test func compactingFoldsOnlyWhatEveryReplicaAcknowledgedAndChangesNoState() async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        let b = stack.agent("b", token: token)
        var notes: [String] = []
        for index in 0..<10 {
            let note = try await a("note", "create", "--scope", "team-1", "--title", "note \(index)")
            notes.append(note)
            for round in 0..<3 { try await a("note", "set-title", note, "note \(index) v\(round)") }
        }
        struct Report: Decodable {
            var foldedEvents: Int
            var stablePoints: [String: Int64]
        }
        func compact(_ agent: Agent) async throws -> Report {
            // The server reads a scope's stable point at most once a second (SYNC_STABLE_POINT_REFRESH_MS).
            try await Task.sleep(for: .milliseconds(1100))
            return try await JSONDecoder().decode(Report.self, from: Data(try agent("compact").utf8))
        }
        try await a("sync")
        try await b("sync")
        // A replica acknowledges a page when it next asks from past it: b has not yet, so nothing is stable.
        let early = try await compact(a)
        #expect(early.stablePoints["team-1"] == 0 && early.foldedEvents == 0)
        try await b("sync")
        let folded = try await compact(a)
        #expect(folded.stablePoints["team-1"] == 40, "both replicas now said they hold all 40 events")
        #expect(folded.foldedEvents == 40)
        #expect(try await a("export", "--state") == b("export", "--state"), "compaction changed no state")
        // Edits on both sides still converge on top of the folded history.
        try await b("note", "set-title", notes[0], "edited offline by b")
        try await a("note", "set-title", notes[1], "after compaction")
        try await a("sync")
        try await b("sync")
        try await a("sync")
        #expect(try await a("export", "--state") == b("export", "--state"))
        #expect(try await a.state()[notes[0]]?.title == "edited offline by b")
        #expect(try await b.state()[notes[1]]?.title == "after compaction")
        #expect(try await a.status().lastCompaction != nil)
    }

    /// The server's compaction, `kill -9`ed half-way and run again: every note becomes one snapshot, a fresh
    /// device bootstraps from them to the same state, and edits made while it ran converge on top.
    @Test func serverCompactionKilledMidwayLosesNothingAndAFreshDeviceBootstrapsFromSnapshots() async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        let b = stack.agent("b", token: token)
        var notes: [String] = []
        for index in 0..<8 {
            let note = try await a(
                "note", "create", "--scope", "team-1", "--title", "note \(index)", "--body", "first line")
            notes.append(note)
            try await a("note", "tag", note, "add", "work")
            try await a("note", "set-title", note, "note \(index) v2")
            try await a("note", "tag", note, "remove", "work")
        }
        try await a("note", "delete", notes[7])
        try await a("sync")
        try await b("sync")
        try await b("sync")  // acknowledges what the first sync brought
        try await a("sync")
        let head = try await stack.sql("SELECT max(seq) FROM events").first ?? ""
        #expect(try await stack.sql("SELECT count(*) FROM events") == [head])
        // Many small windows with a pause between them, killed once the first has committed. The pause is long
        // enough that seeing the first commit (a psql each time, slow on a loaded machine) is not outrun by the
        // last one.
        let killed = try stack.startCompaction(
            environment: ["SYNC_COMPACTION_BATCH_EVENTS": "2", "SYNC_COMPACTION_PAUSE_MS": "2000"])
        func compactedThrough() async throws -> Int64 {
            Int64(try await stack.sql("SELECT coalesce(max(compacted_through), 0) FROM scope_compaction").first ?? "")
                ?? 0
        }
        let deadline = ContinuousClock.now + .seconds(60)
        while try await compactedThrough() == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        kill(killed.processIdentifier, SIGKILL)
        await killed.exited()
        let atKill = try await compactedThrough()
        #expect(atKill > 0 && atKill < Int64(head) ?? 0, "killed midway, at \(atKill) of \(head)")
        // Meanwhile b edits, unaware.
        try await b("note", "set-title", notes[0], "edited during compaction")
        struct Report: Decodable {
            struct Scope: Decodable {
                var scope: String
                var stable: Int64
                var compactedThrough: Int64
            }
            var scopes: [Scope]
            var bytesBefore: [String: Int64]
            var bytesAfter: [String: Int64]
        }
        let report = try await JSONDecoder().decode(Report.self, from: Data(try stack.compact(["--vacuum"]).utf8))
        #expect(report.scopes.map { String($0.compactedThrough) } == [head], "\(report.scopes)")
        #expect(report.bytesAfter["folded_events"] ?? 0 > 0)
        let rows = try await stack.sql(
            "SELECT count(*) || ' ' || count(DISTINCT stream) || ' ' || count(DISTINCT event_id) || ' ' || max(seq) FROM folded_events"
        )
        #expect(
            rows.first?.hasPrefix("7 7 7 ") == true,
            "one snapshot per live note, at the seq of its last event; the deleted note is gone: \(rows)")
        #expect(try await stack.sql("SELECT count(*) FROM events") == ["0"], "nothing left unfolded")
        try await b("sync")
        let c = stack.agent("c", token: token)
        try await c("sync")
        try await a("sync")
        #expect(try await c("export", "--state") == a("export", "--state"))
        #expect(try await c("export", "--state") == b("export", "--state"))
        let state = try await c.state()
        #expect(state[notes[0]]?.title == "edited during compaction")
        #expect(state[notes[1]]?.title == "note 1 v2" && state[notes[1]]?.tags == [])
        #expect(state[notes[7]] == nil)
        #expect(try await c.status().pending == 0)
    }

    /// A device offline past the eviction horizon, with offline edits, comes back after compaction purged what
    /// it had not seen: told to reset, it bootstraps from the folded history, re-bases its edits, and every
    /// edit it made is there on every replica.
    @Test func aDeviceBackFromPastTheHorizonResetsRebasesAndLosesNoEdit() async throws {
        let horizon = ["SYNC_EVICTION_HORIZON_SECONDS": "2"]
        let stack = try await Stack(serverEnvironment: horizon)
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        let b = stack.agent("b", token: token)
        let note = try await a("note", "create", "--scope", "team-1", "--title", "plan", "--body", "hello world")
        let other = try await a("note", "create", "--scope", "team-1", "--title", "doomed", "--body", "bye")
        try await a("sync")
        try await b("sync")
        try await b("sync")
        // b goes offline and edits what it has.
        try await b("note", "set-body", note, "hello brave new world")
        try await b("note", "set-title", note, "plan (b, offline)")
        try await b("note", "tag", other, "add", "keep")
        // Meanwhile a deletes text and a note, and stays in touch past b's horizon.
        try await a("note", "set-body", note, "hello")
        try await a("note", "delete", other)
        try await a("sync")
        try await Task.sleep(for: .seconds(3))
        try await a("sync")
        try await a("sync")
        struct Report: Decodable {
            struct Scope: Decodable {
                var retainedFromSeq: Int64
                var droppedStreams: Int
            }
            var scopes: [Scope]
        }
        let report = try await JSONDecoder().decode(
            Report.self, from: Data(try stack.compact(environment: horizon).utf8))
        #expect(report.scopes.first?.retainedFromSeq ?? 0 > 1, "the fold purged what b never saw")
        #expect(report.scopes.first?.droppedStreams == 1)
        // b comes back: reset, bootstrap, re-base, push, in one sync.
        try await b("sync")
        try await a("sync")
        try await b("sync")
        #expect(try await a("export", "--state") == b("export", "--state"))
        let state = try await a.state()
        #expect(state[note]?.title == "plan (b, offline)")
        #expect(state[note]?.body.contains("brave new") == true, "\(state[note]?.body ?? "")")
        #expect(state[other] == nil, "the deleted note stays deleted")
        let status = try await b.status()
        #expect(status.pending == 0)
        #expect(status.journal.contains { $0.kind == "reset" } && status.journal.contains { $0.kind == "rebase" })
        let c = stack.agent("c", token: token)
        try await c("sync")
        #expect(try await c("export", "--state") == a("export", "--state"))
    }

    /// Waits, reading the file beside the running agent, until it holds a cursor and no folded cursor: what the
    /// engine pulled is written, not only in its memory. Returns early if the agent exits.
    static func waitUntilWritten(_ path: String, while agent: ChildProcess.Running) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while agent.isRunning, ContinuousClock.now < deadline {
            if FileManager.default.fileExists(atPath: path) {
                let written = try? await DatabaseQueue(path: path, configuration: readOnly).read { db in
                    try String.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = 'cursor'") != nil
                        && String.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = 'folded_cursor'") == nil
                }
                if written == true { return }
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    static var readOnly: GRDB.Configuration {
        var configuration = GRDB.Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(5)
        return configuration
    }

    /// A new device pulling a long history that compaction has not folded folds it on arrival (every other
    /// replica has seen it): `kill -9` during that bootstrap, however often, loses nothing: the next sync
    /// resumes (from before what the killed process held in memory only), and the device ends with the state
    /// of one that logged every event, its log holding none of them.
    @Test func aBootstrapFoldingOnArrivalKilledMidwayResumesAndConverges() async throws {
        // The pushing replica never acknowledges anything: past the horizon, it stops holding points back.
        let stack = try await Stack(serverEnvironment: ["SYNC_EVICTION_HORIZON_SECONDS": "2"])
        let scopes = ["bench-0", "bench-1"]
        let token = try await stack.token(sub: "bench", scopes: scopes)
        let bench = Stack.productsDirectory.appendingPathComponent("sync-bench").path
        _ = try await Stack.run(
            bench,
            [
                "bootstrap", "--server", stack.serverURL, "--token", token, "--events", "12000", "--scopes", "2",
                "--notes", "60", "--no-bootstrap", "--json",
            ])
        try await Task.sleep(for: .seconds(3))
        let fresh = stack.agent("fresh", token: token)
        // Killed early (folded pages still in memory: the next sync starts over), then once the engine has
        // written them (a cursor stored and no folded cursor left: the next sync goes on from there). That
        // moment is watched for in the file, not guessed: on a loaded machine it came after 2.5 s.
        var resumedFrom: [String?] = []
        for delay in [150, 400, 1500, nil] as [Int?] {
            let syncing = try fresh.start(["sync", "--compact-after", "500"])
            if let delay {
                try await Task.sleep(for: .milliseconds(delay))
            } else {
                try await Self.waitUntilWritten(fresh.database, while: syncing)
            }
            kill(syncing.processIdentifier, SIGKILL)
            await syncing.exited()
            await resumedFrom.append(try fresh.status().cursor)
        }
        try await fresh("sync", "--compact-after", "500")
        let status = try await fresh.status()
        #expect(status.pending == 0)
        #expect(status.confirmed < 12_000 / 4, "folded on arrival, not logged: \(status.confirmed) logged")
        #expect(status.journal.contains { $0.kind == "pull.ok" && $0.detail.contains("folded on arrival") })
        #expect(status.journal.contains { $0.kind == "fold.purge" }, "purged once the pull reached the head")
        #expect(status.lastCompaction?.kind == "fold.purge", "status shows it as the last compaction")
        #expect(resumedFrom.contains { $0 != nil }, "a later kill keeps what was written: \(resumedFrom)")
        let logging = stack.agent("logging", token: token)
        try await logging("sync", "--compact-after", "0")
        #expect(try await logging.status().confirmed >= 12_000)
        #expect(try await fresh("export", "--state") == logging("export", "--state"))
        #expect(try await fresh.state().count > 0)
    }

    /// The compaction service folds by itself once a scope has enough foldable events.
    @Test func theServersCompactionServiceFoldsOnItsOwn() async throws {
        let stack = try await Stack(serverEnvironment: [
            "SYNC_COMPACTION_INTERVAL_SECONDS": "1", "SYNC_COMPACTION_MIN_EVENTS": "10",
            "SYNC_STABLE_POINT_REFRESH_MS": "0",
        ])
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        let note = try await a("note", "create", "--scope", "team-1", "--title", "v0")
        for round in 1...12 { try await a("note", "set-title", note, "v\(round)") }
        try await a("sync")
        try await a("sync")
        var rows: [String] = []
        // Within two minutes: a bound against a hang, not a measure of the service's interval.
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            rows = try await stack.sql(
                "SELECT (SELECT count(*) FROM events) || ' ' || (SELECT count(*) FROM folded_events)")
            if rows == ["0 1"] { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(rows == ["0 1"], "13 events folded into one snapshot")
        let b = stack.agent("b", token: token)
        try await b("sync")
        #expect(try await b.state()[note]?.title == "v12")
    }

    @Test func anExpiredTokenPausesSyncWithoutLosingLocalEdits() async throws {
        let stack = try await Stack()
        let shortLived = try await stack.token(scopes: ["team-1"], ttl: 1)
        var a = stack.agent("a", token: shortLived)
        let note = try await a("note", "create", "--scope", "team-1", "--title", "draft")
        try await Task.sleep(for: .seconds(2))
        let failed = try await a.capturing(["sync"])
        #expect(failed.status != 0)
        #expect(failed.stderr.contains("auth.expired"))
        #expect(try await a.state()[note]?.title == "draft", "the local edit is intact")
        #expect(try await a.status().pending == 1, "the create is still queued")
        a.token = try await stack.token(scopes: ["team-1"])
        try await a("sync")
        #expect(try await a.status().pending == 0)
        let b = stack.agent("b", token: a.token)
        try await b("sync")
        #expect(try await b.state()[note]?.title == "draft")
    }
}
