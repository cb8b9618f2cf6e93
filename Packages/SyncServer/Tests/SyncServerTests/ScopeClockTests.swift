import SyncModels
import Testing

@testable import SyncServer

/// The heads a long-poll may wait at without reading: only those no commit was signalled after.
@Suite struct ScopeClockTests {
    let a = Scope("a")
    let b = Scope("b")
    let now = ContinuousClock.now

    @Test func aHeadReadBeforeASignalIsNotKnown() {
        var clock = ScopeClock()
        let epoch = clock.epoch([a, b])
        // A commit in `a` was signalled while the read ran: what it found of `a` may be stale.
        clock.signal([a])
        clock.learn([a: 5, b: 7], of: [a, b], at: epoch, now: now)
        #expect(clock.knownHeads([a, b], maxAge: .seconds(10), now: now) == nil)
        #expect(clock.knownHeads([b], maxAge: .seconds(10), now: now) == [b: 7])
        // A later signal forgets it; a read after the signal learns again.
        clock.signal([b])
        #expect(clock.knownHeads([b], maxAge: .seconds(10), now: now) == nil)
        clock.learn([a: 6, b: 8], of: [a, b], at: clock.epoch([a, b]), now: now)
        #expect(clock.knownHeads([a, b], maxAge: .seconds(10), now: now) == [a: 6, b: 8])
    }

    @Test func aScopeWithoutARowIsAtZeroAndHeadsAge() {
        var clock = ScopeClock()
        clock.learn([:], of: [a], at: clock.epoch([a]), now: now)
        #expect(clock.knownHeads([a], maxAge: .seconds(10), now: now) == [a: 0])
        #expect(clock.knownHeads([a], maxAge: .seconds(10), now: now + .seconds(11)) == nil)
    }

    @Test func signalAllForgetsEverythingAndOutdatesReadsInFlight() {
        var clock = ScopeClock()
        let before = clock.epoch([a])
        clock.learn([a: 3], of: [a], at: before, now: now)
        clock.signalAll()
        #expect(clock.knownCount == 0)
        clock.learn([a: 3], of: [a], at: before, now: now)
        #expect(clock.knownHeads([a], maxAge: .seconds(10), now: now) == nil)
        #expect(!before.covers(clock.epoch([a])))
        #expect(clock.epoch([a]).covers(before))
    }

    @Test func overlappingReadsOfOneEpochKeepTheHigherHead() {
        var clock = ScopeClock()
        let epoch = clock.epoch([a])
        clock.learn([a: 9], of: [a], at: epoch, now: now)
        clock.learn([a: 8], of: [a], at: epoch, now: now)
        #expect(clock.knownHeads([a], maxAge: .seconds(10), now: now) == [a: 9])
    }
}
