import Foundation
import GRDB
import SyncEventStoreTestSupport
import SyncModels
import Synchronization
import Testing

@testable import SyncEventStore

/// `applySyncResponse`: one server answer in one transaction.
@Suite struct SyncResponseTests {
    struct InjectedFault: Error {}

    /// Payload bytes the caller gives (its decoder found them canonical on the wire) are stored as they are;
    /// a payload without them is written from its value.
    @Test func givenPayloadBytesAreStoredAsTheyAre() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        let other = try EventStore(path: directory.path("b.sqlite"))
        let pulled = confirmed(try await other.append([title("note:2", "x"), title("note:3", "y")]), firstSeq: 1)
        let given = pulled[0].payload.canonicalData()
        try await store.applySyncResponse(
            acknowledged: [:], rejected: [:], pulled: pulled, payloads: [given, nil], cursor: "c")
        let stored = try await store.database.writer.read { db in
            try Data.fetchAll(db, sql: "SELECT payload FROM events ORDER BY position")
        }
        #expect(stored == [given, pulled[1].payload.canonicalData()])
        // Fewer bytes than events (or none): the rest are written from their values.
        let more = confirmed(try await other.append([title("note:4", "z")]), firstSeq: 3)
        try await store.applySyncResponse(acknowledged: [:], rejected: [:], pulled: more, payloads: [], cursor: "d")
        let all = try await store.database.writer.read { db in
            try Data.fetchAll(db, sql: "SELECT payload FROM events ORDER BY position")
        }
        #expect(all == (pulled + more).map { $0.payload.canonicalData() })
    }

    /// A store with a cursor and three pending events, and the answer a server would give to their push:
    /// two accepted, one rejected, and a page with two events of another replica and the two accepted ones.
    struct Scenario {
        let directory: TemporaryDirectory
        let store: EventStore
        let acknowledged: [EventID: Int64]
        let rejected: [EventID: StoredEvent.Rejection]
        let pulled: [Event]

        init() async throws {
            directory = try TemporaryDirectory()
            store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
            let first = try await store.append([title("note:1", "a1"), tag("note:1", "first")])
            try await store.applyConfirmed(confirmed(first, firstSeq: 1), cursor: "c1")
            let other = try EventStore(path: directory.path("b.sqlite"))
            let remote = try await other.append([title("note:2", "from b"), tag("note:1", "b")])
            let pending = try await store.append([
                title("note:1", "a2"), title("note:3", "forbidden"), tag("note:3", "kept"),
            ])
            acknowledged = [pending[0].event.id: 5, pending[2].event.id: 6]
            rejected = [pending[1].event.id: .init(code: "validation.failed", message: "quota")]
            pulled = confirmed(remote, firstSeq: 3) + confirmed([pending[0], pending[2]], firstSeq: 5)
        }

        @discardableResult
        func apply(to store: EventStore) async throws -> EventStore.SyncResponseOutcome {
            try await store.applySyncResponse(
                acknowledged: acknowledged, rejected: rejected, pulled: pulled, cursor: "c2")
        }

        /// Another store with this one's exact database.
        func copy(_ name: String) throws -> EventStore {
            let copy = try DatabaseQueue(path: directory.path("\(name).sqlite"))
            try store.database.writer.backup(to: copy)
            try copy.close()
            return try EventStore(path: directory.path("\(name).sqlite"), projections: [TitleProjection()])
        }

        /// What an answer may change: the log as exported, the projection, `store_meta` and the checkpoints.
        struct State: Equatable {
            var exported: [ExportedEvent]
            var tables: [String]
            /// The stored HLC, apart: it follows the wall clock, so a store that applied the same answer at
            /// another time has another one.
            var hlc: String?
        }

        func state(of store: EventStore) async throws -> State {
            let file = directory.url.appendingPathComponent("export-\(UUID().uuidString).jsonl.gz")
            try await store.export(to: file)
            let (tables, hlc) = try await store.database.writer.read { db in
                (
                    try String.fetchAll(
                        db, sql: "SELECT key || '=' || value FROM store_meta WHERE key != 'hlc' ORDER BY key")
                        + String.fetchAll(db, sql: "SELECT name || '@' || position FROM projection_checkpoint"),
                    try String.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = 'hlc'")
                )
            }
            let projection = try await TitleProjection.dump(store)
            return State(exported: try EventStore.readExport(from: file), tables: tables + projection, hlc: hlc)
        }
    }

    final class StepLog: Sendable {
        let steps = Mutex<[EventStore.SyncResponseStep]>([])
    }

    @Test func theAcknowledgedCursorIsWhatTheReplicaKnewWhenItMadeItsOldestPendingEvent() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("acknowledged.sqlite"))
        #expect(try await store.acknowledgedCursor() == nil, "an empty outbox vouches for the cursor itself")
        try await store.applyConfirmed([], cursor: "c1")
        let first = try await store.append([title("note:1", "made at c1")])
        try await store.applyConfirmed([], cursor: "c2")
        #expect(try await store.acknowledgedCursor() == "c1", "held back while the edit made at c1 waits")
        let second = try await store.append([title("note:2", "made at c2")])
        try await store.append([title("note:3", "also made at c2")])
        #expect(try await store.acknowledgedCursor() == "c1")
        try await store.applySyncResponse(
            acknowledged: [first[0].event.id: 1], rejected: [:], pulled: [], cursor: "c3")
        #expect(try await store.acknowledgedCursor() == "c2", "the oldest pending event was made at c2")
        try await store.applySyncResponse(
            acknowledged: [second[0].event.id: 2], rejected: [:], pulled: [], cursor: "c4")
        #expect(try await store.acknowledgedCursor() == "c2")
        let pending = try await store.pendingEvents()
        try await store.applySyncResponse(
            acknowledged: [pending[0].event.id: 3], rejected: [:], pulled: [], cursor: "c5")
        #expect(try await store.acknowledgedCursor() == nil)
        let marks = try await store.database.writer.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox_marks")
        }
        #expect(marks == 0, "marks no pending event needs are dropped")

        // Pending events written before the store kept marks vouch for nothing past the beginning.
        try await store.append([title("note:4", "made at c5")])
        try await store.database.writer.write { db in try db.execute(sql: "DELETE FROM outbox_marks") }
        #expect(try await store.acknowledgedCursor() == "")
    }

    @Test func oneAnswerInOneTransactionDoesWhatTheThreeCallsDid() async throws {
        let scenario = try await Scenario()
        let threeCalls = try scenario.copy("three-calls")
        var changes = scenario.store.changes().makeAsyncIterator()
        var threeCallsChanges = threeCalls.changes().makeAsyncIterator()

        let outcome = try await scenario.apply(to: scenario.store)
        let confirmedCount = try await threeCalls.markConfirmed(scenario.acknowledged)
        let rolledBack = try await threeCalls.markRejected(scenario.rejected)
        let pulled = try await threeCalls.applyConfirmed(scenario.pulled, cursor: "c2")

        #expect(outcome.acknowledged == 2 && outcome.acknowledged == confirmedCount)
        #expect(outcome.rolledBack == rolledBack && outcome.rolledBack.map(\.event.stream) == ["note:3"])
        #expect(outcome.pulled == pulled && pulled == .init(inserted: 2, confirmedLocal: 0, alreadyKnown: 2))
        #expect(try await scenario.store.counts() == [.pending: 0, .confirmed: 6, .rejected: 1])
        #expect(try await scenario.store.cursor() == "c2")
        #expect(
            try await TitleProjection.dump(scenario.store)
                == ["note:1=a2", "note:2=from b", "note:1#b", "note:1#first", "note:3#kept"])
        let actual = try await scenario.state(of: scenario.store)
        var expected = try await scenario.state(of: threeCalls)
        expected.hlc = actual.hlc
        #expect(actual == expected)

        // Observers hear what they heard from the three calls: the rollback, then the new events.
        let heard = [await changes.next(), await changes.next()]
        let heardFromThreeCalls = [await threeCallsChanges.next(), await threeCallsChanges.next()]
        #expect(heard == heardFromThreeCalls)
        #expect(heard.map { $0?.kind } == [.rejected, .confirmed])
        #expect(heard.map { $0?.streams } == [["note:3"], ["note:1", "note:2"]])
    }

    @Test func theHookIsCalledAtEveryStepInOrder() async throws {
        let scenario = try await Scenario()
        let log = StepLog()
        try await EventStore.$syncResponseFault.withValue({ step in log.steps.withLock { $0.append(step) } }) {
            _ = try await scenario.apply(to: scenario.store)
        }
        #expect(log.steps.withLock { $0 } == EventStore.SyncResponseStep.allCases)
        // Outside `withValue` nothing is called.
        _ = try await scenario.store.applySyncResponse(acknowledged: [:], rejected: [:], pulled: [], cursor: "c3")
        #expect(log.steps.withLock { $0.count } == EventStore.SyncResponseStep.allCases.count)
    }

    @Test(arguments: EventStore.SyncResponseStep.allCases)
    func aFaultAtAnyStepRollsBackTheWholeAnswer(step: EventStore.SyncResponseStep) async throws {
        let scenario = try await Scenario()
        let uninterrupted = try scenario.copy("uninterrupted")
        let before = try await scenario.state(of: scenario.store)
        var changes = scenario.store.changes().makeAsyncIterator()

        await #expect(throws: InjectedFault.self) {
            try await EventStore.$syncResponseFault.withValue({ reached in
                if reached == step { throw InjectedFault() }
            }) {
                try await scenario.apply(to: scenario.store)
            }
        }
        #expect(try await scenario.state(of: scenario.store) == before, "fault at \(step): nothing applied")

        try await scenario.apply(to: scenario.store)
        try await scenario.apply(to: uninterrupted)
        let actual = try await scenario.state(of: scenario.store)
        var expected = try await scenario.state(of: uninterrupted)
        expected.hlc = actual.hlc
        #expect(actual == expected, "fault at \(step), then the same answer again: as if it never failed")

        // Observers heard nothing of the failed try: only the answer applied, then the next write.
        try await scenario.store.append([tag("note:1", "later")])
        let heard = [await changes.next(), await changes.next(), await changes.next()].map { $0?.kind }
        #expect(heard == [.rejected, .confirmed, .appended], "fault at \(step)")
    }

    /// A page that repeats known events (a retried page, or the device's own events served back) leaves no
    /// unused positions behind: SQLite took one for each known event before refusing it, and a buffering
    /// projection checks that the next page starts where the last row is.
    @Test func knownEventsInAPageLeaveNoGapInPositions() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        let other = try EventStore(path: directory.path("b.sqlite"))
        let remote = confirmed(
            try await other.append([title("note:1", "one"), title("note:2", "two"), tag("note:1", "x")]), firstSeq: 1)
        try await store.applyConfirmed(Array(remote[0..<2]), cursor: "c2")
        // The third event is new, the two after it known: the last row is the third one's.
        let page = try await store.applyConfirmed([remote[2], remote[0], remote[1]], cursor: "c3")
        #expect(page.inserted == 1 && page.alreadyKnown == 2)
        let (last, issued) = try await store.database.writer.read { db in
            (
                try Int64.fetchOne(db, sql: "SELECT max(position) FROM events"),
                try EventStore.lastPosition(db)
            )
        }
        #expect(last == 3 && issued == 3)
        // A page of known events only changes nothing.
        try await store.applyConfirmed(remote, cursor: "c3")
        let next = try await store.append([title("note:3", "local")])
        #expect(next[0].position == 4)
    }
}
