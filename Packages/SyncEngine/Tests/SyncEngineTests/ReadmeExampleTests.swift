import SyncEngine
import Testing

/// Keeps the README example compiling and working: the body below is the README's code.
@Suite struct ReadmeExampleTests {
    @Test func readmeExampleRuns() {
        // README begins
        var scheduler = SyncScheduler<ContinuousClock.Instant>(debounce: .milliseconds(250))
        let now = ContinuousClock.now
        if case .wake(let at) = scheduler.trigger(.localWrite, now: now) {
            print("sync due in", now.duration(to: at))  // 0.25 seconds
        }
        // README ends
        #expect(scheduler.phase == .scheduled(at: now.advanced(by: .milliseconds(250))))
    }
}
