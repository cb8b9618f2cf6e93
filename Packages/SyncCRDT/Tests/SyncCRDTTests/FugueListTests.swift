import Foundation
import PropertyBased
import SyncCRDT
import SyncModels
import SyncTestSupport
import Testing

@Suite(.shrinking(false), .onOwnThreads) struct FugueListTests {
    // MARK: Golden tests of the chosen semantics

    @Test func concurrentRunsAtOnePlaceNeverInterleave() {
        var base = FugueText()
        let hello = base.insert("Hi !", at: 0, replica: replica(9))!
        var alice = FugueText()
        var bob = FugueText()
        alice.apply(hello)
        bob.apply(hello)
        // Both type a word, one character at a time, at the same place.
        var fromAlice: [FugueText.Operation] = []
        var fromBob: [FugueText.Operation] = []
        for (offset, scalar) in "Alice".unicodeScalars.enumerated() {
            fromAlice.append(alice.insert(scalar, at: 3 + offset, replica: replica(0)))
        }
        for (offset, scalar) in "Bob".unicodeScalars.enumerated() {
            fromBob.append(bob.insert(scalar, at: 3 + offset, replica: replica(1)))
        }
        alice.apply(contentsOf: fromBob)
        bob.apply(contentsOf: fromAlice.reversed())
        #expect(alice.text == bob.text)
        // Ties between concurrent siblings go to the lower replica id: Alice's run first, never interleaved.
        #expect(alice.text == "Hi AliceBob!")
    }

    @Test func backwardTypingRunsDoNotInterleaveEither() {
        var alice = FugueText()
        var bob = FugueText()
        var ops: [FugueText.Operation] = []
        for scalar in "cba".unicodeScalars { ops.append(alice.insert(scalar, at: 0, replica: replica(0))) }
        var others: [FugueText.Operation] = []
        for scalar in "zyx".unicodeScalars { others.append(bob.insert(scalar, at: 0, replica: replica(1))) }
        alice.apply(contentsOf: others)
        bob.apply(contentsOf: ops)
        #expect(alice.text == bob.text)
        #expect(alice.text == "abcxyz" || alice.text == "xyzabc")
    }

    @Test func tombstonesKeepAnchoringConcurrentInserts() {
        var a = FugueText()
        let typed = a.insert("abc", at: 0, replica: replica(0))!
        var b = FugueText()
        b.apply(typed)
        let deletion = a.remove(at: 1, replica: replica(0))!  // a deletes "b"
        let insertion = b.insert("X", at: 2, replica: replica(1))!  // b types after "b"
        a.apply(insertion)
        b.apply(deletion)
        #expect(a.text == "aXc" && b.text == "aXc")
        #expect(a.totalCount == 4, "the deleted b stays as a tombstone")
    }

    @Test func operationsArriveInAnyOrderAndTwice() {
        var source = FugueText()
        var operations: [FugueText.Operation] = []
        operations.append(source.insert("hello", at: 0, replica: replica(0))!)
        operations.append(source.insert(" world", at: 5, replica: replica(0))!)
        operations.append(source.remove(at: 0, count: 1, replica: replica(0))!)
        operations.append(source.insert("H", at: 0, replica: replica(0))!)
        var target = FugueText()
        for operation in (operations + operations).reversed() { target.apply(operation) }
        #expect(target.pendingCount == 0)
        #expect(target == source && target.text == "Hello world")
    }

    @Test func elementIDsAreStablePositions() {
        var list = FugueList<String>()
        list.append("milk", replica: replica(0))
        list.append("eggs", replica: replica(0))
        let eggs = list.id(at: 1)
        list.insert("bread", at: 0, replica: replica(1))
        #expect(list.position(of: eggs) == 2)
        list.remove(at: 2, replica: replica(1))
        #expect(list.position(of: eggs) == nil)
        #expect(list.elements == ["bread", "milk"])
    }

    // MARK: Against reference models

    @Test func randomLocalEditsMatchAnArray() async {
        await propertyCheck(count: 300, input: Gen.uint64()) { seed in
            var random = SeededRandom(seed: seed)
            var list = FugueList<Int>()
            var model: [Int] = []
            var next = 0
            for _ in 0..<random.int(50...400) {
                if model.isEmpty || random.chance(0.6) {
                    let position = random.int(0...model.count)
                    let values = (0..<random.int(1...4)).map { _ in
                        next += 1
                        return next
                    }
                    list.replace(at: position, deleting: 0, with: values, replica: replica(random.int(0...2)))
                    model.insert(contentsOf: values, at: position)
                } else {
                    let position = random.int(below: model.count)
                    let count = random.int(1...min(5, model.count - position))
                    list.remove(at: position, count: count, replica: replica(random.int(0...2)))
                    model.removeSubrange(position..<position + count)
                }
                if random.chance(0.05) {
                    #expect(list.elements == model, "seed \(seed)")
                }
            }
            #expect(list.elements == model, "seed \(seed)")
            #expect(list.count == model.count)
            if !model.isEmpty {
                let position = random.int(below: model.count)
                #expect(list[position] == model[position])
            }
        }
    }

    /// A random network editing one list: inserts of 1-3 elements and deletes of 1-3 at random places.
    static func scenario(_ seed: UInt64, replicas: Int, mutations: Int = 30) -> (
        unsettled: [FugueList<Int>], settled: [FugueList<Int>], log: [FugueList<Int>.Operation]
    ) {
        var log: [FugueList<Int>.Operation] = []
        var next = 0
        let result = runScenario(
            seed: seed, replicas: replicas, mutations: mutations, initial: FugueList<Int>(),
            mutate: { random, index, state -> [FugueList<Int>.Operation] in
                let operation: FugueList<Int>.Operation?
                if state.isEmpty || random.chance(0.65) {
                    let values = (0..<random.int(1...3)).map { _ in
                        next += 1
                        return next
                    }
                    operation = state.insert(
                        contentsOf: values, at: random.int(0...state.count), replica: replica(index))
                } else {
                    let position = random.int(below: state.count)
                    operation = state.remove(
                        at: position, count: random.int(1...min(3, state.count - position)), replica: replica(index))
                }
                log.append(operation!)
                return [operation!]
            },
            receive: { $0.apply($1) }, mergeState: { $0.merge($1) })
        return (result.unsettled, result.settled, log)
    }

    @Test func concurrentEditsMatchTheNaiveFugueMax() async {
        await propertyCheck(count: 600, input: Gen.uint64()) { seed in
            let (_, settled, log) = Self.scenario(seed, replicas: Int(seed % 3) + 3)
            var reference = ReferenceList<Int>()
            for operation in log { reference.apply(operation) }
            #expect(settled[0].elements == reference.elements, "order differs from naive FugueMax (seed \(seed))")
        }
    }

    // MARK: Laws and convergence

    @Test func mergeLaws() async {
        await propertyCheck(count: 1000, input: Gen.uint64()) { seed in
            let states = Self.scenario(seed, replicas: 3, mutations: 20).unsettled
            expectMergeLaws(states[0], states[1], states[2], seed: seed)
        }
    }

    @Test func replicasConvergeUnderRandomDelivery() async {
        await propertyCheck(count: 1500, input: Gen.uint64()) { seed in
            let settled = Self.scenario(seed, replicas: Int(seed % 3) + 3).settled
            expectConverged(settled, seed: seed)
            #expect(settled.allSatisfy { $0.pendingCount == 0 }, "operations left waiting (seed \(seed))")
            #expect(Set(settled[0].elements).count == settled[0].count, "an element appears twice (seed \(seed))")
        }
    }

    @Test func deltasCarryExactlyWhatIsMissing() async {
        await propertyCheck(count: 500, input: Gen.uint64()) { seed in
            let states = Self.scenario(seed, replicas: 3).unsettled
            var viaDelta = states[0]
            viaDelta.apply(contentsOf: states[1].operations(since: states[0].version))
            var viaDeltaList = states[0]
            viaDeltaList.merge(states[1].delta(since: states[0].version))
            let full = states[0].merging(states[1])
            #expect(viaDelta == full && viaDeltaList == full, "seed \(seed)")
        }
    }

    // MARK: Compaction

    @Test func compactionDropsTombstonesAndKeepsConverging() async {
        await propertyCheck(count: 500, input: Gen.uint64()) { seed in
            var random = SeededRandom(seed: seed ^ 0x5EED)
            let settled = Self.scenario(seed, replicas: 3, mutations: 40).settled
            let stable = settled[0].version.versionVector
            var compacted = settled[0]
            compacted.compact(stableAt: stable)
            #expect(compacted.elements == settled[0].elements, "compaction changed the list (seed \(seed))")
            #expect(compacted.totalCount <= settled[0].totalCount)
            #expect(compacted.historyCount == 0)
            // Replica 0 compacted (its uncompacted twin too, as replica 0), replicas 1 and 2 did not.
            var replicas = [compacted, settled[0], settled[1], settled[2]]
            let owners = [0, 0, 1, 2]
            var operations: [FugueList<Int>.Operation] = []
            var next = 10_000
            for _ in 0..<random.int(5...25) {
                let index = random.int(below: replicas.count)
                let operation: FugueList<Int>.Operation
                if replicas[index].isEmpty || random.chance(0.6) {
                    next += 1
                    operation = replicas[index].insert(
                        next, at: random.int(0...replicas[index].count), replica: replica(owners[index]))
                } else {
                    let position = random.int(below: replicas[index].count)
                    operation = replicas[index].remove(at: position, replica: replica(owners[index]))!
                }
                operations.append(operation)
                if index < 2 { replicas[1 - index].apply(operation) }
            }
            for index in replicas.indices {
                replicas[index].apply(contentsOf: operations.shuffled(using: &random))
            }
            let values = replicas.map(\.elements)
            #expect(Set(values.map { $0.description }).count == 1, "diverged after compaction (seed \(seed))")
            var merged = replicas[0]
            merged.merge(replicas[2])
            var mergedBack = replicas[2]
            mergedBack.merge(replicas[0])
            #expect(merged.elements == values[1] && mergedBack.elements == values[1], "seed \(seed)")
        }
    }

    @Test func aNewReplicaBootstrapsFromACompactedState() {
        var random = SeededRandom(seed: 42)
        let settled = Self.scenario(7, replicas: 3, mutations: 60).settled
        var compacted = settled[0]
        compacted.compact(stableAt: settled[0].version.versionVector)
        var fresh = FugueList<Int>()
        fresh.merge(compacted)
        #expect(fresh.elements == settled[0].elements)
        let later = fresh.insert(-1, at: random.int(0...fresh.count), replica: replica(5))
        var other = settled[1]
        other.apply(later)
        fresh.merge(other)
        #expect(fresh.elements == other.elements)
    }

    // MARK: Encodings

    @Test func encodingsRoundTrip() async throws {
        await propertyCheck(count: 300, input: Gen.uint64()) { seed in
            let settled = Self.scenario(seed, replicas: 3).settled
            for var list in [settled[0], settled[1]] {
                if seed % 2 == 0 { list.compact(stableAt: list.version.versionVector) }
                for deleted in [false, true] {
                    let decoded = try? FugueList<Int>(encoded: list.encoded(includingDeletedContent: deleted))
                    #expect(decoded?.elements == list.elements, "binary round trip (seed \(seed))")
                    #expect(decoded?.version == list.version, "binary round trip (seed \(seed))")
                }
                for history in [false, true] {
                    let snapshot = try? FugueList<Int>(encoded: list.encodedSnapshot(includingHistory: history))
                    #expect(snapshot?.elements == list.elements, "snapshot round trip (seed \(seed))")
                    var fresh = FugueList<Int>()
                    if let snapshot { fresh.merge(snapshot) }
                    #expect(fresh.elements == list.elements, "bootstrap from a snapshot (seed \(seed))")
                }
                let json = try? JSONDecoder().decode(FugueList<Int>.self, from: JSONEncoder().encode(list))
                #expect(json?.elements == list.elements && json?.version == list.version, "JSON (seed \(seed))")
            }
        }
    }

    @Test func textOperationsEncodeTextAsStrings() throws {
        var text = FugueText()
        let operation = text.insert("héllo 👋", at: 0, replica: replica(0))!
        let json = String(decoding: try JSONEncoder().encode(operation), as: UTF8.self)
        #expect(json.contains("héllo 👋"))
        #expect(try JSONDecoder().decode(FugueText.Operation.self, from: Data(json.utf8)) == operation)
        let document = try JSONDecoder().decode(FugueText.self, from: JSONEncoder().encode(text))
        #expect(document.text == "héllo 👋")
        #expect(String(decoding: try JSONEncoder().encode(text), as: UTF8.self).contains("\"version\":1"))
    }

    @Test func corruptBinaryEncodingsThrow() {
        var text = FugueText()
        text.insert("some text", at: 0, replica: replica(0))
        text.remove(at: 2, count: 3, replica: replica(0))
        let bytes = text.encoded()
        for cut in [0, 3, bytes.count / 2, bytes.count - 1] {
            #expect(throws: SyncCRDTError.self) { try FugueText(encoded: Array(bytes.prefix(cut))) }
        }
        var random = SeededRandom(seed: 3)
        for _ in 0..<200 {
            var corrupt = bytes
            corrupt[random.int(below: corrupt.count)] = UInt8(random.int(0...255))
            _ = try? FugueText(encoded: corrupt)  // must not crash
        }
    }
}
