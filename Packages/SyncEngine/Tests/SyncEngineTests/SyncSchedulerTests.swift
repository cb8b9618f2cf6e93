import PropertyBased
import SyncEventStoreTestSupport
import Testing

@testable import SyncEngine

@Suite struct SyncSchedulerTests {
    typealias Scheduler = SyncScheduler<ManualInstant>
    let t0 = ManualInstant.zero

    @Test func localWritesAreDebouncedIntoOneCycle() {
        var scheduler = Scheduler(debounce: .milliseconds(250))
        #expect(scheduler.trigger(.localWrite, now: t0) == .wake(at: t0.advanced(by: .milliseconds(250))))
        // A second write 100 ms later keeps the earlier due time: writes never postpone a sync forever.
        let later = t0.advanced(by: .milliseconds(100))
        #expect(scheduler.trigger(.localWrite, now: later) == .wake(at: t0.advanced(by: .milliseconds(250))))
        #expect(
            scheduler.tick(now: t0.advanced(by: .milliseconds(200))) == .wake(at: t0.advanced(by: .milliseconds(250))))
        #expect(scheduler.tick(now: t0.advanced(by: .milliseconds(250))) == .startCycle)
        #expect(scheduler.phase == .running)
    }

    @Test func explicitConnectivityAndIntervalStartAtOnce() {
        for trigger in [SyncTrigger.explicit, .connectivity, .interval] {
            var scheduler = Scheduler()
            #expect(scheduler.trigger(trigger, now: t0) == .startCycle)
        }
    }

    @Test func triggersDuringACycleRunOneMoreCycleAfterIt() {
        var scheduler = Scheduler()
        var random = SplitMix64(seed: 1)
        _ = scheduler.trigger(.explicit, now: t0)
        #expect(scheduler.trigger(.localWrite, now: t0) == .none)
        #expect(scheduler.trigger(.explicit, now: t0) == .none)
        #expect(scheduler.cycleFinished(failure: nil, now: t0, random: &random) == .startCycle)
        #expect(scheduler.cycleFinished(failure: nil, now: t0, random: &random) == .none)
        #expect(scheduler.phase == .idle)
    }

    @Test func retryableFailuresBackOffWithCappedFullJitterAndHonourRetryAfter() {
        var scheduler = Scheduler(backoff: BackoffPolicy(base: .seconds(1), cap: .seconds(8)))
        var random = SplitMix64(seed: 42)
        var now = t0
        _ = scheduler.trigger(.explicit, now: now)
        for attempt in 0..<8 {
            let action = scheduler.cycleFinished(
                failure: .retryable(reason: "HTTP 503", retryAfter: nil), now: now, random: &random)
            guard case .wake(let until) = action else {
                Issue.record("expected a wake-up, got \(action)")
                return
            }
            let wait = now.duration(to: until)
            #expect(wait >= .zero && wait <= .seconds(min(8, 1 << attempt)), "attempt \(attempt) waited \(wait)")
            #expect(scheduler.phase == .backingOff(until: until, attempt: attempt + 1))
            #expect(scheduler.tick(now: until) == .startCycle)
            now = until
        }
        let action = scheduler.cycleFinished(
            failure: .retryable(reason: "429", retryAfter: .seconds(30)), now: now, random: &random)
        #expect(action == .wake(at: now.advanced(by: .seconds(30))), "Retry-After wins over a shorter jitter")
        #expect(scheduler.trigger(.explicit, now: now) == .startCycle, "an explicit request skips the wait")
        #expect(scheduler.cycleFinished(failure: nil, now: now, random: &random) == .none)
        #expect(scheduler.consecutiveFailures == 0)
    }

    @Test func authenticationFailurePausesUntilANewToken() {
        var scheduler = Scheduler()
        var random = SplitMix64(seed: 3)
        _ = scheduler.trigger(.explicit, now: t0)
        let failure = SyncFailure.from(status: 401, code: "auth.expired", message: "token expired")
        #expect(scheduler.cycleFinished(failure: failure, now: t0, random: &random) == .none)
        #expect(scheduler.phase == .paused)
        for trigger in [SyncTrigger.localWrite, .explicit, .interval, .connectivity] {
            #expect(scheduler.trigger(trigger, now: t0) == .none)
        }
        #expect(scheduler.tick(now: t0.advanced(by: .seconds(3600))) == .none)
        #expect(scheduler.trigger(.tokenRefreshed, now: t0) == .startCycle)
    }

    @Test func permanentFailureWaitsForTheNextTrigger() {
        var scheduler = Scheduler()
        var random = SplitMix64(seed: 3)
        _ = scheduler.trigger(.explicit, now: t0)
        let failure = SyncFailure.from(status: 413, code: "request.tooLarge", message: "too big")
        #expect(failure == .permanent(code: "request.tooLarge", message: "too big"))
        #expect(scheduler.cycleFinished(failure: failure, now: t0, random: &random) == .none)
        #expect(scheduler.tick(now: t0.advanced(by: .seconds(3600))) == .none)
        #expect(scheduler.trigger(.localWrite, now: t0) != .none)
    }

    @Test func resetRequiredStartsTheBootstrapCycleAtOnce() {
        var scheduler = Scheduler()
        var random = SplitMix64(seed: 3)
        _ = scheduler.trigger(.explicit, now: t0)
        let failure = SyncFailure.from(status: 410, code: "reset.required", message: "")
        #expect(scheduler.cycleFinished(failure: failure, now: t0, random: &random) == .startCycle)
    }

    @Test func failureClassification() {
        #expect(
            SyncFailure.from(status: 500, code: "x", message: "") == .retryable(reason: "HTTP 500 x", retryAfter: nil))
        #expect(SyncFailure.from(status: 503, code: "server.unavailable", message: "").isRetryable)
        #expect(
            SyncFailure.from(status: 403, code: "scope.forbidden", message: "m")
                == .authentication(code: "scope.forbidden", message: "m"))
        #expect(
            SyncFailure.from(status: 400, code: "request.invalid", message: "m")
                == .permanent(code: "request.invalid", message: "m"))
    }

    /// Whatever happens, at most one cycle runs at a time and every started cycle is reported finished.
    @Test func neverTwoCyclesAtOnceUnderRandomEvents() async {
        await propertyCheck(count: 500, input: Gen.int(in: 0...9).array(of: 1...200)) { steps in
            var scheduler = Scheduler()
            var random = SplitMix64(seed: UInt64(steps.count))
            var now = ManualInstant.zero
            var running = false
            for step in steps {
                now = now.advanced(by: .milliseconds(step * 97))
                let action: Scheduler.Action
                switch step {
                case 0...3: action = scheduler.trigger(SyncTrigger.allCases[step], now: now)
                case 4, 5: action = scheduler.tick(now: now)
                default:
                    guard running else { continue }
                    running = false
                    let failures: [SyncFailure?] = [
                        nil, .retryable(reason: "x", retryAfter: nil),
                        .authentication(code: "auth.expired", message: ""),
                        .permanent(code: "request.invalid", message: ""),
                    ]
                    action = scheduler.cycleFinished(failure: failures[step - 6], now: now, random: &random)
                }
                if action == .startCycle {
                    #expect(!running, "a second cycle started while one was running")
                    running = true
                }
                #expect((scheduler.phase == .running) == running)
            }
        }
    }
}

@Suite struct PushBatchPolicyTests {
    @Test func batchesRespectCountAndBytes() {
        let policy = PushBatchPolicy(maxEvents: 3, maxBytes: 100)
        #expect(policy.batches(sizes: [10, 10, 10, 10]) == [3, 1])
        #expect(policy.batches(sizes: [60, 60, 60]) == [1, 1, 1])
        #expect(policy.batches(sizes: [500, 10]) == [1, 1], "an oversized event still goes, alone")
        #expect(policy.batches(sizes: []) == [])
    }
}
