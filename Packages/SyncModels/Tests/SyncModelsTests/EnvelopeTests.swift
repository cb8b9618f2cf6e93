import Foundation
import Testing

@testable import SyncModels

@Suite struct EnvelopeTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "Fixtures")

    static func fixture(_ name: String) throws -> Data {
        var data = try Data(contentsOf: fixtures.appendingPathComponent(name))
        while data.last == UInt8(ascii: "\n") { data.removeLast() }
        return data
    }

    @Test(arguments: ["event-client.json", "event-server.json", "event-payload-kinds.json"])
    func goldenEnvelopeRoundTripsByteForByte(name: String) throws {
        let golden = try Self.fixture(name)
        let event = try CanonicalJSON.decode(Event.self, from: golden)
        let encoded = try CanonicalJSON.encode(event)
        #expect(String(decoding: encoded, as: UTF8.self) == String(decoding: golden, as: UTF8.self))
        try event.validate()
    }

    /// An event holding its payload as canonical bytes is the event holding the value: equal, same hash,
    /// same encoding; setting the payload replaces the bytes.
    @Test func anEventHoldingCanonicalBytesIsTheEventHoldingTheirValue() throws {
        let golden = try CanonicalJSON.decode(Event.self, from: Self.fixture("event-server.json"))
        let bytes = golden.payload.canonicalData()
        try bytes.withUnsafeBytes { #expect(JSONWriter.isCanonical($0)) }
        let held = Event(
            id: golden.id, scope: golden.scope, stream: golden.stream, streamVersion: golden.streamVersion,
            type: golden.type, schemaVersion: golden.schemaVersion, hlc: golden.hlc, dot: golden.dot,
            canonicalPayload: bytes, seq: golden.seq, receivedAt: golden.receivedAt)
        #expect(held.canonicalPayload == bytes && golden.canonicalPayload == nil)
        #expect(held.payload == golden.payload)
        #expect(held == golden && golden == held)
        #expect(held.hashValue == golden.hashValue)
        #expect(try CanonicalJSON.encode(held) == CanonicalJSON.encode(golden))
        #expect(try CanonicalJSON.decode(Event.self, from: CanonicalJSON.encode(held)) == golden)
        var other = held
        other.payload = ["changed": true]
        #expect(other.canonicalPayload == nil && other != held && other.payload["changed"] == true)
        var sameBytesOtherSeq = held
        sameBytesOtherSeq.seq = (held.seq ?? 0) + 1
        #expect(sameBytesOtherSeq != held)
    }

    @Test func goldenFieldsDecodeToTheirValues() throws {
        let event = try CanonicalJSON.decode(Event.self, from: Self.fixture("event-server.json"))
        #expect(event.id.description == "018f4e3a-5b7c-7d8e-9f00-112233445566")
        #expect(event.scope == "team-1")
        #expect(event.streamVersion == 3)
        #expect(event.hlc.counter == 3)
        #expect(event.dot.counter == 17)
        #expect(event.dot.replica.high == event.hlc.node)
        #expect(event.seq == 42)
        #expect(event.receivedAt.map(RFC3339.string(from:)) == "2026-11-22T05:06:37.793Z")
        #expect(event.payload["title"]?.stringValue == "Groceries")
    }

    @Test(arguments: [
        "event-invalid-id.json", "event-invalid-hlc.json", "event-invalid-scope.json", "event-missing-dot.json",
    ])
    func malformedEnvelopesDoNotDecode(name: String) throws {
        let data = try Self.fixture(name)
        #expect(throws: DecodingError.self) { try CanonicalJSON.decode(Event.self, from: data) }
    }

    @Test func validationNamesTheBrokenField() throws {
        var event = try CanonicalJSON.decode(Event.self, from: Self.fixture("event-client.json"))
        event.streamVersion = 0
        #expect(throws: SyncModelsError(code: "event.invalid", message: "streamVersion must be at least 1")) {
            try event.validate()
        }
    }

    @Test func largeIntegersSurviveInPayloads() throws {
        let value = JSONValue.object(["big": .int(9_007_199_254_740_993), "pi": .double(3.25), "n": .null])
        let data = try CanonicalJSON.encode(value)
        #expect(String(decoding: data, as: UTF8.self) == #"{"big":9007199254740993,"n":null,"pi":3.25}"#)
        #expect(try CanonicalJSON.decode(JSONValue.self, from: data) == value)
    }
}

@Suite struct CursorAndScopeTests {
    @Test func cursorRoundTripsAndIsOpaqueBase64URL() throws {
        var cursor = ScopeCursor()
        #expect(cursor.encoded == "")
        cursor.advance("team-1", to: 42)
        cursor.advance("user:ann", to: 7)
        cursor.advance("team-1", to: 3)  // never backwards
        let text = cursor.encoded
        #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
        let decoded = try ScopeCursor(encoded: text)
        #expect(decoded == cursor)
        #expect(decoded["team-1"] == 42)
        #expect(decoded["other"] == 0)
        #expect(try ScopeCursor(encoded: nil) == ScopeCursor())
    }

    @Test(arguments: ["%%%", "bm90IGpzb24", "eyJhIjotMX0", "eyIgIjoxfQ", "W10"])
    func invalidCursorsAreRejected(text: String) {
        // not base64, "not json", {"a":-1}, {" ":1}, []
        #expect(throws: SyncModelsError.self) { try ScopeCursor(encoded: text) }
    }

    @Test func scopeNamesFollowTheRules() throws {
        #expect(try Scope("team-1").name == "team-1")
        #expect(try Scope("a.b_c:d-E9").name == "a.b_c:d-E9")
        for bad in ["", "has space", "slash/no", String(repeating: "x", count: 129), "ünï"] {
            #expect(throws: SyncModelsError.self) { try Scope(bad) }
        }
    }

    @Test func replicaIDsRoundTrip() throws {
        let replica = ReplicaID.random()
        #expect(try ReplicaID(replica.description) == replica)
        #expect(replica.description.count == 32)
        #expect(throws: SyncModelsError.self) { try ReplicaID("xyz") }
    }
}
