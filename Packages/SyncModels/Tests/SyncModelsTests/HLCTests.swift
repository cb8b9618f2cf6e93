import PropertyBased
import SyncTestSupport
import Testing

@testable import SyncModels

@Suite(.onOwnThreads) struct HLCTests {
    /// One step of a random clock history, decoded from four random integers.
    struct Step {
        var isReceive: Bool
        var wallDelta: Int64
        var remoteOffset: Int64
        var remoteCounter: UInt16

        init(_ raw: Int) {
            var value = UInt64(bitPattern: Int64(raw))
            isReceive = value & 1 == 1
            value >>= 1
            wallDelta = Int64(value % 4001) - 2000  // the wall clock may jump back
            value /= 4001
            remoteOffset = Int64(value % 400_001) - 100_000  // up to 300 s ahead of the wall: past the drift cap
            value /= 400_001
            remoteCounter = UInt16(truncatingIfNeeded: value)
        }
    }

    @Test func monotonicUnderRandomSendReceiveInterleavings() async {
        await propertyCheck(count: 2000, input: Gen.int().array(of: 1...300)) { raws in
            var clock = HLCState(node: 7, maxForwardDrift: 60_000)
            var wall: Int64 = 1_700_000_000_000
            var maxWall = wall
            var previous = HLCTimestamp.zero
            for step in raws.map(Step.init) {
                wall = max(0, wall + step.wallDelta)
                maxWall = max(maxWall, wall)
                let issued: HLCTimestamp
                if step.isReceive {
                    let remote = HLCTimestamp(
                        physical: UInt64(max(0, wall + step.remoteOffset)), counter: step.remoteCounter, node: 9)
                    let clampedBefore = clock.clampedCount
                    issued = clock.receive(remote, wall: UInt64(wall))
                    if clock.clampedCount == clampedBefore {
                        #expect(issued > remote, "a receive moves past the remote timestamp")
                    } else {
                        #expect(step.remoteOffset > 60_000, "only far-future timestamps are clamped")
                    }
                } else {
                    issued = clock.send(wall: UInt64(wall))
                }
                #expect(issued > previous, "strictly monotonic")
                #expect(issued.node == 7)
                // Never dragged further ahead than the drift cap (plus counter carries, one ms each).
                #expect(issued.physical <= UInt64(maxWall) + 60_000 + UInt64(raws.count))
                #expect((issued.description < previous.description) == (issued < previous))
                previous = issued
            }
        }
    }

    @Test func sendFollowsWallClockAndCountsWithinOneMillisecond() {
        var clock = HLCState(node: 1)
        #expect(clock.send(wall: 1000) == HLCTimestamp(physical: 1000, counter: 0, node: 1))
        #expect(clock.send(wall: 1000) == HLCTimestamp(physical: 1000, counter: 1, node: 1))
        #expect(clock.send(wall: 999) == HLCTimestamp(physical: 1000, counter: 2, node: 1))
        #expect(clock.send(wall: 1001) == HLCTimestamp(physical: 1001, counter: 0, node: 1))
    }

    @Test func receiveTakesTheLargerClock() {
        var clock = HLCState(node: 1)
        _ = clock.send(wall: 1000)
        let merged = clock.receive(HLCTimestamp(physical: 1500, counter: 4, node: 2), wall: 1000)
        #expect(merged == HLCTimestamp(physical: 1500, counter: 5, node: 1))
    }

    @Test func farFutureRemoteIsClampedAndCounted() {
        var clock = HLCState(node: 1, maxForwardDrift: 1000)
        let merged = clock.receive(HLCTimestamp(physical: 10_000_000, counter: 0, node: 2), wall: 5000)
        #expect(clock.clampedCount == 1)
        #expect(merged.physical == 6000)
        #expect(clock.send(wall: 5001) > merged)
    }

    @Test func counterOverflowCarriesIntoPhysicalTime() {
        var clock = HLCState(node: 1, last: HLCTimestamp(physical: 10, counter: .max, node: 1))
        #expect(clock.send(wall: 5) == HLCTimestamp(physical: 11, counter: 0, node: 1))
    }

    @Test func resumesAfterPersistedTimestamp() {
        var clock = HLCState(node: 1, last: HLCTimestamp(physical: 5000, counter: 3, node: 99))
        #expect(clock.send(wall: 10) == HLCTimestamp(physical: 5000, counter: 4, node: 1))
    }

    @Test func stringFormMatchesProtocolAndRoundTrips() throws {
        let stamp = HLCTimestamp(physical: 0x18f_4e3a_5b7c, counter: 3, node: 0x6d2c_1f0e_9a8b_4c7d)
        #expect(stamp.description == "0000018f4e3a5b7c:0003:6d2c1f0e9a8b4c7d")
        #expect(try HLCTimestamp(stamp.description) == stamp)
        for bad in ["", "0:0:0", "0000018f4e3a5b7c:0003", "ffffffffffffffff:0000:0000000000000000", "zz"] {
            #expect(throws: SyncModelsError.self) { try HLCTimestamp(bad) }
        }
    }

    @Test func threadSafeClockIssuesUniqueIncreasingTimestamps() async {
        let clock = HybridLogicalClock(replica: ReplicaID(high: 3, low: 4), wallClock: { 42 })
        let stamps = await withTaskGroup(of: [HLCTimestamp].self) { group in
            for _ in 0..<4 { group.addTask { (0..<500).map { _ in clock.now() } } }
            var all: [HLCTimestamp] = []
            for await part in group {
                #expect(part == part.sorted())
                all += part
            }
            return all
        }
        #expect(Set(stamps).count == 2000)
    }
}
