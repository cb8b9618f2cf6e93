import SyncEventStoreTestSupport
import Testing

@testable import SyncEngine

/// The latency-first push of `SyncScheduler`: a write is pushed at once when no push runs, writes made
/// during a push go together in the next one, and the rate bound (`pushBurst` back to back, then one per
/// `minPushInterval`) bounds how often a device pushes.
@Suite struct PushCoalescingTests {
    typealias Scheduler = SyncScheduler<ManualInstant>
    let t0 = ManualInstant.zero

    func at(_ milliseconds: Int) -> ManualInstant { t0.advanced(by: .milliseconds(milliseconds)) }

    @Test func anIdleWriteIsPushedAtOnce() {
        var scheduler = Scheduler()
        #expect(scheduler.trigger(.localWrite, now: t0) == .startCycle)
        #expect(scheduler.phase == .running && scheduler.lastStart == t0)
    }

    @Test func writesDuringAPushGoTogetherInExactlyOneNextPush() {
        var scheduler = Scheduler(minPushInterval: .milliseconds(50), pushBurst: 1)
        var random = SplitMix64(seed: 1)
        #expect(scheduler.trigger(.localWrite, now: t0) == .startCycle)
        for milliseconds in stride(from: 5, to: 80, by: 5) {
            #expect(scheduler.trigger(.localWrite, now: at(milliseconds)) == .none)
        }
        // The push took longer than the bound: the next starts as it ends, one for all the writes.
        #expect(scheduler.cycleFinished(failure: nil, now: at(80), random: &random) == .startCycle)
        #expect(scheduler.cycleFinished(failure: nil, now: at(90), random: &random) == .none)
        #expect(scheduler.phase == .idle)
    }

    @Test func aPushSoonerThanTheBoundAfterTheLastWaitsForIt() {
        var scheduler = Scheduler(minPushInterval: .milliseconds(50), pushBurst: 1)
        var random = SplitMix64(seed: 1)
        #expect(scheduler.trigger(.localWrite, now: t0) == .startCycle)
        #expect(scheduler.trigger(.localWrite, now: at(10)) == .none)
        #expect(scheduler.cycleFinished(failure: nil, now: at(20), random: &random) == .wake(at: at(50)))
        // More writes meanwhile join it; they never postpone it.
        #expect(scheduler.trigger(.localWrite, now: at(30)) == .wake(at: at(50)))
        #expect(scheduler.tick(now: at(40)) == .wake(at: at(50)))
        #expect(scheduler.tick(now: at(50)) == .startCycle)
        #expect(scheduler.cycleFinished(failure: nil, now: at(55), random: &random) == .none)
        // A write long after the last push goes at once.
        #expect(scheduler.trigger(.localWrite, now: at(200)) == .startCycle)
    }

    /// A device typing a key every 7 ms for two seconds, each push taking 3 ms: once the burst is spent,
    /// starts are the bound apart; over any span, at most `pushBurst + span / interval` start; every
    /// write is in a push that starts after it.
    @Test(arguments: [1, 4])
    func theRateBoundHoldsWhileTyping(burst: Int) {
        let starts = Self.typing(Scheduler(minPushInterval: .milliseconds(50), pushBurst: burst), every: 7, for: 2_000)
        #expect(starts.count >= 38 + burst - 1 && starts.count <= 41 + burst, "\(starts.count) pushes in 2 s")
        // Once the burst is spent (the push after it may come sooner), starts are the bound apart.
        for (earlier, later) in zip(starts.dropFirst(burst), starts.dropFirst(burst + 1)) {
            #expect(earlier.duration(to: later) >= .milliseconds(50))
        }
        for (index, start) in starts.enumerated() {
            let within = starts[index...].prefix { start.duration(to: $0) < .milliseconds(200) }.count
            #expect(within <= burst + 4, "\(within) pushes within 200 ms of \(start)")
        }
        #expect(starts.last! >= ManualInstant.zero.advanced(by: .milliseconds(1_995)), "the last write was pushed")
    }

    /// Writes now and then (a few a second), even two close together, never wait for the bound.
    @Test func occasionalWritesNeverWait() {
        var scheduler = Scheduler(minPushInterval: .milliseconds(50))
        var random = SplitMix64(seed: 3)
        var now = 0
        for gap in [300, 20, 400, 10, 15, 500, 30, 250] {
            now += gap
            #expect(scheduler.trigger(.localWrite, now: at(now)) == .startCycle, "a write at \(now) ms")
            #expect(scheduler.cycleFinished(failure: nil, now: at(now + 4), random: &random) == .none)
            now += 4
        }
    }

    /// The push starts of a device writing every `every` ms until `until` ms, each push taking 3 ms.
    static func typing(_ scheduler: Scheduler, every: Int, for until: Int) -> [ManualInstant] {
        var scheduler = scheduler
        let t0 = ManualInstant.zero
        var random = SplitMix64(seed: 1)
        var starts: [ManualInstant] = []
        var wake: ManualInstant? = nil
        var runningUntil: ManualInstant? = nil
        for millisecond in 0...until + 100 {
            let now = t0.advanced(by: .milliseconds(millisecond))
            if let end = runningUntil, end <= now {
                runningUntil = nil
                let action = scheduler.cycleFinished(failure: nil, now: now, random: &random)
                if action == .startCycle {
                    starts.append(now)
                    runningUntil = now.advanced(by: .milliseconds(3))
                } else if case .wake(let at) = action {
                    wake = at
                }
            }
            if let due = wake, due <= now, runningUntil == nil {
                wake = nil
                if scheduler.tick(now: now) == .startCycle {
                    starts.append(now)
                    runningUntil = now.advanced(by: .milliseconds(3))
                }
            }
            guard millisecond < until, millisecond % every == 0 else { continue }
            switch scheduler.trigger(.localWrite, now: now) {
            case .startCycle:
                starts.append(now)
                runningUntil = now.advanced(by: .milliseconds(3))
            case .wake(let at): wake = at
            case .none: break
            }
        }
        return starts
    }

    @Test func backoffAfterAFailureStillHoldsWrites() {
        var scheduler = Scheduler(backoff: BackoffPolicy(base: .seconds(1), cap: .seconds(8)))
        var random = SplitMix64(seed: 7)
        #expect(scheduler.trigger(.localWrite, now: t0) == .startCycle)
        let action = scheduler.cycleFinished(
            failure: .retryable(reason: "HTTP 503", retryAfter: .seconds(2)), now: at(10), random: &random)
        #expect(action == .wake(at: at(2010)))
        #expect(scheduler.trigger(.localWrite, now: at(20)) == .wake(at: at(2010)))
        #expect(scheduler.tick(now: at(2010)) == .startCycle)
    }

    @Test func aDebounceStillDelaysWrites() {
        var scheduler = Scheduler(debounce: .milliseconds(250), minPushInterval: .milliseconds(50), pushBurst: 1)
        #expect(scheduler.trigger(.localWrite, now: t0) == .wake(at: at(250)))
        #expect(scheduler.trigger(.localWrite, now: at(100)) == .wake(at: at(250)))
        #expect(scheduler.tick(now: at(250)) == .startCycle)
    }

    @Test func anExplicitRequestIsNotBoundByTheRate() {
        var scheduler = Scheduler(minPushInterval: .seconds(10), pushBurst: 1)
        var random = SplitMix64(seed: 1)
        #expect(scheduler.trigger(.localWrite, now: t0) == .startCycle)
        #expect(scheduler.cycleFinished(failure: nil, now: at(5), random: &random) == .none)
        #expect(scheduler.trigger(.localWrite, now: at(6)) == .wake(at: at(10_000)))
        #expect(scheduler.trigger(.explicit, now: at(7)) == .startCycle)
        // An explicit request during a push is not held back by a write after it.
        #expect(scheduler.trigger(.explicit, now: at(8)) == .none)
        #expect(scheduler.trigger(.localWrite, now: at(9)) == .none)
        #expect(scheduler.cycleFinished(failure: nil, now: at(10), random: &random) == .startCycle)
    }

    /// An authentication failure from outside a cycle (the live stream's `auth.expired`) pauses as a cycle's
    /// would, at once or when the running cycle ends.
    @Test func anAuthenticationFailureOutsideACyclePauses() {
        let expired = SyncFailure.authentication(code: "auth.expired", message: "the token has expired")
        var random = SplitMix64(seed: 1)
        var idle = Scheduler()
        idle.pause(failure: expired)
        #expect(idle.phase == .paused && idle.lastFailure == expired)
        #expect(idle.trigger(.localWrite, now: t0) == .none)
        #expect(idle.trigger(.explicit, now: t0) == .none)
        #expect(idle.trigger(.tokenRefreshed, now: t0) == .startCycle)
        var running = Scheduler()
        #expect(running.trigger(.explicit, now: t0) == .startCycle)
        running.pause(failure: expired)
        #expect(running.trigger(.localWrite, now: at(1)) == .none)
        #expect(running.cycleFinished(failure: nil, now: at(2), random: &random) == .none)
        #expect(running.phase == .paused)
        #expect(running.trigger(.tokenRefreshed, now: at(3)) == .startCycle)
    }
}
