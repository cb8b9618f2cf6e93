import Foundation
import PropertyBased
import SyncCRDT
import SyncModels
import SyncTestSupport
import Testing

@Suite(.shrinking(false), .onOwnThreads) struct RegisterTests {
    static func stamp(_ physical: UInt64, _ replicaIndex: Int) -> HLCTimestamp {
        HLCTimestamp(physical: physical, counter: 0, node: replica(replicaIndex).high)
    }

    @Test func lastWriterWinsByClockThenReplica() {
        var a = LWWRegister<String>()
        var b = LWWRegister<String>()
        let early = a.assign("early", timestamp: Self.stamp(100, 0), dot: Dot(replica: replica(0), counter: 1))
        let late = b.assign("late", timestamp: Self.stamp(200, 1), dot: Dot(replica: replica(1), counter: 1))
        a.apply(late)
        b.apply(early)
        #expect(a == b && a.value == "late")
        // Same clock reading: the higher replica id wins, on every replica.
        let tie0 = LWWRegister.Assignment(
            value: "zero", timestamp: HLCTimestamp(physical: 300, counter: 0, node: 7),
            dot: Dot(replica: replica(0), counter: 2))
        let tie1 = LWWRegister.Assignment(
            value: "one", timestamp: HLCTimestamp(physical: 300, counter: 0, node: 7),
            dot: Dot(replica: replica(1), counter: 2))
        a.apply(tie0)
        a.apply(tie1)
        b.apply(tie1)
        b.apply(tie0)
        #expect(a.value == "one" && b.value == "one")
    }

    @Test func multiValueRegisterKeepsConcurrentValuesAndResolves() {
        var phone = MVRegister<String>()
        var laptop = MVRegister<String>()
        let first = phone.assign("Groceries", replica: replica(0))
        laptop.apply(first)
        let fromPhone = phone.assign("Groceries (Sat)", replica: replica(0))
        let fromLaptop = laptop.assign("Groceries for the party", replica: replica(1))
        phone.apply(fromLaptop)
        laptop.apply(fromPhone)
        #expect(phone == laptop)
        #expect(phone.hasConflict)
        #expect(Set(phone.values) == ["Groceries (Sat)", "Groceries for the party"])
        // A later assignment that has seen both resolves the conflict everywhere.
        let resolved = laptop.assign("Groceries (Sat, party)", replica: replica(1))
        phone.apply(resolved)
        phone.apply(fromPhone)  // a late duplicate changes nothing
        #expect(phone == laptop && phone.values == ["Groceries (Sat, party)"])
    }

    @Test func multiValueAssignmentArrivingBeforeWhatItOverwrites() {
        var source = MVRegister<Int>()
        let one = source.assign(1, replica: replica(0))
        let two = source.assign(2, replica: replica(0))
        var target = MVRegister<Int>()
        target.apply(two)
        target.apply(one)
        #expect(target == source && target.values == [2])
    }

    static func lwwScenario(_ seed: UInt64, replicas: Int) -> (
        unsettled: [LWWRegister<Int>], settled: [LWWRegister<Int>]
    ) {
        var counters = [UInt64](repeating: 0, count: replicas)
        return runScenario(
            seed: seed, replicas: replicas, mutations: 20, initial: LWWRegister<Int>(),
            mutate: { random, index, state -> [LWWRegister<Int>.Assignment] in
                counters[index] += 1
                let stamp = HLCTimestamp(
                    physical: UInt64(random.int(1...40)), counter: 0, node: UInt64(random.int(0...2)))
                return [
                    state.assign(
                        random.int(0...99), timestamp: stamp,
                        dot: Dot(replica: replica(index), counter: counters[index]))
                ]
            },
            receive: { $0.apply($1) }, mergeState: { $0.merge($1) })
    }

    static func mvScenario(_ seed: UInt64, replicas: Int) -> (unsettled: [MVRegister<Int>], settled: [MVRegister<Int>])
    {
        runScenario(
            seed: seed, replicas: replicas, mutations: 20, initial: MVRegister<Int>(),
            mutate: { random, index, state -> [MVRegister<Int>.Assignment] in
                [state.assign(random.int(0...99), replica: replica(index))]
            },
            receive: { $0.apply($1) }, mergeState: { $0.merge($1) })
    }

    @Test func mergeLaws() async {
        await propertyCheck(count: 1500, input: Gen.uint64()) { seed in
            let lww = Self.lwwScenario(seed, replicas: 3).unsettled
            expectMergeLaws(lww[0], lww[1], lww[2], seed: seed)
            let mv = Self.mvScenario(seed, replicas: 3).unsettled
            expectMergeLaws(mv[0], mv[1], mv[2], seed: seed)
        }
    }

    @Test func replicasConvergeUnderRandomDelivery() async {
        await propertyCheck(count: 1500, input: Gen.uint64()) { seed in
            let replicas = Int(seed % 3) + 3
            expectConverged(Self.lwwScenario(seed, replicas: replicas).settled, seed: seed)
            let mv = Self.mvScenario(seed, replicas: replicas).settled
            expectConverged(mv, seed: seed)
            #expect(!mv[0].values.isEmpty, "a multi-value register lost every value (seed \(seed))")
        }
    }

    @Test func compactionKeepsValuesAndConvergence() async {
        await propertyCheck(count: 500, input: Gen.uint64()) { seed in
            let settled = Self.mvScenario(seed, replicas: 3).settled
            var compacted = settled[0]
            compacted.compact(stableAt: settled[0].context.versionVector)
            #expect(compacted.values == settled[0].values)
            var later = settled[1]
            let next = later.assign(1000, replica: replica(1))
            compacted.apply(next)
            var uncompacted = settled[2]
            uncompacted.apply(next)
            #expect(compacted.values == uncompacted.values, "seed \(seed)")
            #expect(compacted.merging(uncompacted).values == uncompacted.values, "seed \(seed)")
        }
    }

    @Test func codableRoundTrips() throws {
        var lww = LWWRegister<String>()
        lww.assign("title", timestamp: Self.stamp(5, 0), dot: Dot(replica: replica(0), counter: 1))
        #expect(try JSONDecoder().decode(LWWRegister<String>.self, from: JSONEncoder().encode(lww)) == lww)
        var mv = MVRegister<String>()
        mv.assign("a", replica: replica(0))
        mv.apply(MVRegister<String>.Assignment(dot: Dot(replica: replica(1), counter: 1), value: "b", overwrites: []))
        #expect(try JSONDecoder().decode(MVRegister<String>.self, from: JSONEncoder().encode(mv)) == mv)
    }
}
