import Foundation
import PropertyBased
import SyncCRDT
import SyncModels
import SyncTestSupport
import Testing

@Suite(.shrinking(false), .onOwnThreads) struct CounterTests {
    @Test func gCounterSumsEveryReplicasIncrements() {
        var a = GCounter()
        var b = GCounter()
        let opA = a.increment(by: 3, at: Dot(replica: replica(0), counter: 1))
        let opB = b.increment(by: 4, at: Dot(replica: replica(1), counter: 1))
        a.apply(opB)
        b.apply(opA)
        b.apply(opA)
        #expect(a == b)
        #expect(a.value == 7)
        #expect(a.merging(GCounter()).value == 7)
    }

    @Test func pnCounterSubtractsAndConverges() {
        var a = PNCounter()
        var b = PNCounter()
        let deltaA = a.add(10, replica: replica(0))
        let deltaB = b.add(-4, replica: replica(1))
        let deltaB2 = b.add(-1, replica: replica(1))
        a.merge(deltaB2)
        a.merge(deltaB)
        b.merge(deltaA)
        #expect(a == b)
        #expect(a.value == 5)
    }

    @Test func operationsSurviveDuplicatesAndReordering() {
        var source = PNCounter()
        var operations: [PNCounter.Operation] = []
        for counter in 1...5 {
            operations.append(
                source.add(
                    Int64(counter) * (counter.isMultiple(of: 2) ? -1 : 1),
                    at: Dot(replica: replica(0), counter: UInt64(counter))))
        }
        var target = PNCounter()
        for operation in (operations + operations).reversed() { target.apply(operation) }
        #expect(target == source)
        #expect(target.value == 1 - 2 + 3 - 4 + 5)
    }

    static func scenario(_ seed: UInt64, replicas: Int) -> (unsettled: [PNCounter], settled: [PNCounter], total: Int64)
    {
        var total: Int64 = 0
        var counters = [UInt64](repeating: 0, count: replicas)
        let result = runScenario(
            seed: seed, replicas: replicas, mutations: 25, initial: PNCounter(),
            mutate: { random, index, state -> [PNCounter.Operation] in
                let amount = Int64(random.int(-5...9))
                total += amount
                counters[index] += 1
                return [state.add(amount, at: Dot(replica: replica(index), counter: counters[index]))]
            },
            receive: { $0.apply($1) }, mergeState: { $0.merge($1) })
        return (result.unsettled, result.settled, total)
    }

    @Test func mergeLaws() async {
        await propertyCheck(count: 2000, input: Gen.uint64()) { seed in
            let states = Self.scenario(seed, replicas: 3).unsettled
            expectMergeLaws(states[0], states[1], states[2], seed: seed)
            expectMergeLaws(states[0].increments, states[1].increments, states[2].increments, seed: seed)
        }
    }

    @Test func replicasConvergeUnderRandomDelivery() async {
        await propertyCheck(count: 2000, input: Gen.uint64()) { seed in
            let replicas = Int(seed % 3) + 3
            let (_, settled, total) = Self.scenario(seed, replicas: replicas)
            expectConverged(settled, seed: seed)
            #expect(settled[0].value == total, "counter lost increments (seed \(seed))")
        }
    }

    @Test func codableRoundTrip() throws {
        var counter = PNCounter()
        counter.add(5, replica: replica(0))
        counter.add(-2, replica: replica(1))
        let data = try JSONEncoder().encode(counter)
        #expect(String(decoding: data, as: UTF8.self).contains("\"version\":1"))
        #expect(try JSONDecoder().decode(PNCounter.self, from: data) == counter)
    }
}
