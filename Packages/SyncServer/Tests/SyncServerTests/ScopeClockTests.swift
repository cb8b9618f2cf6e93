import Logging
import PostgresNIO
import Prometheus
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

    /// A commit is signalled once, whichever comes first: its notification through LISTEN or the
    /// committing push's own signal. A second signal would give the waiters the first woke, not all reading
    /// yet, a later epoch than the read they should share.
    @Test func aCommitIsSignalledOnceWhicheverSignalComesFirst() throws {
        let metrics = ServerMetrics(factory: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
        // Never run: the hub's signals need no connection.
        let client = PostgresClient(
            configuration: .init(
                host: "127.0.0.1", port: 1, username: "nobody", password: nil, database: nil, tls: .disable))
        let hub = LongPollHub(client: client, logger: Logger(label: "test"), metrics: metrics)
        hub.signal(a, head: 5)
        let woken = hub.epoch([a])
        hub.signal(heads: [a: 5])
        #expect(hub.epoch([a]) == woken, "the push's own signal after its notification")
        hub.signal(heads: [a: 6, b: 1])
        let next = hub.epoch([a, b])
        #expect(next != hub.epoch([a]) && !woken.covers(hub.epoch([a])))
        hub.signal(a, head: 6)
        hub.signal(b, head: 1)
        #expect(hub.epoch([a, b]) == next, "notifications after the push's own signal")
    }
}
