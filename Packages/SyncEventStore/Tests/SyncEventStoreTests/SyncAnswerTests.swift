import Foundation
import SyncEventStoreTestSupport
import SyncModels
import Synchronization
import Testing

@testable import SyncEventStore

/// `EventStore.apply(_:budget:also:)`: one answer of the server, in transactions that fit a budget.
@Suite struct SyncAnswerTests {
    struct InjectedFault: Error {}

    @Test func aTransactionSizeHalvesPastItsBudgetAndDoublesWhenFullUnderHalfOfIt() {
        var size = TransactionSize(100, in: 10...400)
        size.record(took: .milliseconds(3), budget: .milliseconds(8))
        #expect(size.value == 200)
        // Not full: under half of the budget says nothing about a larger one.
        size.record(took: .milliseconds(1), budget: .milliseconds(8), full: false)
        #expect(size.value == 200)
        size.record(took: .milliseconds(6), budget: .milliseconds(8))
        #expect(size.value == 200)
        size.record(took: .milliseconds(3), budget: .milliseconds(8))
        size.record(took: .milliseconds(3), budget: .milliseconds(8))
        #expect(size.value == 400)
        for _ in 0..<10 { size.record(took: .milliseconds(9), budget: .milliseconds(8)) }
        #expect(size.value == 10)
        #expect(TransactionSize(5, in: 10...400).value == 10)
        size.grow()
        #expect(size.value == 20)
    }

    /// A marked page ends its transactions at the first mark at or past `chunk` more events; without marks,
    /// or when the rest fits, at its end with its own cursor.
    @Test func aMarkedPageIsSplitAtItsMarks() async throws {
        let directory = try TemporaryDirectory()
        let other = try EventStore(path: directory.path("b.sqlite"))
        let events = confirmed(try await other.append((0..<10).map { title("note:\($0)", "t") }), firstSeq: 1)
        var answer = SyncAnswer(events: events, cursor: "end", marks: ["m3", "m6", "m9"], markEvery: 3)
        #expect(answer.transaction(from: 0, chunk: 4) == (0..<6, "m6"))
        #expect(answer.transaction(from: 6, chunk: 1) == (6..<9, "m9"))
        #expect(answer.transaction(from: 9, chunk: 1) == (9..<10, "end"))
        #expect(answer.transaction(from: 0, chunk: 10) == (0..<10, "end"))
        #expect(answer.transaction(from: 0, chunk: 0) == (0..<3, "m3"))
        answer.markEvery = nil
        #expect(answer.transaction(from: 0, chunk: 4) == (0..<10, "end"))
    }

    /// A page of three marked parts is applied in three transactions: the push's results with the first, each
    /// storing the mark it ends at; the outcome is the sum of theirs, and `also` sees each with the running
    /// total.
    @Test func aMarkedAnswerIsAppliedInTransactionsThatAddUp() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        let pending = try await store.append([title("note:1", "mine")])
        let other = try EventStore(path: directory.path("b.sqlite"))
        let remote = confirmed(try await other.append((0..<6).map { title("note:\($0 + 2)", "t\($0)") }), firstSeq: 2)
        let answer = SyncAnswer(
            acknowledged: [pending[0].event.id: 1], pushedPositions: [pending[0].event.id: pending[0].position],
            events: remote, cursor: "c6", marks: ["c2", "c4", "c6"], markEvery: 2, follows: "")
        var budget = ApplyBudget(
            transaction: .seconds(10), writeBehind: .zero, events: TransactionSize(1, in: 1...1))
        let seen = Mutex<[String]>([])
        let applied = try await store.apply(answer, budget: &budget) { transaction, db in
            let cursor = try String.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = 'cursor'") ?? ""
            seen.withLock {
                $0.append(
                    "\(transaction.isFirst) \(transaction.isLast) \(transaction.total.acknowledged) \(transaction.total.pulled.inserted) \(cursor)"
                )
            }
        }
        #expect(applied.transactions == 3)
        #expect(applied.outcome.acknowledged == 1)
        #expect(applied.outcome.pulled.inserted == 6)
        #expect(
            seen.withLock { $0 } == ["true false 1 2 c2", "false false 1 4 c4", "false true 1 6 c6"])
        #expect(try await store.cursor() == "c6")
        #expect(try await TitleProjection.dump(store).count == 7)
    }

    /// A crash in the second transaction leaves the store at the end of the first: the mark it stored is
    /// the cursor, the first part's events are there with their projection rows, the rest is not; applying
    /// the answer's rest from that mark ends where one run would.
    @Test func aCrashBetweenTransactionsResumesAtTheMarkBefore() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        let other = try EventStore(path: directory.path("b.sqlite"))
        let remote = confirmed(try await other.append((0..<6).map { title("note:\($0)", "t\($0)") }), firstSeq: 1)
        let answer = SyncAnswer(events: remote, cursor: "c6", marks: ["c3", "c6"], markEvery: 3, follows: "")
        var budget = ApplyBudget(transaction: .seconds(10), writeBehind: .zero, events: TransactionSize(3, in: 3...3))
        let calls = Mutex(0)
        await #expect(throws: InjectedFault.self) {
            try await EventStore.$syncResponseFault.withValue({ step in
                guard step == .beforeCursor else { return }
                let call = calls.withLock { count in
                    count += 1
                    return count
                }
                if call == 2 { throw InjectedFault() }
            }) {
                try await store.apply(answer, budget: &budget)
            }
        }
        #expect(try await store.cursor() == "c3")
        #expect(try await TitleProjection.dump(store).count == 3)
        var rest = answer
        rest.events = Array(remote[3...])
        rest.marks = []
        rest.follows = "c3"
        let resumed = try await store.apply(rest, budget: &budget)
        #expect(resumed.outcome.pulled.inserted == 3)
        #expect(try await store.cursor() == "c6")
        #expect(try await TitleProjection.dump(store).count == 6)
    }

    /// An answer asked from a cursor the store no longer holds is not applied: the outcome says `rewound`,
    /// after one transaction.
    @Test func anAnswerThatDoesNotFollowTheStoredCursorIsRewound() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        let other = try EventStore(path: directory.path("b.sqlite"))
        let remote = confirmed(try await other.append([title("note:1", "x")]), firstSeq: 1)
        var budget = ApplyBudget(transaction: .seconds(1), writeBehind: .zero, events: TransactionSize(1, in: 1...1))
        let applied = try await store.apply(
            SyncAnswer(events: remote, cursor: "c1", follows: "elsewhere"), budget: &budget)
        #expect(applied.outcome.rewound)
        #expect(applied.transactions == 1)
        #expect(try await store.cursor() == nil)
    }

    @Test func outcomesAddUp() {
        let a = EventStore.SyncResponseOutcome(
            acknowledged: 2, pulled: .init(inserted: 1, confirmedLocal: 2, alreadyKnown: 3, folded: 4))
        let b = EventStore.SyncResponseOutcome(
            acknowledged: 1, pulled: .init(inserted: 10, confirmedLocal: 20, alreadyKnown: 30, folded: 40),
            rewound: true)
        #expect(
            a + b
                == .init(
                    acknowledged: 3, pulled: .init(inserted: 11, confirmedLocal: 22, alreadyKnown: 33, folded: 44),
                    rewound: true))
    }
}
