import PropertyBased
import SyncEventStoreTestSupport
import Testing

@testable import SyncEngine

@Suite struct LiveSchedulerTests {
    typealias Live = LiveScheduler<ManualInstant>
    let t0 = ManualInstant.zero
    let backoff = BackoffPolicy(base: .seconds(1), cap: .seconds(8))

    func at(_ milliseconds: Int) -> ManualInstant { t0.advanced(by: .milliseconds(milliseconds)) }

    /// A live scheduler subscribed since `t0`.
    func connected() -> Live {
        var live = Live(backoff: backoff)
        _ = live.setOpen(true, now: t0)
        _ = live.caughtUp(now: t0)
        _ = live.subscribed(now: t0)
        return live
    }

    @Test func subscribesOnceACycleHasReachedTheHead() {
        var live = Live(backoff: backoff)
        #expect(live.phase == .closed)
        #expect(live.setOpen(true, now: t0) == .catchUp)
        #expect(live.phase == .awaitingHead(notBefore: nil))
        #expect(live.setOpen(true, now: t0) == .none, "already open")
        #expect(live.caughtUp(now: at(5)) == .connect)
        #expect(live.phase == .connecting && live.isConnecting && !live.isConnected)
        #expect(live.subscribed(now: at(6)) == .none)
        #expect(live.isConnected && live.phase == .connected(since: at(6)))
        #expect(live.caughtUp(now: at(7)) == .none, "a later cycle changes nothing")
        #expect(!live.longPolls)
    }

    @Test func closingDropsTheConnectionAtOnceAndIgnoresItsEnd() {
        var random = SplitMix64(seed: 1)
        var live = connected()
        #expect(live.setOpen(false, now: at(10)) == .disconnect)
        #expect(live.phase == .closed)
        #expect(live.ended(.ended, now: at(11), random: &random) == .none)
        #expect(live.caughtUp(now: at(12)) == .none)
        #expect(live.tick(now: at(13)) == .none)
        #expect(live.setOpen(false, now: at(14)) == .none)
        #expect(live.setOpen(true, now: at(15)) == .catchUp)
    }

    @Test func anEndedStreamSubscribesAgainAfterAJitteredBackoffThatGrowsWhileConnectionsAreShort() {
        var random = SplitMix64(seed: 2)
        var live = connected()
        var now = at(1000)
        for attempt in 0..<5 {
            guard case .wake(let until) = live.ended(.ended, now: now, random: &random) else {
                Issue.record("expected a wake-up")
                return
            }
            #expect(now.duration(to: until) <= backoff.ceiling(attempt: attempt), "attempt \(attempt)")
            #expect(live.phase == .backingOff(until: until))
            #expect(live.caughtUp(now: now) == .wake(at: until), "a cycle does not cut the wait short")
            if until > now { #expect(live.tick(now: now) == .wake(at: until)) }
            #expect(live.tick(now: until) == .connect)
            #expect(live.consecutiveFailures == attempt + 1)
            _ = live.subscribed(now: until)
            now = until.advanced(by: .seconds(1))
        }
        // A connection that lasted `healthyAfter` ends as the first failure.
        _ = live.ended(.ended, now: now, random: &random)
        _ = live.tick(now: now.advanced(by: .seconds(60)))
        _ = live.subscribed(now: now.advanced(by: .seconds(60)))
        _ = live.ended(.ended, now: now.advanced(by: .seconds(71)), random: &random)
        #expect(live.consecutiveFailures == 1)
    }

    @Test func aRefusedSubscriptionBacksOffAndHonoursRetryAfter() {
        var random = SplitMix64(seed: 3)
        var live = Live(backoff: backoff)
        _ = live.setOpen(true, now: t0)
        _ = live.caughtUp(now: t0)
        let failure = SyncFailure.retryable(reason: "429", retryAfter: .seconds(30))
        #expect(live.ended(.failed(failure), now: t0, random: &random) == .wake(at: at(30_000)))
        #expect(live.tick(now: at(30_000)) == .connect)
    }

    @Test func behindAndGapsCatchUpThenSubscribeAgainAfterABackoffWhenInARow() {
        var random = SplitMix64(seed: 4)
        var live = connected()
        #expect(live.ended(.behind, now: at(100), random: &random) == .catchUp)
        #expect(live.phase == .awaitingHead(notBefore: nil), "the first one subscribes as soon as caught up")
        #expect(live.caughtUp(now: at(150)) == .connect)
        _ = live.subscribed(now: at(160))
        #expect(live.ended(.gap, now: at(200), random: &random) == .catchUp)
        guard case .awaitingHead(let notBefore?) = live.phase else {
            Issue.record("a second one in a row waits: \(live.phase)")
            return
        }
        #expect(at(200).duration(to: notBefore) <= backoff.ceiling(attempt: 0))
        if notBefore > at(200) {
            #expect(live.caughtUp(now: at(200)) == .wake(at: notBefore))
            #expect(live.tick(now: notBefore) == .connect)
        } else {
            #expect(live.caughtUp(now: at(200)) == .connect)
        }
        _ = live.subscribed(now: notBefore)
        #expect(live.ended(.failed(.resetRequired), now: notBefore, random: &random) == .catchUp)
    }

    @Test func anAuthenticationFailurePausesAndTheStreamReturnsAfterTheNextCycle() {
        var random = SplitMix64(seed: 5)
        var live = connected()
        let expired = SyncFailure.authentication(code: "auth.expired", message: "the token has expired")
        #expect(live.ended(.failed(expired), now: at(10), random: &random) == .pause(expired))
        #expect(live.phase == .awaitingHead(notBefore: nil))
        #expect(live.tick(now: at(60_000)) == .none, "nothing but a cycle brings it back")
        #expect(live.caughtUp(now: at(60_000)) == .connect)
    }

    @Test func withoutAStreamItLongPollsUntilOpenedAgain() {
        var random = SplitMix64(seed: 6)
        var live = Live(backoff: backoff)
        _ = live.setOpen(true, now: t0)
        _ = live.caughtUp(now: t0)
        let unsupported = SyncFailure.permanent(code: SyncFailure.transportUnsupported, message: "HTTP 404")
        #expect(live.ended(.failed(unsupported), now: t0, random: &random) == .none)
        #expect(live.longPolls && live.phase == .polling)
        #expect(live.caughtUp(now: at(1)) == .none && live.tick(now: at(2)) == .none)
        // In the background it does not long-poll; back in the foreground it tries the stream again.
        #expect(live.setOpen(false, now: at(3)) == .none && !live.longPolls)
        #expect(live.setOpen(true, now: at(4)) == .catchUp)
        var off = Live(stream: false, backoff: backoff)
        #expect(off.setOpen(true, now: t0) == .none && off.longPolls)
        #expect(off.caughtUp(now: t0) == .none)
    }

    @Test func otherPermanentFailuresBackOff() {
        var random = SplitMix64(seed: 7)
        var live = connected()
        let invalid = SyncFailure.permanent(code: "request.invalid", message: "bad cursor")
        guard case .wake = live.ended(.failed(invalid), now: at(10), random: &random) else {
            Issue.record("expected a backoff")
            return
        }
    }

    /// Whatever happens, the driver never holds two connections, closes only an open one, and every
    /// connection it opens it is asked to close or is told has ended.
    @Test func neverTwoConnectionsAtOnceUnderRandomEvents() async {
        await propertyCheck(count: 500, input: Gen.int(in: 0...11).array(of: 1...200)) { steps in
            var live = Live(backoff: backoff)
            var random = SplitMix64(seed: UInt64(steps.count))
            var now = ManualInstant.zero
            var open = false
            for step in steps {
                now = now.advanced(by: .milliseconds(step * 131))
                let action: Live.Action
                switch step {
                case 0: action = live.setOpen(true, now: now)
                case 1: action = live.setOpen(false, now: now)
                case 2, 3: action = live.caughtUp(now: now)
                case 4: action = live.tick(now: now)
                case 5: action = open ? live.subscribed(now: now) : .none
                default:
                    // The stream ends only while a connection is open (the driver closes it first).
                    guard open else { continue }
                    open = false
                    let ends: [Live.End] = [
                        .ended, .behind, .gap, .failed(.retryable(reason: "x", retryAfter: nil)),
                        .failed(.authentication(code: "auth.expired", message: "")),
                        .failed(.permanent(code: SyncFailure.transportUnsupported, message: "")),
                    ]
                    action = live.ended(ends[step - 6], now: now, random: &random)
                }
                switch action {
                case .connect:
                    #expect(!open, "a second connection while one is open")
                    open = true
                case .disconnect:
                    #expect(open, "closing a connection that is not open")
                    open = false
                default: break
                }
                #expect(live.isConnecting == open)
            }
        }
    }
}
