import Foundation
import SyncEventStore
import SyncModels
import SyncProtocol
import Testing

@testable import SyncEngine

/// The engine's decisions that are pure values: the page sizes a cycle asks for, and how long-poll pages
/// merge onto the store's cursor.
@Suite struct EngineDecisionTests {
    func configuration(pageSize: Int = 500, min: Int = 100, max: Int = 5_000) -> SyncEngine.Configuration {
        var configuration = SyncEngine.Configuration()
        configuration.pageSize = pageSize
        configuration.minPageSize = min
        configuration.maxPageSize = max
        configuration.applyBudget = .milliseconds(8)
        return configuration
    }

    /// A marked page (applied in transactions sized on their own) doubles while full, whatever applying it
    /// took, up to `maxPageSize`; a page that was not full keeps the size.
    @Test func markedPagesDoubleWhileFull() {
        var sizing = PageSizing(configuration())
        #expect(sizing.limit == 500)
        sizing.next(full: true, marked: true, lastApply: .seconds(1))
        #expect(sizing.limit == 1_000)
        sizing.next(full: false, marked: true, lastApply: .zero)
        #expect(sizing.limit == 1_000)
        for _ in 0..<5 { sizing.next(full: true, marked: true, lastApply: nil) }
        #expect(sizing.limit == 5_000)
    }

    /// An unmarked page is one transaction: it doubles while full and applied in under half the budget,
    /// halves when applying took more than the budget, down to `minPageSize`, and does not move before
    /// anything was applied.
    @Test func unmarkedPagesAreSizedByTheirApply() {
        var sizing = PageSizing(configuration())
        sizing.next(full: true, marked: false, lastApply: nil)
        #expect(sizing.limit == 500)
        sizing.next(full: true, marked: false, lastApply: .milliseconds(2))
        #expect(sizing.limit == 1_000)
        sizing.next(full: false, marked: false, lastApply: .milliseconds(2))
        #expect(sizing.limit == 1_000)
        for _ in 0..<5 { sizing.next(full: true, marked: false, lastApply: .milliseconds(20)) }
        #expect(sizing.limit == 100)
        // A page size below the minimum is its own floor.
        #expect(PageSizing(configuration(pageSize: 50)).limit == 50)
    }

    func page(_ scope: Scope, _ seqs: ClosedRange<Int64>, head: Int64) -> PullResponse {
        var cursor = ScopeCursor()
        cursor.advance(scope, to: head)
        let replica = ReplicaID.random()
        let events = seqs.map { seq in
            Event(
                id: EventID(uuid: UUID()), scope: scope, stream: "note:\(seq)", streamVersion: 1, type: "note.titled",
                hlc: HLCTimestamp(physical: 1, counter: 0, node: 1), dot: Dot(replica: replica, counter: UInt64(seq)),
                payload: [:], seq: seq)
        }
        return PullResponse(events: events, cursor: cursor.encoded, hasMore: false)
    }

    func polled(_ page: PullResponse, from: [Scope: Int64], base: [Scope: Int64]) -> SyncEngine.PolledPage {
        var fromCursor = ScopeCursor()
        for (scope, seq) in from { fromCursor.advance(scope, to: seq) }
        var baseCursor = ScopeCursor()
        for (scope, seq) in base { baseCursor.advance(scope, to: seq) }
        return SyncEngine.PolledPage(base: baseCursor, from: fromCursor, page: page, roundTrip: .zero)
    }

    /// Pages that continue the store apply in order; a page the store has in part gives only its events past
    /// the store; the cursor moves to the last page's end.
    @Test func pagesThatContinueTheStoreMerge() throws {
        let scope: Scope = "team-1"
        var stored = ScopeCursor()
        stored.advance(scope, to: 4)
        let pages = [
            polled(page(scope, 3...5, head: 5), from: [scope: 2], base: [scope: 2]),
            polled(page(scope, 6...7, head: 7), from: [scope: 5], base: [scope: 5]),
        ]
        guard case .apply(let events, let cursor) = SyncEngine.merge(pages, onto: stored) else {
            Issue.record("expected events to apply")
            return
        }
        #expect(events.map(\.seq) == [5, 6, 7])
        #expect(cursor[scope] == 7)
    }

    /// Between the store and a page's start lie only this replica's own events when the chain of polls
    /// began at or before the store: the page fits. When the chain began after the store, events may be
    /// missing: a cycle.
    @Test func aHoleBeforeAPageNeedsACycle() {
        let scope: Scope = "team-1"
        var stored = ScopeCursor()
        stored.advance(scope, to: 4)
        let own = polled(page(scope, 7...8, head: 8), from: [scope: 6], base: [scope: 4])
        guard case .apply(let events, _) = SyncEngine.merge([own], onto: stored) else {
            Issue.record("expected events to apply")
            return
        }
        #expect(events.map(\.seq) == [7, 8])
        let hole = polled(page(scope, 7...8, head: 8), from: [scope: 6], base: [scope: 6])
        #expect(SyncEngine.merge([hole], onto: stored) == .cycle)
    }

    /// Pages a cycle already pulled leave nothing to apply.
    @Test func pagesTheStoreHoldsAreKnown() {
        let scope: Scope = "team-1"
        var stored = ScopeCursor()
        stored.advance(scope, to: 9)
        let pages = [polled(page(scope, 3...5, head: 5), from: [scope: 2], base: [scope: 2])]
        #expect(SyncEngine.merge(pages, onto: stored) == .known)
    }
}

@Suite struct ConflictJournalTests {
    @Test func conflictsOpenedAndResolvedAreJournaledByStream() {
        let entries = SyncJournal.entries(conflictsWere: ["note:1", "note:2"], are: ["note:2", "note:4", "note:3"])
        #expect(entries.map(\.kind) == ["conflict.open", "conflict.open", "conflict.resolved"])
        #expect(entries.map(\.detail) == ["note:3", "note:4", "note:1"])
        #expect(SyncJournal.entries(conflictsWere: ["note:1"], are: ["note:1"]).isEmpty)
    }
}
