import Foundation
import NotesDomain
import SyncCRDT
import SyncEventStoreTestSupport
import SyncModels
import Testing

/// A note's stored state: the binary form round-trips, and states stored as JSON (before the binary form)
/// still read.
@Suite struct NoteStateEncodingTests {
    /// A note edited through every event type by three replicas.
    static func note(seed: UInt64, events: Int) -> NoteState {
        var random = SplitMix64(seed: seed)
        var state = NoteState()
        let replicas = (1...3).map { ReplicaID(high: $0, low: 42) }
        var counters = [UInt64](repeating: 0, count: replicas.count)
        var items: [String] = []
        for index in 0..<events {
            let who = Int.random(in: 0..<replicas.count, using: &random)
            let replica = replicas[who]
            counters[who] += 1
            let dot = Dot(replica: replica, counter: counters[who])
            let hlc = HLCTimestamp(physical: 1_700_000_000_000 + UInt64(index), counter: 0, node: replica.high)
            var payload = NotePayload.titleSet(.init(title: "t\(index)"))
            switch index == 0 ? -1 : Int.random(in: 0..<9, using: &random) {
            case -1: payload = .created(.init(title: "t\(index)"))
            case 0: break
            case 1:
                let ops = state.body.replace(with: state.body.text + " w\(index) é🙂", replica: replica)
                payload = .bodyEdited(.init(ops: ops))
            case 2:
                let ops = state.body.replace(with: String(state.body.text.dropFirst(3)), replica: replica)
                payload = .bodyEdited(.init(ops: ops))
            case 3:
                payload = .tagAdded(.init(tag: "a", op: state.tags.add("a", replica: replica)))
            case 4:
                payload = .tagRemoved(.init(tag: "a", op: state.tags.remove("a", replica: replica)))
            case 5:
                payload = .viewed(.init(count: 1, op: state.views.add(1, at: dot)))
            case 6:
                let item = NoteID(uuid: UUID()).description
                items.append(item)
                let op = state.checklist.insertElement(item, at: state.checklist.count, replica: replica)
                payload = .checklistItemAdded(.init(item: item, text: "x", op: op))
            case 7 where !items.isEmpty:
                payload = .checklistItemDoneSet(.init(item: items.randomElement(using: &random)!, done: true))
            default:
                payload = .pinnedSet(.init(pinned: Bool.random(using: &random)))
            }
            state.apply(type: payload.type.rawValue, payload: payload.json, hlc: hlc, dot: dot)
        }
        return state
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func binaryFormRoundTrips(seed: UInt64) throws {
        let state = Self.note(seed: seed, events: 300)
        let bytes = state.binaryEncoded
        let decoded = try NoteState(stored: bytes)
        #expect(decoded == state)
        #expect(decoded.view == state.view)
        #expect(decoded.binaryEncoded == bytes, "deterministic bytes")
        #expect(!state.body.text.isEmpty && state.tags.context.versionVector.counters.count > 0)
    }

    @Test func statesStoredAsJSONStillRead() throws {
        let state = Self.note(seed: 9, events: 200)
        let json = try CanonicalJSON.encode(state)
        #expect(try NoteState(stored: [UInt8](json)) == state)
        #expect(
            json.count > state.binaryEncoded.count * 2, "JSON \(json.count) B, binary \(state.binaryEncoded.count) B")
    }

    @Test func damagedStateIsRefused() {
        let bytes = Self.note(seed: 4, events: 50).binaryEncoded
        #expect(throws: SyncCRDTError.self) { try NoteState(stored: Array(bytes.dropLast())) }
        #expect(throws: SyncCRDTError.self) { try NoteState(stored: [9] + bytes.dropFirst()) }
        #expect(throws: (any Error).self) { try NoteState(stored: Array("{\"created\":".utf8)) }
    }
}
