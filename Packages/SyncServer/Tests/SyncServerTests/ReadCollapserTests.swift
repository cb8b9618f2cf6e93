import SyncModels
import Synchronization
import Testing

@testable import SyncServer

/// Identical concurrent pulls share one read, but never one that started before the signal a caller was
/// woken by.
@Suite struct ReadCollapserTests {
    static let key = ReadCollapser.Key(
        scopes: [Scope("team-1")], cursor: ScopeCursor([Scope("team-1"): 3]), limit: 100, replica: nil, record: false,
        acknowledged: nil)

    static func at(_ version: Int) -> ScopeEpoch { ScopeEpoch(generation: 0, versions: [version]) }

    static func page(_ seq: Int64) -> PullService.Page {
        PullService.Page(
            events: [], cursor: ScopeCursor([Scope("team-1"): seq]), hasMore: false, remaining: 0, stable: [:])
    }

    /// A read that takes until `release` is opened, counting how many times it ran.
    final class SlowRead: Sendable {
        let runs = Mutex(0)
        let gate = Mutex<[CheckedContinuation<Void, Never>]>([])
        let opened = Mutex(false)

        func read(_ seq: Int64) async -> PullService.Page {
            runs.withLock { $0 += 1 }
            await withCheckedContinuation { continuation in
                let open = opened.withLock { $0 }
                if open { continuation.resume() } else { gate.withLock { $0.append(continuation) } }
            }
            return ReadCollapserTests.page(seq)
        }

        func release() {
            opened.withLock { $0 = true }
            for continuation in gate.withLock({ $0 }) { continuation.resume() }
        }
    }

    @Test func concurrentIdenticalReadsAtTheSameEpochShareOne() async throws {
        let collapser = ReadCollapser()
        let slow = SlowRead()
        let first = Task { try await collapser.read(Self.key, epoch: Self.at(5)) { await slow.read(7) } }
        while slow.runs.withLock({ $0 }) == 0 { await Task.yield() }
        // Same key, an epoch the flight covers: joins it.
        let second = Task { try await collapser.read(Self.key, epoch: Self.at(5)) { await slow.read(8) } }
        let third = Task { try await collapser.read(Self.key, epoch: Self.at(4)) { await slow.read(9) } }
        while collapser.sharedReads < 2 { await Task.yield() }
        slow.release()
        #expect(try await first.value.page.cursor == Self.page(7).cursor)
        #expect(try await second.value.page.cursor == Self.page(7).cursor)
        #expect(try await third.value.page.cursor == Self.page(7).cursor)
        #expect(slow.runs.withLock { $0 } == 1)
    }

    @Test func aCallerWokenAfterTheReadBeganReadsAgain() async throws {
        let collapser = ReadCollapser()
        let slow = SlowRead()
        let first = Task { try await collapser.read(Self.key, epoch: Self.at(5)) { await slow.read(7) } }
        while slow.runs.withLock({ $0 }) == 0 { await Task.yield() }
        // A signal came after the flight started (epoch 6): the flight may miss its commit.
        let later = Task { try await collapser.read(Self.key, epoch: Self.at(6)) { await slow.read(8) } }
        // Another key never joins.
        var other = Self.key
        other.cursor = ScopeCursor([Scope("team-1"): 4])
        let different = Task { try await collapser.read(other, epoch: Self.at(5)) { await slow.read(9) } }
        while slow.runs.withLock({ $0 }) < 3 { await Task.yield() }
        slow.release()
        #expect(try await first.value.page.cursor == Self.page(7).cursor)
        #expect(try await later.value.page.cursor == Self.page(8).cursor)
        #expect(try await different.value.page.cursor == Self.page(9).cursor)
        #expect(collapser.sharedReads == 0)
        // A finished read still serves callers its epoch covers (waiters resumed late by the same signal)...
        #expect(
            try await collapser.read(Self.key, epoch: Self.at(6)) { Self.page(10) }.page.cursor == Self.page(8).cursor)
        // ...but not a caller signalled since.
        #expect(
            try await collapser.read(Self.key, epoch: Self.at(7)) { Self.page(11) }.page.cursor == Self.page(11).cursor)
    }

    @Test func finishedReadsAreForgottenAfterTheirRetentionAndFailuresAtOnce() async throws {
        let retention = Duration.seconds(1)
        let collapser = ReadCollapser(retention: retention)
        let started = ContinuousClock.now
        _ = try await collapser.read(Self.key, epoch: Self.at(1)) { Self.page(1) }
        let second = try await collapser.read(Self.key, epoch: Self.at(1)) { Self.page(2) }
        // Shared when it came within the retention (a loaded machine may have paused the test longer).
        if ContinuousClock.now - started < retention { #expect(second.shared) }
        try await Task.sleep(for: retention + .milliseconds(100))
        #expect(
            try await collapser.read(Self.key, epoch: Self.at(1)) { Self.page(3) }.page.cursor == Self.page(3).cursor)
        struct Failure: Error {}
        var other = Self.key
        other.limit = 7
        await #expect(throws: Failure.self) { try await collapser.read(other, epoch: Self.at(1)) { throw Failure() } }
        #expect(try await collapser.read(other, epoch: Self.at(1)) { Self.page(4) }.page.cursor == Self.page(4).cursor)
        // A read that recorded a replica's progress is not kept.
        var recorded = Self.key
        recorded.replica = ReplicaID(high: 1, low: 2)
        recorded.record = true
        _ = try await collapser.read(recorded, epoch: Self.at(1)) { Self.page(5) }
        #expect(try await !collapser.read(recorded, epoch: Self.at(1)) { Self.page(6) }.shared)
        // Nor is a plain pull's (it must see what is in the database when it arrives).
        var plain = Self.key
        plain.record = true
        _ = try await collapser.read(plain, epoch: Self.at(1)) { Self.page(7) }
        #expect(try await !collapser.read(plain, epoch: Self.at(1)) { Self.page(8) }.shared)
    }

    /// With more reads in flight than the capacity (a saturated database), finished reads are still pruned,
    /// once per `capacity` reads at most, and kept reads stay within those in flight plus one and a half
    /// capacities.
    @Test func finishedReadsArePrunedWhileManyAreInFlight() async throws {
        let collapser = ReadCollapser(retention: .seconds(60), capacity: 8)
        let slow = SlowRead()
        func key(_ cursor: Int64) -> ReadCollapser.Key {
            var key = Self.key
            key.cursor = ScopeCursor([Scope("team-1"): cursor])
            return key
        }
        let blocked = (0..<20).map { index in
            Task { try await collapser.read(key(Int64(index)), epoch: Self.at(1)) { await slow.read(1) } }
        }
        while slow.runs.withLock({ $0 }) < 20 { await Task.yield() }
        var most = 0
        for index in 100..<400 {
            _ = try await collapser.read(key(Int64(index)), epoch: Self.at(1)) { Self.page(2) }
            most = max(most, collapser.keptReads)
        }
        #expect(most <= 20 + 8 / 2 + 8, "kept \(most)")
        #expect(collapser.prunes <= (20 + 300) / 8 + 1, "a prune walks every read: not one per read")
        slow.release()
        for task in blocked { _ = try await task.value }
        #expect(collapser.sharedReads == 0)
    }
}
