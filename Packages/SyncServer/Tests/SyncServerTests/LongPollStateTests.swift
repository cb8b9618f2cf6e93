import SyncModels
import SyncServerTesting
import SyncTestSupport
import Testing

@testable import SyncServer

@Suite struct LongPollStateTests {
    @Test func aSignalBeforeTheWaitIsNotLost() {
        var state = LongPollState<String>()
        let id = state.register(["a"])!
        #expect(state.signal(["a"]).isEmpty)
        #expect(state.wait(id, "c1") == .resumeNow)
        #expect(state.wait(id, "c2") == .suspended)
    }

    @Test func signalsWakeOnlyWaitersOfTheirScopes() {
        var state = LongPollState<String>()
        let a = state.register(["a"])!
        let b = state.register(["b", "c"])!
        #expect(state.wait(a, "wa") == .suspended)
        #expect(state.wait(b, "wb") == .suspended)
        #expect(state.signal(["c"]) == ["wb"])
        #expect(state.signal(["c"]).isEmpty)
        #expect(state.signalAll() == ["wa"])
    }

    @Test func cancellationAndUnregisterTakeTheContinuationBack() {
        var state = LongPollState<String>()
        let id = state.register(["a"])!
        #expect(state.wait(id, "w") == .suspended)
        #expect(state.stopWaiting(id) == "w")
        #expect(state.wait(id, "w2") == .suspended)
        #expect(state.unregister(id) == "w2")
        #expect(state.waiters.isEmpty)
    }

    @Test func aWaiterCancelledBeforeItSuspendsDoesNotSuspend() {
        var state = LongPollState<String>()
        let id = state.register(["a"])!
        #expect(state.stopWaiting(id) == nil)
        #expect(state.wait(id, "w") == .resumeNow)
    }

    @Test func deadlinesEndOnlyTheWaitsThatAreDueEarliestFirst() {
        var state = LongPollState<String>()
        let start = ContinuousClock.now
        let ids = (0..<5).map { _ in state.register(["a"])! }
        // Deadlines out of order: 3 s, 1 s, 5 s, 2 s, 4 s.
        for (id, seconds) in zip(ids, [3, 1, 5, 2, 4]) {
            #expect(state.wait(id, "w\(seconds)", deadline: start + .seconds(seconds)) == .suspended)
        }
        let claimed = state.claimExpiring()
        let claimedAgain = state.claimExpiring()
        #expect(claimed && !claimedAgain)
        let first = state.expire(now: start + .milliseconds(2500))
        #expect(first.woken == ["w1", "w2"])
        #expect(first.next == start + .seconds(3))
        // A signalled waiter's deadline is skipped; one that waits again gets its new deadline only.
        #expect(state.signal(["a"]).sorted() == ["w3", "w4", "w5"])
        #expect(state.wait(ids[2], "again", deadline: start + .seconds(6)) == .suspended)
        let second = state.expire(now: start + .milliseconds(5500))
        #expect(second.woken.isEmpty)
        #expect(second.next == start + .seconds(6))
        #expect(state.expiring)
        let last = state.expire(now: start + .seconds(6))
        #expect(last.woken == ["again"])
        #expect(last.next == nil)
        // Nothing left: the expiring task stops, and the next wait with a deadline claims a new one.
        #expect(!state.expiring)
        #expect(state.wait(ids[0], "later", deadline: start + .seconds(9)) == .suspended)
        let reclaimed = state.claimExpiring()
        #expect(reclaimed)
    }

    @Test func closingDropsDeadlines() {
        var state = LongPollState<String>()
        let id = state.register(["a"])!
        #expect(state.wait(id, "w", deadline: .now + .seconds(30)) == .suspended)
        let claimed = state.claimExpiring()
        #expect(claimed)
        #expect(state.close() == ["w"])
        let after = state.expire(now: .now)
        #expect(after.woken.isEmpty && after.next == nil && !state.expiring)
    }

    @Test func theDeadlineHeapPopsInOrder() {
        var heap = DeadlineHeap()
        let start = ContinuousClock.now
        var random = SplitMix64(seed: 7)
        let offsets = (0..<500).map { _ in Int(random.next() % 10_000) }
        for (id, offset) in offsets.enumerated() { heap.push(start + .milliseconds(offset), id) }
        var popped: [ContinuousClock.Instant] = []
        while let top = heap.first {
            popped.append(top.deadline)
            heap.pop()
        }
        #expect(popped == offsets.sorted().map { start + .milliseconds($0) })
    }

    @Test func closingWakesEveryoneAndRefusesNewWaiters() {
        var state = LongPollState<String>()
        let id = state.register(["a"])!
        #expect(state.wait(id, "w") == .suspended)
        #expect(state.close() == ["w"])
        #expect(state.register(["a"]) == nil)
        #expect(state.wait(id, "again") == .resumeNow)
    }
}

@Suite struct ConcurrencyLedgerTests {
    @Test func capsEachKeySeparately() {
        var ledger = ConcurrencyLedger(limit: 2)
        let first = ledger.acquire("a")
        let second = ledger.acquire("a")
        let third = ledger.acquire("a")
        let other = ledger.acquire("b")
        #expect(first && second && !third && other)
        ledger.release("a")
        let again = ledger.acquire("a")
        #expect(again)
        ledger.release("a")
        ledger.release("a")
        ledger.release("b")
        #expect(ledger.counts.isEmpty)
    }
}
