import Foundation
import SyncModels
import SyncTestSupport
import Testing

@testable import SyncProtocol

/// The bodies that carry events are read by `JSONReader` alone: what it gives must be what the `Codable`
/// conformances describe (checked against `JSONDecoder` on bodies both read the same), and what it refuses
/// is refused with the error class of the rule set.
@Suite struct FastEventDecodingTests {
    static func randomValue<G: RandomNumberGenerator>(depth: Int, using random: inout G) -> JSONValue {
        switch Int.random(in: 0..<(depth > 2 ? 6 : 8), using: &random) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &random))
        case 2: return .int(Int64.random(in: Int64.min...Int64.max, using: &random))
        case 3:
            let alphabet = Array("aé\"\\/\n\t\u{1}😀 z{}[]:,0")
            return .string(
                String(
                    (0..<Int.random(in: 0..<12, using: &random)).map { _ in alphabet.randomElement(using: &random)! }))
        case 4: return .int(Int64.random(in: -1000...1000, using: &random))
        // Not integral: `JSONDecoder` reads an integral double back as an integer (JSON has one number type).
        case 5: return .double(Double(Int.random(in: -100_000...100_000, using: &random)) + 0.25)
        case 6:
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

    static func randomEvents(round: Int, replica: ReplicaID, using generator: inout SplitMix) -> [Event] {
        var ids = EventIDGenerator()
        return (0..<Int.random(in: 0..<5, using: &generator)).map { index in
            let id = ids.next(wall: 1_700_000_000_000 + UInt64(round), using: &generator)
            return Event(
                id: id, scope: try! Scope("s-\(index)"), stream: "stream \"\(round)\"", streamVersion: Int64(index + 1),
                type: "t.\(index)", schemaVersion: 1 + index,
                hlc: HLCTimestamp(physical: id.milliseconds, counter: UInt16(index), node: replica.high),
                dot: Dot(replica: replica, counter: UInt64(round * 10 + index + 1)),
                payload: Self.randomValue(depth: 0, using: &generator), seq: index == 2 ? 99 : nil,
                receivedAt: index == 3 ? Date(timeIntervalSince1970: 1_700_000_000.125) : nil)
        }
    }

    @Test func agreesWithJSONDecoderOnRandomBodies() throws {
        var random = SystemRandomNumberGenerator()
        let seed = UInt64.random(in: 0...UInt64.max, using: &random)
        print("FastEventDecodingTests seed \(seed)")
        var generator = SplitMix(seed: seed)
        let encoder = WireCodec.encoder
        let decoder = WireCodec.decoder
        for round in 0..<200 {
            let replica = ReplicaID.random(using: &generator)
            let events = Self.randomEvents(round: round, replica: replica, using: &generator)
            let request = PushRequest(replica: replica, events: events)
            let data = try encoder.encode(request)
            let fast = try FastEventDecoding.pushRequest(data)
            #expect(fast == (try decoder.decode(PushRequest.self, from: data)), "round \(round)")
            #expect(fast.events.map(\.payload) == request.events.map(\.payload), "round \(round)")

            let sync = SyncRequest(replica: replica, events: events, cursor: "abc", scopes: ["a"], limit: 3)
            let syncData = try encoder.encode(sync)
            #expect(
                try FastEventDecoding.syncRequest(syncData) == (try decoder.decode(SyncRequest.self, from: syncData)))

            // `WireCodec.encode` writes these bodies with `JSONWriter`: the same values, canonical payloads.
            let written = try WireCodec().encode(request)
            #expect(try FastEventDecoding.pushRequest(written) == fast, "round \(round)")
            #expect(try decoder.decode(PushRequest.self, from: written) == fast, "round \(round)")
            for event in events {
                let payload = String(decoding: event.payload.canonicalData(), as: UTF8.self)
                #expect(String(decoding: written, as: UTF8.self).contains(#""payload":\#(payload)"#))
            }
            let excluding = SyncRequest(
                replica: replica, events: events, cursor: "abc", acknowledged: "ab", excludeOwn: round % 2 == 0)
            #expect(try FastEventDecoding.syncRequest(WireCodec().encode(excluding)) == excluding)
            for body in [sync, SyncRequest(replica: replica, events: events), excluding] {
                let writtenSync = try WireCodec().encode(body)
                #expect(
                    try FastEventDecoding.syncRequest(writtenSync)
                        == (try decoder.decode(SyncRequest.self, from: writtenSync)))
                #expect(
                    try decoder.decode(SyncRequest.self, from: writtenSync)
                        == decoder.decode(SyncRequest.self, from: encoder.encode(body)))
            }

            let results = events.map { event in
                event.seq == nil
                    ? PushResult.accepted(event.id, seq: Int64(round))
                    : .rejected(event.id, EventRejection(.conflictVersion, "stale \"v\"", currentVersion: 4))
            }
            // `remaining` is optional: servers older than it leave it out.
            let pull = PullResponse(
                events: events, cursor: "c-\(round)", hasMore: round % 2 == 0, remaining: round % 3 == 0 ? nil : round,
                stable: round % 2 == 0 ? nil : ["team-1": Int64(round), "b": 0])
            let pullData = try encoder.encode(pull)
            #expect(
                try FastEventDecoding.pullResponse(pullData) == (try decoder.decode(PullResponse.self, from: pullData)))
            let answer = SyncResponse(
                results: results, events: events, cursor: "c", hasMore: false, remaining: round % 2 == 0 ? nil : 0)
            let answerData = try encoder.encode(answer)
            #expect(
                try FastEventDecoding.syncResponse(answerData)
                    == (try decoder.decode(SyncResponse.self, from: answerData)))
            let pushed = try encoder.encode(PushResponse(results: results))
            #expect(try FastEventDecoding.pushResponse(pushed) == (try decoder.decode(PushResponse.self, from: pushed)))
        }
    }

    /// A sync answer keeps each payload's bytes when they are canonical, and only then; for those it keeps,
    /// they are what the payload's `canonicalData` gives.
    @Test func aSyncAnswerKeepsCanonicalPayloadBytes() throws {
        let payloads = [
            #"{"a":1,"b":["x\n",true]}"#, #"{"b":1, "a":2}"#, #"{"title":"caf\u00e9"}"#, #"[1.5]"#, #"{"z":{}}"#,
        ]
        let events = payloads.map { Self.event.replacingOccurrences(of: "PAYLOAD", with: $0) }
        let body = #"{"results":[],"events":["# + events.joined(separator: ",") + #"],"cursor":"c","hasMore":false}"#
        let answer = try FastEventDecoding.syncResponse(Data(body.utf8))
        #expect(answer.canonicalPayloads.bytes.map { $0 != nil } == [true, false, false, false, true])
        for (index, event) in answer.events.enumerated() {
            // The event holds the bytes it kept, and builds the value from them when asked.
            #expect(event.canonicalPayload == answer.canonicalPayloads[index])
            #expect(event.payload == (try JSONValue(parsing: Data(payloads[index].utf8))))
            if let kept = answer.canonicalPayloads[index] {
                #expect(kept == Data(payloads[index].utf8) && kept == event.payload.canonicalData())
            }
        }
        // Not part of the answer's value.
        var other = answer
        other.canonicalPayloads = CanonicalPayloads()
        #expect(other == answer)
    }

    static let event =
        #"{"id":"018f4e3a-5b7c-7d8e-9f00-112233445566","scope":"a","stream":"s","streamVersion":1,"type":"t","schemaVersion":1,"hlc":"0000018f4e3a5b7c:0003:6d2c1f0e9a8b4c7d","dot":{"replica":"6d2c1f0e9a8b4c7d8e9f001122334455","counter":1},"payload":PAYLOAD}"#

    /// A push body with `payload` as the payload of its event, `extra` after its members.
    static func body(_ payload: String, event: String = event, extra: String = "") -> Data {
        Data(
            #"{"replica":"6d2c1f0e9a8b4c7d8e9f001122334455","events":[\#(event.replacingOccurrences(of: "PAYLOAD", with: payload))]\#(extra)}"#
                .utf8)
    }

    /// The error of decoding `body` as a push; decoding it as a sync must fail the same way.
    static func error(_ body: Data, sourceLocation: SourceLocation = #_sourceLocation) -> SyncProtocolError? {
        func error<T: Decodable>(_ type: T.Type) -> SyncProtocolError? {
            do {
                _ = try WireCodec().decode(type, from: body)
                return nil
            } catch {
                return error
            }
        }
        let push = error(PushRequest.self)
        #expect(error(SyncRequest.self) == push, sourceLocation: sourceLocation)
        return push
    }

    @Test func readsWhatTheRuleSetReads() throws {
        func payload(_ text: String) throws -> JSONValue {
            try #require(FastEventDecoding.pushRequest(Self.body(text)).events.first).payload
        }
        #expect(try payload("{}") == .object([:]))
        #expect(try payload("null") == .null)
        #expect(try payload("1.5") == .double(1.5))
        #expect(try payload("1e3") == .double(1000))
        #expect(try payload("2.0") == .double(2))
        #expect(try payload("99999999999999999999") == .double(1e20))
        #expect(
            try payload(#"{"a":"\u00e9\ud83d\ude42","b":[1,-9223372036854775808]}"#) == [
                "a": "é🙂", "b": [1, .int(.min)],
            ])
        // Unknown keys are skipped, at the top and in events; optional fields may be null.
        let extra = Self.event.replacingOccurrences(
            of: #""type""#, with: #""future":{"x":[1,{"y":null}]},"seq":null,"receivedAt":null,"type""#)
        let request = try FastEventDecoding.pushRequest(Self.body("{}", event: extra, extra: #","later":[true]"#))
        #expect(request.events.first?.seq == nil)
        let received = Self.event.replacingOccurrences(
            of: #""type""#, with: #""receivedAt":"2026-11-22T05:06:37.793Z","type""#)
        #expect(
            try FastEventDecoding.pushRequest(Self.body("{}", event: received)).events.first?.receivedAt
                == RFC3339.date(from: "2026-11-22T05:06:37.793Z"))
        // Ids may use escapes, as any JSON string may.
        let escaped = Self.event.replacingOccurrences(of: #""id":"018f"#, with: #""id":"\u0030\u00318f"#)
        #expect(
            try FastEventDecoding.pushRequest(Self.body("{}", event: escaped)).events.first?.id.description
                == "018f4e3a-5b7c-7d8e-9f00-112233445566")
    }

    /// Refused as `request.malformed`, like any body that is not JSON under the rule set: the same refusals
    /// as `JSONValue(parsing:)`.
    @Test(arguments: [
        #"{"a":1,"a":2}"#, #"{"x":{"k":1,"k":2}}"#, #"[{"a":1},{"b":2,"b":3}]"#, "\"\\ud800\"", "\"\u{1}\"", "tru",
        "[1,]", "01", "1e400", String(repeating: "[", count: 513) + String(repeating: "]", count: 513),
    ])
    func refusesMalformedPayloads(payload: String) {
        let error = Self.error(Self.body(payload))
        #expect(error?.code == .requestMalformed, "\(payload): \(String(describing: error))")
        #expect(throws: SyncModelsError.self) { try JSONValue(parsing: Data(payload.utf8)) }
    }

    @Test func refusesMalformedBodies() {
        let bodies: [Data] = [
            Self.body("{}", extra: #","replica":"6d2c1f0e9a8b4c7d8e9f001122334455""#),
            Self.body(
                "{}", event: Self.event.replacingOccurrences(of: #""type":"t""#, with: #""type":"t","type":"u""#)),
            Self.body("{}", extra: #","unknown":{"z":1,"z":1}"#),
            Self.body("{}", extra: #","unknown":[1,]"#),
            Self.body("{}") + Data(" x".utf8),
            Self.body("{}") + Data("{}".utf8),
            Self.body(#""\#u{FF}""#).replacingInvalidUTF8(),
            Self.body(
                "{}", event: Self.event.replacingOccurrences(of: #""stream":"s""#, with: "\"stream\":\"s\u{FF}\"")
            )
            .replacingInvalidUTF8(),
            Self.body("{}", extra: ",\"unknown\":\"\u{FF}\"").replacingInvalidUTF8(),
            Data(#"{"replica":"nothex","events":[],"x":[1,]}"#.utf8),
            Data(#"{"replica":12,"events":[] "#.utf8),
            Data(),
            Data([0xFF, 0xFE]),
        ]
        for (index, body) in bodies.enumerated() {
            let error = Self.error(body)
            #expect(error?.code == .requestMalformed, "body \(index): \(String(describing: error))")
            #expect(error?.message.hasPrefix("the body is not valid JSON (") == true, "body \(index)")
        }
    }

    @Test(arguments: [
        (#""streamVersion":1"#, #""streamVersion":1.5"#, "events[0].streamVersion must be an integer in range"),
        (#""streamVersion":1"#, #""streamVersion":1e-1"#, "events[0].streamVersion must be an integer in range"),
        (
            #""streamVersion":1"#, #""streamVersion":9223372036854775808.0"#,
            "events[0].streamVersion must be an integer in range"
        ),
        (#""counter":1"#, #""counter":-1.0"#, "events[0].dot.counter must be an integer in range"),
        (
            #""streamVersion":1"#, #""streamVersion":"1""#,
            "events[0].streamVersion has the wrong type (expected an integer)"
        ),
        (#""streamVersion":1"#, #""streamVersion":null"#, "events[0].streamVersion must not be null"),
        (#""schemaVersion":1"#, #""schemaVersion":99999999999999999999"#, "events[0].schemaVersion must be an integer"),
        (#""scope":"a""#, #""scope":"bad scope""#, "events[0].scope has an invalid value: a scope is"),
        (
            #""id":"018f4e3a-5b7c-7d8e-9f00-112233445566""#, #""id":"nope""#,
            "events[0].id has an invalid value: an event id"
        ),
        (#""counter":1"#, #""counter":-1"#, "events[0].dot.counter must be an integer in range"),
        (#""replica":"6d2c1f0e9a8b4c7d8e9f001122334455","counter""#, #""counter""#, "events[0].dot.replica is missing"),
        (#""type":"t""#, #""type":"t","receivedAt":"noon""#, "events[0].receivedAt has an invalid value: not an RFC"),
        (#""type":"t""#, #""type":["t"]"#, "events[0].type has the wrong type (expected a string)"),
    ])
    func namesTheFieldOfTheWrongShape(original: String, replacement: String, message: String) throws {
        let body = Self.body("{}", event: Self.event.replacingOccurrences(of: original, with: replacement))
        let error = Self.error(body)
        #expect(error?.code == .requestInvalid, "\(replacement): \(String(describing: error))")
        #expect(error?.message.hasPrefix(message) == true, "\(replacement): \(error?.message ?? "")")
    }

    /// An integer field takes any number whose value is an integer in range, however it is written, as JSON
    /// Schema's `integer` in the OpenAPI document has it (issue 48: a client whose JSON writes a whole double
    /// as `1.0` was refused with 400). The value is exact, never rounded through a `Double`.
    @Test func readsIntegersWrittenWithAFractionOrAnExponent() throws {
        let event = Self.event
            .replacingOccurrences(of: #""streamVersion":1"#, with: #""streamVersion":9223372036854775807.000"#)
            .replacingOccurrences(of: #""schemaVersion":1"#, with: #""schemaVersion":2e0"#)
            .replacingOccurrences(of: #""counter":1"#, with: #""counter":170E-1"#)
            .replacingOccurrences(of: #""type":"t""#, with: #""type":"t","seq":4.0,"carries":-0.0"#)
        let push = try WireCodec().decode(PushRequest.self, from: Self.body("{}", event: event))
        let decoded = try #require(push.events.first)
        #expect(decoded.streamVersion == .max)
        #expect(decoded.schemaVersion == 2)
        #expect(decoded.dot.counter == 17)
        #expect(decoded.seq == 4)
        #expect(decoded.carries == 0)

        let sync = Data(
            #"{"replica":"6d2c1f0e9a8b4c7d8e9f001122334455","events":[],"limit":1.0,"markEvery":25e1}"#.utf8)
        let request = try WireCodec().decode(SyncRequest.self, from: sync)
        #expect(request.limit == 1 && request.markEvery == 250)
        #expect(try request.pullRequest().limit == 1)
    }

    @Test func namesTheMissingOrNullField() {
        let cases: [(String, String)] = [
            (#"[]"#, "the body has the wrong type (expected an object)"),
            (#"{"events":[]}"#, "replica is missing"),
            (#"{"replica":null,"events":[]}"#, "replica must not be null"),
            (#"{"replica":"6d2c1f0e9a8b4c7d8e9f001122334455"}"#, "events is missing"),
            (#"{"replica":"6d2c1f0e9a8b4c7d8e9f001122334455","events":[null]}"#, "events[0] must not be null"),
            (#"{"replica":"6d2c1f0e9a8b4c7d8e9f001122334455","events":[{}]}"#, "events[0].id is missing"),
        ]
        for (body, message) in cases {
            let error = Self.error(Data(body.utf8))
            #expect(error == SyncProtocolError(.requestInvalid, message), "\(body)")
        }
    }
}

extension Data {
    /// The bytes with every U+00FF character (C3 BF) cut to its second byte alone, which is invalid UTF-8.
    func replacingInvalidUTF8() -> Data {
        var bytes: [UInt8] = []
        var index = startIndex
        while index < endIndex {
            if self[index] == 0xC3, index + 1 < endIndex, self[index + 1] == 0xBF {
                bytes.append(0xBF)
                index += 2
            } else {
                bytes.append(self[index])
                index += 1
            }
        }
        return Data(bytes)
    }
}

/// SplitMix64 (SyncTestSupport), so a failing round can be replayed from the printed seed.
typealias SplitMix = SplitMix64
