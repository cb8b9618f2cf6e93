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

    @Test func timeoutsAndUnregisterTakeTheContinuationBack() {
        var state = LongPollState<String>()
        let id = state.register(["a"])!
        #expect(state.wait(id, "w") == .suspended)
        #expect(state.stopWaiting(id) == "w")
        #expect(state.wait(id, "w2") == .suspended)
        #expect(state.unregister(id) == "w2")
        #expect(state.waiters.isEmpty)
    }

    /// The hub's wait races its deadline: when the timeout (or a cancellation) takes the continuation back
    /// before the waiter has suspended, the wait that follows must not suspend, since nothing would ever
    /// resume it. This hung a long-poll, and the test waiting on it, about once a full test run on a loaded
    /// machine.
    @Test func aTimeoutBeforeTheWaitSuspendsDoesNotStrandIt() {
        var state = LongPollState<String>()
        let id = state.register(["a"])!
        #expect(state.stopWaiting(id) == nil)
        #expect(state.wait(id, "w") == .resumeNow)
        #expect(state.wait(id, "w2") == .suspended)
        #expect(state.stopWaiting(id) == "w2")
    }

    /// `parked` counts the waiters holding a continuation, whichever way it is taken back.
    @Test func parkedCountsSuspendedWaitersOnly() {
        var state = LongPollState<String>()
        let a = state.register(["a"])!
        let b = state.register(["b"])!
        let c = state.register(["c"])!
        #expect(state.parked == 0)
        #expect(state.signal(["a"]).isEmpty)
        #expect(state.wait(a, "wa") == .resumeNow)
        #expect(state.parked == 0)
        #expect(state.wait(a, "wa") == .suspended)
        #expect(state.wait(b, "wb") == .suspended)
        #expect(state.wait(c, "wc") == .suspended)
        #expect(state.parked == 3)
        #expect(state.signal(["a"]) == ["wa"])
        #expect(state.stopWaiting(b) == "wb")
        #expect(state.stopWaiting(b) == nil)
        #expect(state.parked == 1)
        #expect(state.unregister(c) == "wc")
        #expect(state.unregister(b) == nil)
        #expect(state.parked == 0)
        #expect(state.wait(a, "wa2") == .suspended)
        #expect(state.close() == ["wa2"])
        #expect(state.parked == 0)
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
