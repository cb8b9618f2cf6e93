import Foundation
import PropertyBased
import SyncCRDT
import SyncModels
import SyncTestSupport
import Testing

@Suite(.shrinking(false), .onOwnThreads) struct ORSetTests {
    /// Concurrent add and remove of the same element, seen by both replicas in opposite orders.
    static func concurrentAddRemove<Bias: ORSetBias>(_: Bias.Type) -> (ORSet<String, Bias>, ORSet<String, Bias>) {
        var a = ORSet<String, Bias>()
        var b = ORSet<String, Bias>()
        b.apply(a.add("urgent", replica: replica(0)))
        let add = a.add("urgent", replica: replica(0))
        let remove = b.remove("urgent", replica: replica(1))
        a.apply(remove)
        b.apply(add)
        return (a, b)
    }

    @Test func addWinsKeepsAnElementAddedConcurrentlyWithItsRemoval() {
        let (a, b) = Self.concurrentAddRemove(AddWins.self)
        #expect(a == b)
        #expect(a.contains("urgent"))
    }

    @Test func removeWinsDropsAnElementRemovedConcurrentlyWithAnAdd() {
        let (a, b) = Self.concurrentAddRemove(RemoveWins.self)
        #expect(a == b)
        #expect(!a.contains("urgent"))
        // An add that has seen the remove brings it back.
        var c = a
        c.add("urgent", replica: replica(2))
        #expect(c.contains("urgent"))
    }

    @Test func removeOnlyRemovesWhatItObserved() {
        var a = AddWinsSet<String>()
        var b = AddWinsSet<String>()
        let first = a.add("x", replica: replica(0))
        b.apply(first)
        let removal = b.remove("x", replica: replica(1))
        a.apply(removal)
        #expect(a.elements.isEmpty && b.elements.isEmpty)
        let readd = a.add("x", replica: replica(0))
        b.apply(readd)
        b.apply(removal)  // duplicate of an old remove: nothing changes
        #expect(b.contains("x") && a == b)
        #expect(a.entries["x"]?.count == 1, "an add replaces the dots it observed: no growing tag set")
    }

    static func scenario<Bias: ORSetBias>(_ seed: UInt64, replicas: Int, _: Bias.Type) -> (
        unsettled: [ORSet<Int, Bias>], settled: [ORSet<Int, Bias>]
    ) {
        runScenario(
            seed: seed, replicas: replicas, mutations: 25, initial: ORSet<Int, Bias>(),
            mutate: { random, index, state -> [ORSet<Int, Bias>.Operation] in
                let element = random.int(0...5)
                return [
                    random.chance(0.6)
                        ? state.add(element, replica: replica(index)) : state.remove(element, replica: replica(index))
                ]
            },
            receive: { $0.apply($1) }, mergeState: { $0.merge($1) })
    }

    @Test func mergeLaws() async {
        await propertyCheck(count: 1500, input: Gen.uint64()) { seed in
            let addWins = Self.scenario(seed, replicas: 3, AddWins.self).unsettled
            expectMergeLaws(addWins[0], addWins[1], addWins[2], seed: seed)
            let removeWins = Self.scenario(seed, replicas: 3, RemoveWins.self).unsettled
            expectMergeLaws(removeWins[0], removeWins[1], removeWins[2], seed: seed)
        }
    }

    @Test func replicasConvergeUnderRandomDelivery() async {
        await propertyCheck(count: 1500, input: Gen.uint64()) { seed in
            let replicas = Int(seed % 3) + 3
            expectConverged(Self.scenario(seed, replicas: replicas, AddWins.self).settled, seed: seed)
            expectConverged(Self.scenario(seed, replicas: replicas, RemoveWins.self).settled, seed: seed)
        }
    }

    /// Compacts one replica at the stable point of a settled network, then keeps editing concurrently: the
    /// compacted replica shows the same elements as an uncompacted twin, and everyone still converges.
    static func checkCompaction<Bias: ORSetBias>(_ seed: UInt64, _: Bias.Type) {
        var random = SeededRandom(seed: seed ^ 0xABCD)
        let settled = scenario(seed, replicas: 3, Bias.self).settled
        var compacted = settled[0]
        compacted.compact(stableAt: settled[0].context.versionVector)
        #expect(compacted.elements == settled[0].elements, "compaction changed the set (seed \(seed))")
        let before = settled[0].entries.values.reduce(0) { $0 + $1.count }
        let after = compacted.entries.values.reduce(0) { $0 + $1.count }
        #expect(after <= before)
        var replicas = [compacted, settled[0], settled[1], settled[2]]
        var messages: [ORSet<Int, Bias>.Operation] = []
        for _ in 0..<10 {
            let index = random.int(below: replicas.count)
            let element = random.int(0...5)
            // The compacted replica and its uncompacted twin are both replica 0: each change reaches both at once.
            let owner = replica([0, 0, 1, 2][index])
            messages.append(
                random.chance(0.5)
                    ? replicas[index].add(element, replica: owner) : replicas[index].remove(element, replica: owner))
            if index == 0 || index == 1 { replicas[1 - index].apply(messages.last!) }
        }
        for index in replicas.indices {
            for message in messages.shuffled(using: &random) { replicas[index].apply(message) }
        }
        #expect(Set(replicas.map(\.elements)).count == 1, "diverged after compaction (seed \(seed))")
        #expect(replicas[0].merging(replicas[1]).elements == replicas[1].elements, "seed \(seed)")
    }

    @Test func compactionDropsTombstonesAndKeepsConverging() async {
        await propertyCheck(count: 800, input: Gen.uint64()) { seed in
            Self.checkCompaction(seed, AddWins.self)
            Self.checkCompaction(seed, RemoveWins.self)
        }
    }

    /// `apply` is a fast path of `merge(delta(of:))`: over random operations (some made after compaction, so
    /// with floors) delivered in random order with duplicates, both give equal sets at every step.
    static func checkApplyIsTheDeltaMerge<Bias: ORSetBias>(_ seed: UInt64, _: Bias.Type) {
        var random = SeededRandom(seed: seed)
        var authors = [ORSet<Int, Bias>](repeating: ORSet(), count: 3)
        var operations: [ORSet<Int, Bias>.Operation] = []
        for step in 0..<30 {
            let index = random.int(below: authors.count)
            let element = random.int(0...4)
            if step == 15 { authors[index].compact(stableAt: authors[index].context.versionVector) }
            operations.append(
                random.chance(0.6)
                    ? authors[index].add(element, replica: replica(index))
                    : authors[index].remove(element, replica: replica(index)))
            if random.chance(0.5) { authors[random.int(below: authors.count)].apply(operations.last!) }
        }
        var fast = ORSet<Int, Bias>()
        var merged = ORSet<Int, Bias>()
        for _ in 0..<45 {
            let operation = random.pick(operations)
            fast.apply(operation)
            merged.merge(ORSet.delta(of: operation))
            #expect(fast == merged, "seed \(seed)")
        }
    }

    @Test func applyIsTheMergeOfTheOperationsDelta() async {
        await propertyCheck(count: 1000, input: Gen.uint64()) { seed in
            Self.checkApplyIsTheDeltaMerge(seed, AddWins.self)
            Self.checkApplyIsTheDeltaMerge(seed, RemoveWins.self)
        }
    }

    @Test func codableRoundTrip() throws {
        var set = RemoveWinsSet<String>()
        set.add("a", replica: replica(0))
        set.remove("b", replica: replica(1))
        let data = try JSONEncoder().encode(set)
        #expect(try JSONDecoder().decode(RemoveWinsSet<String>.self, from: data) == set)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(AddWinsSet<String>.self, from: data) }
    }
}
