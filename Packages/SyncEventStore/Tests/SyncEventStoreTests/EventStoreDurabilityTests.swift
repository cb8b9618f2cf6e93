import Foundation
import GRDB
import SyncEventStoreTestSupport
import SyncModels
import Testing

@testable import SyncEventStore

@Suite struct EventStoreDurabilityTests {
    /// A child process appends batches of 10 events in a loop and is killed (`_exit`, no cleanup) at a random
    /// instant by another thread. After each kill the parent reopens the file and checks the invariants:
    /// every batch is all there or not at all, stream versions and dots have no holes, the projection
    /// reflects exactly the log, and the file is intact. Then the next child continues on the same file.
    @Test func killedMidAppendLeavesAllOrNothing() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("crash.sqlite")
        for round in 0..<5 {
            await #expect(processExitsWith: .exitCode(9)) { [path = path as String, round = round as Int] in
                let store = try EventStore(path: path, projections: [TitleProjection()])
                let delay = UInt32(20_000 + (round * 37_000) % 150_000)
                for batch in 0..<100_000 {
                    let id = "r\(round)b\(batch)"
                    try store.appendNow(
                        (0..<10).map { index in
                            EventDraft(
                                scope: "s", stream: "note:\(index % 3)",
                                type: index % 2 == 0 ? "title.set" : "tag.added",
                                payload: .object(["title": .string(id), "tag": .string(id), "batch": .string(id)]))
                        })
                    // The killer starts once a batch is in: the kill falls among appends, not while the store
                    // opens (which, on a machine busy with the whole suite, can take longer than the delay).
                    if batch == 0 {
                        Thread.detachNewThread {
                            usleep(delay)
                            _exit(9)
                        }
                    }
                }
                _exit(1)  // not reached: the killer thread ends the process first
            }

            let store = try EventStore(path: path, projections: [TitleProjection()])
            let all = try await store.database.writer.read { db in
                try Row.fetchAll(db, sql: "SELECT \(StoredEvent.columns) FROM events ORDER BY position")
                    .map(StoredEvent.init(row:))
            }
            #expect(!all.isEmpty)
            var perBatch: [String: Int] = [:]
            for stored in all { perBatch[stored.event.payload["batch"]?.stringValue ?? "?", default: 0] += 1 }
            #expect(perBatch.values.allSatisfy { $0 == 10 }, "round \(round): a batch was torn")
            #expect(all.map(\.event.dot.counter) == Array(1..<UInt64(all.count + 1)), "dots have no holes")
            for stream in Set(all.map(\.event.stream)) {
                let versions = all.filter { $0.event.stream == stream }.map(\.event.streamVersion)
                #expect(versions == Array(1..<Int64(versions.count + 1)))
            }
            let incremental = try await TitleProjection.dump(store)
            try await store.rebuild(projection: "titles")
            #expect(try await TitleProjection.dump(store) == incremental, "the projection matched the log")
            try await store.database.writer.read { (db: Database) throws in
                #expect(try String.fetchOne(db, sql: "PRAGMA integrity_check") == "ok")
                #expect(
                    try Int64.fetchOne(db, sql: "SELECT position FROM projection_checkpoint")
                        == EventStore.lastPosition(db))
            }
        }
    }

    @Test func exportImportReplayGivesTheSameState() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("live.sqlite"), projections: [TitleProjection()])
        let firstBatch = try await store.append([title("note:1", "v1"), tag("note:1", "a"), title("note:2", "x")])
        try await store.applyConfirmed(confirmed(firstBatch, firstSeq: 1), cursor: "c1")
        let stateAtSeq3 = try await TitleProjection.dump(store)
        let second = try await store.append([title("note:1", "v2"), tag("note:2", "b")])
        try await store.applyConfirmed(confirmed(second, firstSeq: 4), cursor: "c2")
        let refused = try await store.append([title("note:1", "refused")])
        try await store.markRejected([refused[0].event.id], code: "validation.failed", message: "no")
        try await store.append([tag("note:3", "pending")])
        let live = try await TitleProjection.dump(store)

        let file = directory.url.appendingPathComponent("log.jsonl.gz")
        #expect(try await store.export(to: file) == 7)
        let scratch = try EventStore(path: directory.path("scratch.sqlite"), projections: [TitleProjection()])
        var changes = scratch.changes().makeAsyncIterator()
        #expect(try await scratch.importLog(from: file) == 7)
        #expect(await changes.next()?.kind == .imported, "observers hear about an import")
        #expect(try await TitleProjection.dump(scratch) == live)
        #expect(try await scratch.counts() == [.pending: 1, .confirmed: 5, .rejected: 1])
        #expect(try await scratch.rejectedEvents().first?.rejection?.message == "no")

        try await scratch.replay(until: .seq(3))
        #expect(try await TitleProjection.dump(scratch) == stateAtSeq3)
        try await scratch.replay(until: .time(Date(timeIntervalSince1970: 1_700_000_000.5)))
        #expect(try await TitleProjection.dump(scratch) == ["note:1=v2"], "the first event of each page")
        try await scratch.replay(until: .hlc(second[1].event.hlc))
        #expect(try await TitleProjection.dump(scratch) == ["note:1=v2", "note:2=x", "note:1#a", "note:2#b"])
        try await scratch.rebuildAll()
        #expect(try await TitleProjection.dump(scratch) == live)

        try Data("not gzip".utf8).write(to: file)
        await #expect(throws: EventStoreError.self) { try await scratch.importLog(from: file) }
    }

    @Test func pruneFoldsStableEventsAndKeepsEveryStateTheSame() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        var seq: Int64 = 1
        for round in 0..<40 {
            let events = try await store.append(
                (0..<50).map { index in
                    index % 2 == 0
                        ? title("note:\(index % 7)", "r\(round)-\(index)" + String(repeating: "x", count: 200))
                        : tag("note:\(index % 7)", "t\(index % 5)")
                })
            try await store.applyConfirmed(confirmed(events, firstSeq: seq), cursor: "c")
            seq += Int64(events.count)
        }
        let pending = try await store.append([title("note:1", "pending edit")])
        let before = try await TitleProjection.dump(store)
        let sizeBefore = try store.database.maintenance.statistics()

        let report = try await store.prune(stablePoints: ["team-1": 1500])
        #expect(report.foldedEvents == 1500)
        #expect(report.pagesFreed > 0)
        #expect(try store.database.maintenance.statistics().fileBytes < sizeBefore.fileBytes)
        #expect(try await store.counts() == [.pending: 1, .confirmed: 500, .rejected: 0])
        #expect(try await TitleProjection.dump(store) == before, "pruning changes nothing visible")
        try await store.rebuild(projection: "titles")
        #expect(try await TitleProjection.dump(store) == before, "snapshot + remaining log rebuilds the same")

        // Rollback after pruning still returns to the folded state, not to nothing.
        try await store.markRejected([pending[0].event.id], code: "validation.failed", message: "no")
        var expected = before
        expected.removeAll { $0 == "note:1=pending edit" }
        let restored = try await TitleProjection.dump(store)
        #expect(restored.count == before.count && !restored.contains("note:1=pending edit"))
        #expect(restored.filter { $0.contains("#") } == expected.filter { $0.contains("#") })

        // Pending and rejected events are never pruned.
        let all = try await store.prune(stablePoints: ["team-1": .max], olderThan: .distantFuture)
        #expect(all.foldedEvents == 500)
        #expect(try await store.counts() == [.pending: 0, .confirmed: 0, .rejected: 1])
        #expect(try await TitleProjection.dump(store) == restored)
    }

    /// Databases written by earlier schema versions open with the current code, keep their events and
    /// rebuild their projections. One fixture per released schema version, kept in Fixtures/.
    @Test(arguments: ["eventstore-v1.sqlite", "eventstore-v2.sqlite"])
    func opensDatabasesFromEarlierSchemaVersions(fixture: String) async throws {
        let directory = try TemporaryDirectory()
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/\(fixture)")
        let path = directory.path(fixture)
        try FileManager.default.copyItem(atPath: source.path, toPath: path)
        let store = try EventStore(path: path, projections: [TitleProjection()])
        #expect(try await store.counts() == [.pending: 2, .confirmed: 3, .rejected: 1])
        #expect(try await TitleProjection.dump(store) == ["note:1=second", "note:2=other", "note:1#a", "note:3#b"])
        // `streams` came through every migration as a rowid table (v6), each stream at its highest version.
        // …and `events` as rebuilt by v7, its event ids unique per scope.
        let (versions, held, streamsSQL, eventsSQL) = try await store.database.writer.read { db in
            (
                try String.fetchAll(db, sql: "SELECT stream || '@' || version FROM streams ORDER BY stream"),
                try String.fetchAll(
                    db, sql: "SELECT stream || '@' || max(stream_version) FROM events GROUP BY stream ORDER BY stream"),
                try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'streams'") ?? "",
                try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'events'") ?? ""
            )
        }
        #expect(versions == held && !versions.isEmpty)
        #expect(!streamsSQL.contains("WITHOUT ROWID") && streamsSQL.contains("UNIQUE"))
        #expect(eventsSQL.contains("UNIQUE (scope, event_id)"))
        try await store.append([title("note:1", "third")])
        #expect(try await store.events(stream: "note:1").last?.event.streamVersion == 4)
    }

    /// `eventstore.v4.status-check` rebuilds the log's table: every row stays with its position, positions
    /// issued before stay unused (a pruned log's highest position is above its last row), and the status is
    /// still checked, now without an `IN` list.
    @Test func theStatusCheckRebuildKeepsRowsPositionsAndTheCheck() async throws {
        let directory = try TemporaryDirectory()
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/eventstore-v2.sqlite")
        let path = directory.path("v2.sqlite")
        try FileManager.default.copyItem(atPath: source.path, toPath: path)
        let rowsBefore: [Row]
        do {
            // As a prune would leave it: positions up to 40 were issued, the rows above 6 are gone.
            let queue = try DatabaseQueue(path: path)
            rowsBefore = try await queue.write { db in
                try db.execute(sql: "UPDATE sqlite_sequence SET seq = 40 WHERE name = 'events'")
                return try Row.fetchAll(db, sql: "SELECT * FROM events ORDER BY position")
            }
            try queue.close()
        }
        let store = try EventStore(path: path, projections: [TitleProjection()])
        // The columns the file had (later migrations add others, such as the checksums).
        let columns = rowsBefore.first.map { Array($0.columnNames).joined(separator: ", ") } ?? "*"
        let (rowsAfter, tableSQL, unsummed) = try await store.database.writer.read { db in
            (
                try Row.fetchAll(db, sql: "SELECT \(columns) FROM events ORDER BY position"),
                try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'events'") ?? "",
                try Int.fetchOne(db, sql: "SELECT count(*) FROM events WHERE checksum IS NULL") ?? -1
            )
        }
        #expect(rowsAfter == rowsBefore && rowsAfter.count == 6)
        #expect(unsummed == 0, "eventstore.v8 computed the checksum of every row already there")
        #expect(try await store.scopeChecksums().values.allSatisfy(\.isConsistent))
        #expect(!tableSQL.contains(" IN ("))
        #expect(try await store.counts() == [.pending: 2, .confirmed: 3, .rejected: 1])
        let next = try await store.append([title("note:1", "third")])
        #expect(next[0].position == 41)
        await #expect(throws: DatabaseError.self) {
            try await store.database.writer.write { db in
                try db.execute(
                    sql: "UPDATE events SET status = 'lost' WHERE position = ?", arguments: [next[0].position])
            }
        }
        #expect(try await store.counts() == [.pending: 3, .confirmed: 3, .rejected: 1])
        #expect(try await TitleProjection.dump(store) == ["note:1=third", "note:2=other", "note:1#a", "note:3#b"])
    }
}
