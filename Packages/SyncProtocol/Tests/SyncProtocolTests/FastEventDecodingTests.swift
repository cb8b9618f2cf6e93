import Foundation
import SyncModels
import Testing

@testable import SyncProtocol

/// The fast decoding path must give exactly what `JSONDecoder` gives, or step aside (nil).
@Suite struct FastEventDecodingTests {
    static func randomValue<G: RandomNumberGenerator>(depth: Int, using random: inout G) -> JSONValue {
        switch Int.random(in: 0..<(depth > 2 ? 5 : 7), using: &random) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &random))
        case 2: return .int(Int64.random(in: Int64.min...Int64.max, using: &random))
        case 3:
            let alphabet = Array("aé\"\\/\n\t\u{1}😀 z{}[]:,0")
            return .string(
                String(
                    (0..<Int.random(in: 0..<12, using: &random)).map { _ in alphabet.randomElement(using: &random)! }))
        case 4: return .int(Int64.random(in: -1000...1000, using: &random))
        case 5:
            return .array(
                (0..<Int.random(in: 0..<4, using: &random)).map { _ in randomValue(depth: depth + 1, using: &random) })
        default:
            var object: [String: JSONValue] = [:]
            for index in 0..<Int.random(in: 0..<4, using: &random) {
                object["k\(index)\u{e9}"] = randomValue(depth: depth + 1, using: &random)
            }
            return .object(object)
        }
    }

    @Test func agreesWithJSONDecoderOnRandomPushes() throws {
        var random = SystemRandomNumberGenerator()
        let seed = UInt64.random(in: 0...UInt64.max, using: &random)
        print("FastEventDecodingTests seed \(seed)")
        var generator = SplitMix(seed: seed)
        var ids = EventIDGenerator()
        for round in 0..<200 {
            let replica = ReplicaID.random(using: &generator)
            let events = (0..<Int.random(in: 0..<5, using: &generator)).map { index in
                let id = ids.next(wall: 1_700_000_000_000 + UInt64(round), using: &generator)
                return Event(
                    id: id, scope: try! Scope("s-\(index)"), stream: "stream \"\(round)\"",
                    streamVersion: Int64(index + 1),
                    type: "t.\(index)", schemaVersion: 1 + index,
                    hlc: HLCTimestamp(physical: id.milliseconds, counter: UInt16(index), node: replica.high),
                    dot: Dot(replica: replica, counter: UInt64(round * 10 + index + 1)),
                    payload: Self.randomValue(depth: 0, using: &generator), seq: index == 2 ? 99 : nil)
            }
            let request = PushRequest(replica: replica, events: events)
            let data = try JSONEncoder().encode(request)
            let fast = try #require(FastEventDecoding.pushRequest(data), "round \(round)")
            let slow = try JSONDecoder().decode(PushRequest.self, from: data)
            #expect(fast == slow, "round \(round)")
            #expect(fast == request, "round \(round)")
            let sync = SyncRequest(replica: replica, events: events, cursor: "abc", scopes: ["a"], limit: 3)
            let syncData = try JSONEncoder().encode(sync)
            #expect(
                FastEventDecoding.syncRequest(syncData) == (try JSONDecoder().decode(SyncRequest.self, from: syncData)))
        }
    }

    @Test func stepsAsideWhenNotCertain() {
        let event =
            #"{"id":"018f4e3a-5b7c-7d8e-9f00-112233445566","scope":"a","stream":"s","streamVersion":1,"type":"t","schemaVersion":1,"hlc":"0000018f4e3a5b7c:0003:6d2c1f0e9a8b4c7d","dot":{"replica":"6d2c1f0e9a8b4c7d8e9f001122334455","counter":1},"payload":PAYLOAD}"#
        func body(_ payload: String, extra: String = "") -> Data {
            Data(
                #"{"replica":"6d2c1f0e9a8b4c7d8e9f001122334455","events":[\#(event.replacingOccurrences(of: "PAYLOAD", with: payload))]\#(extra)}"#
                    .utf8)
        }
        #expect(FastEventDecoding.pushRequest(body("{}")) != nil)
        #expect(FastEventDecoding.pushRequest(body("{}", extra: #","future":[1,{"x":null}]"#)) != nil)
        for payload in [
            "1.5", "1e3", "01", "{\"a\":1,\"a\":2}", "\"\\ud800\"", "\"\u{1}\"", "99999999999999999999", "tru", "[1,]",
        ] {
            #expect(FastEventDecoding.pushRequest(body(payload)) == nil, "\(payload)")
        }
        #expect(FastEventDecoding.pushRequest(Data("{\"replica\":\"x\",\"events\":[]}".utf8)) == nil)
        #expect(FastEventDecoding.pushRequest(Data("{\"events\":[]}".utf8)) == nil)
        #expect(FastEventDecoding.pushRequest(body("{}", extra: "") + Data(" x".utf8)) == nil)
    }
}

/// A small seeded generator so a failing round can be replayed from the printed seed.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
