import Foundation
import PropertyBased
import SyncCRDT
import SyncModels
import SyncTestSupport
import Testing

@Suite(.shrinking(false), .onOwnThreads) struct ORMapTests {
    typealias Counters = ORMap<String, PNCounter>

    @Test func anUpdateConcurrentWithARemoveKeepsTheKey() {
        var a = Counters()
        var b = Counters()
        b.merge(a.update("views", replica: replica(0)) { _, _ in PNCounter().adding(3, replica(0)) })
        let removal = a.remove("views", replica: replica(0))
        let update = b.update("views", replica: replica(1)) { current, _ in current.adding(1, replica(1)) }
        a.merge(update)
        b.merge(removal)
        #expect(a == b)
        #expect(a.contains("views") && a["views"]?.value == 4, "add-wins: the key and its value survive")
    }

    @Test func aKeyRecreatedAfterItsRemovalStartsEmpty() {
        var a = Counters()
        a.update("views", replica: replica(0)) { current, _ in current.adding(5, replica(0)) }
        var b = a
        let removal = a.remove("views", replica: replica(0))
        b.merge(removal)
        let recreated = b.update("views", replica: replica(1)) { current, _ in current.adding(1, replica(1)) }
        a.merge(recreated)
        #expect(a == b && a["views"]?.value == 1)
    }

    @Test func concurrentCreationsOfOneKeyJoinTheirValues() {
        var a = Counters()
        var b = Counters()
        let fromA = a.update("views", replica: replica(0)) { current, _ in current.adding(2, replica(0)) }
        let fromB = b.update("views", replica: replica(1)) { current, _ in current.adding(3, replica(1)) }
        a.merge(fromB)
        b.merge(fromA)
        #expect(a == b && a["views"]?.value == 5)
    }

    static func scenario(_ seed: UInt64, replicas: Int) -> (unsettled: [Counters], settled: [Counters]) {
        runScenario(
            seed: seed, replicas: replicas, mutations: 25, initial: Counters(),
            mutate: { random, index, state -> [Counters] in
                let key = String(random.int(0...3))
                if random.chance(0.7) {
                    let amount = Int64(random.int(-3...5))
                    return [
                        state.update(key, replica: replica(index)) { current, _ in
                            current.adding(amount, replica(index))
                        }
                    ]
                }
                return [state.remove(key, replica: replica(index))]
            },
            receive: { $0.merge($1) }, mergeState: { $0.merge($1) })
    }

    @Test func mergeLaws() async {
        await propertyCheck(count: 1000, input: Gen.uint64()) { seed in
            let states = Self.scenario(seed, replicas: 3).unsettled
            expectMergeLaws(states[0], states[1], states[2], seed: seed)
        }
    }

    @Test func replicasConvergeUnderRandomDelivery() async {
        await propertyCheck(count: 1000, input: Gen.uint64()) { seed in
            expectConverged(Self.scenario(seed, replicas: Int(seed % 3) + 3).settled, seed: seed)
        }
    }

    static func view(_ map: Counters) -> [String: Int64] {
        Dictionary(uniqueKeysWithValues: map.keys.map { ($0, map[$0]!.value) })
    }

    @Test func compactionDropsHiddenIncarnationsAndKeepsConverging() async {
        await propertyCheck(count: 500, input: Gen.uint64()) { seed in
            var random = SeededRandom(seed: seed ^ 0xFACE)
            let settled = Self.scenario(seed, replicas: 3).settled
            var compacted = settled[0]
            compacted.compact(stableAt: settled[0].context.versionVector)
            #expect(Self.view(compacted) == Self.view(settled[0]), "compaction changed the map (seed \(seed))")
            let hidden = { (map: Counters) in
                map.entries.values.reduce(0) { $0 + $1.values.filter { !$0.isLive }.count }
            }
            #expect(hidden(compacted) == 0, "a stable hidden incarnation survived (seed \(seed))")
            var replicas = [compacted, settled[0], settled[1], settled[2]]
            let owners = [0, 0, 1, 2]
            var deltas: [Counters] = []
            for _ in 0..<10 {
                let index = random.int(below: replicas.count)
                let key = String(random.int(0...3))
                let owner = replica(owners[index])
                let delta =
                    random.chance(0.6)
                    ? replicas[index].update(key, replica: owner) { current, _ in current.adding(1, owner) }
                    : replicas[index].remove(key, replica: owner)
                deltas.append(delta)
                if index < 2 { replicas[1 - index].merge(delta) }
            }
            for index in replicas.indices {
                for delta in deltas.shuffled(using: &random) { replicas[index].merge(delta) }
            }
            let views = replicas.map(Self.view)
            #expect(views.allSatisfy { $0 == views[0] }, "diverged after compaction (seed \(seed))")
            #expect(Self.view(replicas[0].merging(replicas[2])) == views[0], "seed \(seed)")
        }
    }

    @Test func codableRoundTrip() throws {
        var map = Counters()
        map.update("a", replica: replica(0)) { current, _ in current.adding(2, replica(0)) }
        map.remove("a", replica: replica(1))
        map.update("b", replica: replica(1)) { current, _ in current.adding(-1, replica(1)) }
        #expect(try JSONDecoder().decode(Counters.self, from: JSONEncoder().encode(map)) == map)
    }
}

extension PNCounter {
    /// The delta of adding `amount` on behalf of `replica` to this counter.
    func adding(_ amount: Int64, _ replica: ReplicaID) -> PNCounter {
        var copy = self
        return copy.add(amount, replica: replica)
    }
}
