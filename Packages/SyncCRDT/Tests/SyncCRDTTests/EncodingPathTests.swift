import Foundation
import PropertyBased
import SyncModels
import SyncTestSupport
import Testing

@testable import SyncCRDT

/// The fast paths must read and write exactly what the `Codable` paths do: `decode(json:)` and the reader against
/// `JSONDecoder`, and the binary state form against equality after a round trip.
@Suite(.onOwnThreads) struct EncodingPathTests {
    /// The JSON value of a Codable operation, as a payload carries it.
    func json<T: Encodable>(_ value: T) -> JSONValue {
        try! JSONValue(parsing: CanonicalJSON.encode(value))
    }

    /// Decodes `value` both ways; both must fail, or both succeed with equal results. The reader alone must
    /// never give a value `JSONDecoder` would not.
    func agree<T: JSONReadable & Equatable>(_ type: T.Type, _ value: JSONValue) {
        let data = value.canonicalData()
        let fast = T.decode(json: value)
        let slow = try? JSONDecoder().decode(T.self, from: data)
        #expect(fast == slow, "\(T.self) from \(String(decoding: data, as: UTF8.self))")
        let read = data.withUnsafeBytes { bytes -> T? in
            var reader = JSONReader(bytes)
            do throws(JSONReader.Bail) { return try T(reading: &reader) } catch { return nil }
        }
        if let read { #expect(read == slow, "the reader agrees when it does not bail") }
    }

    /// Random edits on four replicas that see each other's operations, with every operation kept.
    struct History {
        var text: [FugueText.Operation] = []
        var items: [FugueList<String>.Operation] = []
        var tags: [ORSet<String, AddWins>.Operation] = []
        var counts: [PNCounter.Operation] = []
        var states: (FugueText, FugueList<String>, ORSet<String, AddWins>, PNCounter)

        init(seed: UInt64, steps: Int) {
            var random = SeededRandom(seed: seed)
            var body = FugueText()
            var list = FugueList<String>()
            var set = ORSet<String, AddWins>()
            var counter = PNCounter()
            var counters = [UInt64](repeating: 0, count: 4)
            for _ in 0..<steps {
                let who = random.int(below: 4)
                let replica = replica(who)
                switch random.int(below: 6) {
                case 0 where body.count > 0:
                    let at = random.int(below: body.count)
                    if let op = body.remove(at: at, count: min(body.count - at, random.int(1...4)), replica: replica) {
                        text.append(op)
                    }
                case 0, 1:
                    let word = random.pick(["a", "é", "漢字", "🙂x", "\"q\"\\", "line\n"])
                    if let op = body.insert(
                        contentsOf: Array(word.unicodeScalars), at: random.int(0...body.count), replica: replica)
                    {
                        text.append(op)
                    }
                case 2:
                    if list.count > 0, random.chance(0.3) {
                        if let op = list.remove(at: random.int(below: list.count), replica: replica) {
                            items.append(op)
                        }
                    } else {
                        items.append(
                            list.insert(
                                "item \(random.int(below: 99))", at: random.int(0...list.count), replica: replica))
                    }
                case 3:
                    let tag = random.pick(["x", "y", "z/w"])
                    tags.append(random.chance(0.6) ? set.add(tag, replica: replica) : set.remove(tag, replica: replica))
                default:
                    counters[who] += 1
                    counts.append(
                        counter.add(
                            Int64(random.int(-3...5)), at: Dot(replica: replica, counter: counters[who] + 1000)))
                }
            }
            states = (body, list, set, counter)
        }
    }

    @Test func operationsDecodeFromParsedJSONAsCodableDoes() async {
        await propertyCheck(count: 40, input: Gen.int(in: 0...Int.max)) { seed in
            let history = History(seed: UInt64(seed), steps: 120)
            for op in history.text { agree(FugueText.Operation.self, json(op)) }
            for op in history.items { agree(FugueList<String>.Operation.self, json(op)) }
            for op in history.tags { agree(ORSet<String, AddWins>.Operation.self, json(op)) }
            for op in history.counts { agree(PNCounter.Operation.self, json(op)) }
            agree([FugueText.Operation].self, json(history.text))
            // Every decoded operation equals the original, and the reader read it without bailing.
            #expect([FugueText.Operation].decode(json: json(history.text)) == history.text)
            #expect([ORSet<String, AddWins>.Operation].decode(json: json(history.tags)) == history.tags)
            let bytes = json(history.text).canonicalData()
            #expect(
                bytes.withUnsafeBytes { raw in
                    var reader = JSONReader(raw)
                    return (try? [FugueText.Operation](reading: &reader)) == history.text
                })
        }
    }

    /// Damaged operations: a key removed, a value of the wrong type, a counter out of range. The fast path
    /// refuses exactly what `JSONDecoder` refuses.
    @Test func damagedOperationsAreRefusedAsCodableRefusesThem() {
        let history = History(seed: 7, steps: 200)
        var random = SeededRandom(seed: 11)
        let changes: [(inout [String: JSONValue], String) -> Void] = [
            { object, key in object[key] = nil },
            { object, key in object[key] = .string("1") },
            { object, key in object[key] = .int(-1) },
            { object, key in object[key] = .array([]) },
            { object, key in object[key] = .null },
            { object, key in object[key] = .int(Int64(ItemID.maxCounter)) },
        ]
        let damages = changes.map { change in { (value: JSONValue) in Self.edit(value, &random, change) } }
        var checked = 0
        for damage in damages {
            for op in history.text.prefix(30) {
                agree(FugueText.Operation.self, damage(json(op)))
                checked += 1
            }
            for op in history.tags.prefix(10) { agree(ORSet<String, AddWins>.Operation.self, damage(json(op))) }
            for op in history.counts.prefix(10) { agree(PNCounter.Operation.self, damage(json(op))) }
            for op in history.items.prefix(10) { agree(FugueList<String>.Operation.self, damage(json(op))) }
        }
        #expect(checked == 180)
        agree(FugueText.Operation.self, .array([]))
        agree(FugueText.Operation.self, ["insert": ["id": ["replica": "xyz", "counter": 1], "count": 1]])
        agree(PNCounter.Operation.self, ["dot": ["replica": .string(replica(0).description)]])
    }

    /// Changes one key at a random depth of nested objects (seeded, so the same every run).
    static func edit(
        _ value: JSONValue, _ random: inout SeededRandom, _ change: (inout [String: JSONValue], String) -> Void
    ) -> JSONValue {
        guard case .object(var object) = value, !object.isEmpty else { return value }
        let key = random.pick(object.keys.sorted())
        if case .object = object[key]!, random.chance(0.6) {
            object[key] = edit(object[key]!, &random, change)
        } else {
            change(&object, key)
        }
        return .object(object)
    }

    @Test func statesRoundTripThroughTheBinaryForm() async {
        await propertyCheck(count: 30, input: Gen.int(in: 0...Int.max)) { seed in
            let history = History(seed: UInt64(seed), steps: 150)
            let (body, list, set, counter) = history.states
            #expect(try! FugueText(binaryEncoded: body.binaryEncoded) == body)
            #expect(try! FugueText(binaryEncoded: body.binaryEncoded).text == body.text)
            #expect(try! FugueList<String>(binaryEncoded: list.binaryEncoded) == list)
            let decodedSet = try! ORSet<String, AddWins>(binaryEncoded: set.binaryEncoded)
            #expect(decodedSet == set && decodedSet.compactedVersion == set.compactedVersion)
            #expect(try! PNCounter(binaryEncoded: counter.binaryEncoded) == counter)
            #expect(FugueText().binaryEncoded == [0], "an empty list is a zero length")
            #expect(try! FugueList<String>(binaryEncoded: FugueList<String>().binaryEncoded) == FugueList<String>())
            // Equal states encode to equal bytes: a dictionary's order does not leak into the form.
            #expect(decodedSet.binaryEncoded == set.binaryEncoded)
            var register = LWWRegister<String>()
            register.apply(
                .init(
                    value: "t", timestamp: HLCTimestamp(physical: 5, counter: 2, node: 9),
                    dot: Dot(replica: replica(1), counter: 3)))
            #expect(try! LWWRegister<String>(binaryEncoded: register.binaryEncoded) == register)
            #expect(try! LWWRegister<Bool>(binaryEncoded: LWWRegister<Bool>().binaryEncoded) == LWWRegister<Bool>())
        }
    }

    @Test func truncatedOrExtendedBinaryIsRefused() {
        let (body, _, set, _) = History(seed: 3, steps: 100).states
        for bytes in [body.binaryEncoded, set.binaryEncoded] {
            #expect(throws: SyncCRDTError.self) { try ORSet<String, AddWins>(binaryEncoded: Array(bytes.dropLast())) }
            #expect(throws: SyncCRDTError.self) { try FugueText(binaryEncoded: bytes + [0]) }
        }
        #expect(throws: SyncCRDTError.self) { try Bool(binaryEncoded: [2]) }
        #expect(throws: SyncCRDTError.self) { try String(binaryEncoded: [2, 0xFF, 0xFE]) }
    }
}
