import Foundation
import PropertyBased
import SyncCRDT
import SyncModels
import SyncTestSupport
import Testing

@Suite(.shrinking(false), .onOwnThreads) struct ReviewRegisterTests {
    typealias Register = ReviewRegister<String>

    static func stamp(_ physical: UInt64, _ replicaIndex: Int) -> HLCTimestamp {
        HLCTimestamp(physical: physical, counter: 0, node: replica(replicaIndex).high)
    }

    static func dot(_ replicaIndex: Int, _ counter: UInt64) -> Dot {
        Dot(replica: replica(replicaIndex), counter: counter)
    }

    // MARK: - Golden tests

    @Test func concurrentAssignmentsAreKeptAndTheGreatestIsShown() {
        var phone = Register()
        var laptop = Register()
        let first = phone.assign("Groceries", timestamp: Self.stamp(10, 0), dot: Self.dot(0, 1))
        laptop.apply(first)
        let fromPhone = phone.assign("Groceries (Sat)", timestamp: Self.stamp(20, 0), dot: Self.dot(0, 2))
        let fromLaptop = laptop.assign("Party shopping", timestamp: Self.stamp(30, 1), dot: Self.dot(1, 1))
        #expect(fromPhone.overwrites == [Self.dot(0, 1)] && fromLaptop.overwrites == [Self.dot(0, 1)])
        phone.apply(fromLaptop)
        laptop.apply(fromPhone)
        #expect(phone == laptop)
        #expect(phone.hasConflict)
        #expect(phone.value == "Party shopping")
        #expect(phone.candidates.map(\.value) == ["Party shopping", "Groceries (Sat)"])
        #expect(phone.candidates.map(\.author) == [replica(1), replica(0)])

        // A resolution overwrites both; a late duplicate of either changes nothing.
        let resolved = phone.assign("Groceries for the party", timestamp: Self.stamp(40, 0), dot: Self.dot(0, 3))
        #expect(resolved.overwrites == [Self.dot(0, 2), Self.dot(1, 1)])
        laptop.apply(resolved)
        laptop.apply(fromPhone)
        phone.apply(fromLaptop)
        #expect(phone == laptop && !phone.hasConflict && phone.value == "Groceries for the party")
    }

    @Test func shownValueIsTheLastWriterWinsValue() {
        // Same clock reading: the higher replica id is shown, as LWWRegister does.
        var register = Register()
        var lww = LWWRegister<String>()
        let tie = HLCTimestamp(physical: 300, counter: 0, node: 7)
        for (index, value) in [(1, "one"), (0, "zero")] {
            register.apply(.init(value: value, timestamp: tie, dot: Self.dot(index, 1), overwrites: []))
            lww.apply(.init(value: value, timestamp: tie, dot: Self.dot(index, 1)))
        }
        #expect(register.value == "one" && lww.value == "one" && register.hasConflict)
    }

    @Test func assignmentArrivingBeforeWhatItOverwrites() {
        var source = Register()
        let one = source.assign("1", timestamp: Self.stamp(1, 0), dot: Self.dot(0, 1))
        let two = source.assign("2", timestamp: Self.stamp(2, 0), dot: Self.dot(0, 2))
        var target = Register()
        target.apply(two)
        target.apply(one)
        #expect(target == source && target.candidates.map(\.value) == ["2"])
    }

    @Test func legacyAssignmentReplacesEverythingBelowItInAnyOrder() {
        let low = Register.Assignment(value: "low", timestamp: Self.stamp(10, 0), dot: Self.dot(0, 1), overwrites: [])
        let concurrent = Register.Assignment(
            value: "concurrent", timestamp: Self.stamp(12, 2), dot: Self.dot(2, 1), overwrites: [])
        let legacy = Register.Assignment(
            value: "legacy", timestamp: Self.stamp(20, 1), dot: Self.dot(1, 1), overwrites: nil)
        let high = Register.Assignment(
            value: "high", timestamp: Self.stamp(30, 0), dot: Self.dot(0, 2), overwrites: [Self.dot(1, 1)])
        let later = Register.Assignment(
            value: "later", timestamp: Self.stamp(31, 2), dot: Self.dot(2, 2), overwrites: [])
        let operations = [low, concurrent, legacy, high, later]
        var states: [Register] = []
        for order in [[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 0, 4, 1, 3], [3, 2, 1, 4, 0]] {
            var state = Register()
            for index in order { state.apply(operations[index]) }
            states.append(state)
        }
        #expect(states.allSatisfy { $0 == states[0] })
        // "low" and "concurrent" are below the legacy floor; "legacy" was overwritten by "high"; "later" did
        // not see "high": a conflict of the two.
        #expect(states[0].candidates.map(\.value) == ["later", "high"])
        #expect(states[0].floor == legacy.stamp)
    }

    @Test func migratedLastWriterWinsRegisterKeepsItsMeaning() {
        var lww = LWWRegister<String>()
        lww.assign("old", timestamp: Self.stamp(50, 1), dot: Self.dot(1, 4))
        var migrated = Register(migrating: lww)
        #expect(
            migrated.value == "old" && !migrated.hasConflict
                && migrated.floor == Register.Stamp(timestamp: Self.stamp(50, 1), dot: Self.dot(1, 4)))
        #expect(Register(migrating: LWWRegister<String>()) == Register())
        // A concurrent assignment below the old winner loses, as it did with LWW; one above it conflicts with
        // nothing it saw.
        migrated.apply(.init(value: "below", timestamp: Self.stamp(40, 0), dot: Self.dot(0, 1), overwrites: []))
        #expect(migrated.value == "old" && !migrated.hasConflict)
        migrated.apply(.init(value: "above", timestamp: Self.stamp(60, 0), dot: Self.dot(0, 2), overwrites: []))
        #expect(migrated.candidates.map(\.value) == ["above", "old"])
    }

    @Test func compactionKeepsConcurrentValues() {
        var register = Register()
        register.apply(
            .init(value: "a", timestamp: Self.stamp(1, 0), dot: Self.dot(0, 3), overwrites: [Self.dot(0, 1)]))
        register.apply(
            .init(value: "b", timestamp: Self.stamp(2, 1), dot: Self.dot(1, 7), overwrites: [Self.dot(0, 1)]))
        var compacted = register
        compacted.compact(stableAt: VersionVector([replica(0): 3, replica(1): 7]))
        #expect(compacted.candidates == register.candidates && compacted.context.dotCloud.isEmpty)
    }

    @Test func codableAndBinaryRoundTrip() throws {
        var register = Register()
        register.apply(.init(value: "legacy", timestamp: Self.stamp(1, 2), dot: Self.dot(2, 1), overwrites: nil))
        register.apply(
            .init(value: "a", timestamp: Self.stamp(5, 0), dot: Self.dot(0, 1), overwrites: [Self.dot(2, 1)]))
        register.apply(
            .init(value: "b", timestamp: Self.stamp(6, 1), dot: Self.dot(1, 9), overwrites: [Self.dot(2, 1)]))
        for state in [Register(), register] {
            #expect(try JSONDecoder().decode(Register.self, from: JSONEncoder().encode(state)) == state)
            #expect(try Register(binaryEncoded: state.binaryEncoded) == state)
        }
        var truncated = register.binaryEncoded
        truncated.removeLast()
        #expect(throws: SyncCRDTError.self) { try Register(binaryEncoded: truncated) }
    }

    // MARK: - Properties

    /// A random run: each replica assigns from a hybrid clock that has seen its state (so a value is always
    /// above what it overwrites), one assignment in five a legacy one. With `causal` false, timestamps are
    /// random instead (the merge laws hold whatever the clocks say).
    static func scenario(_ seed: UInt64, replicas: Int, causal: Bool = true) -> (
        unsettled: [Register], settled: [Register], operations: [Register.Assignment]
    ) {
        var counters = [UInt64](repeating: 0, count: replicas)
        var clocks = [UInt64](repeating: 0, count: replicas)
        var operations: [Register.Assignment] = []
        let run = runScenario(
            seed: seed, replicas: replicas, mutations: 20, initial: Register(),
            mutate: { random, index, state -> [Register.Assignment] in
                counters[index] += 1
                let seen = state.entries.values.map(\.timestamp.physical).max() ?? 0
                clocks[index] =
                    causal ? max(clocks[index], seen) + UInt64(random.int(1...3)) : UInt64(random.int(1...40))
                let timestamp = HLCTimestamp(physical: clocks[index], counter: 0, node: replica(index).high)
                let dot = Dot(replica: replica(index), counter: counters[index])
                let value = String(random.int(0...99))
                let operation: Register.Assignment
                if random.chance(0.2) {
                    operation = .init(value: value, timestamp: timestamp, dot: dot, overwrites: nil)
                    state.apply(operation)
                } else {
                    operation = state.assign(value, timestamp: timestamp, dot: dot)
                }
                operations.append(operation)
                return [operation]
            },
            receive: { $0.apply($1) }, mergeState: { $0.merge($1) })
        return (run.unsettled, run.settled, operations)
    }

    /// What the settled register must hold, from the whole set of assignments: those no assignment
    /// overwrote, at or above the greatest legacy one.
    static func referenceEntries(_ operations: [Register.Assignment]) -> Set<Dot> {
        let overwritten = Set(operations.flatMap { $0.overwrites ?? [] })
        let floor = operations.filter { $0.overwrites == nil }.map(\.stamp).max()
        return Set(
            operations.filter { operation in
                !overwritten.contains(operation.dot) && floor.map { operation.stamp >= $0 } ?? true
            }
            .map(\.dot))
    }

    @Test func applyingAnOperationIsMergingItsDelta() async {
        await propertyCheck(count: 1000, input: Gen.uint64()) { seed in
            for causal in [true, false] {
                let run = Self.scenario(seed, replicas: 3, causal: causal)
                var random = SeededRandom(seed: seed)
                for state in run.unsettled {
                    for operation in run.operations.shuffled(using: &random).prefix(8) {
                        var applied = state
                        applied.apply(operation)
                        #expect(applied == state.merging(Register.delta(of: operation)), "seed \(seed)")
                    }
                }
            }
        }
    }

    @Test func mergeLaws() async {
        await propertyCheck(count: 1500, input: Gen.uint64()) { seed in
            for causal in [true, false] {
                let states = Self.scenario(seed, replicas: 3, causal: causal).unsettled
                expectMergeLaws(states[0], states[1], states[2], seed: seed)
            }
        }
    }

    @Test func replicasConvergeToTheReferenceUnderRandomDelivery() async {
        await propertyCheck(count: 1500, input: Gen.uint64()) { seed in
            let run = Self.scenario(seed, replicas: Int(seed % 3) + 3)
            expectConverged(run.settled, seed: seed)
            let register = run.settled[0]
            #expect(Set(register.entries.keys) == Self.referenceEntries(run.operations), "seed \(seed)")
            // With causal clocks the shown value is the one last-writer-wins shows for the same assignments.
            var lww = LWWRegister<String>()
            for operation in run.operations {
                lww.apply(.init(value: operation.value, timestamp: operation.timestamp, dot: operation.dot))
            }
            #expect(register.winner?.dot == lww.winner?.dot, "seed \(seed)")
        }
    }

    @Test func compactionKeepsValuesAndConvergence() async {
        await propertyCheck(count: 500, input: Gen.uint64()) { seed in
            let settled = Self.scenario(seed, replicas: 3).settled
            var compacted = settled[0]
            compacted.compact(stableAt: settled[0].context.versionVector)
            #expect(compacted.candidates == settled[0].candidates, "seed \(seed)")
            var later = settled[1]
            let next = later.assign("next", timestamp: Self.stamp(10_000, 1), dot: Self.dot(1, 1000))
            compacted.apply(next)
            var uncompacted = settled[2]
            uncompacted.apply(next)
            #expect(compacted.candidates == uncompacted.candidates, "seed \(seed)")
            #expect(compacted.merging(uncompacted).candidates == uncompacted.candidates, "seed \(seed)")
        }
    }
}
