import Foundation
import SyncCompression
import SyncModels
import Testing

@testable import SyncProtocol

@Suite struct WireCodecTests {
    static let replica = try! ReplicaID("6d2c1f0e9a8b4c7d8e9f001122334455")

    static func event(_ counter: UInt64 = 1) -> Event {
        var ids = EventIDGenerator()
        return Event(
            id: ids.next(wall: 1_700_000_000_000), scope: "team-1",
            stream: "note:018f4e3a-0000-7000-8000-000000000001", streamVersion: 1, type: "note.created",
            hlc: HLCTimestamp(physical: 1_700_000_000_000, counter: 0, node: replica.high),
            dot: Dot(replica: replica, counter: counter), payload: .object(["title": .string("Groceries")]))
    }

    @Test func pushRequestRoundTripsThroughJSONAndGzip() throws {
        let codec = WireCodec()
        let request = PushRequest(replica: Self.replica, events: [Self.event()])
        let json = try codec.encode(request)
        #expect(try codec.decode(PushRequest.self, body: json, coding: .identity) == request)
        let gzip = Gzip.compress(json)
        #expect(try codec.decode(PushRequest.self, body: gzip, coding: .gzip) == request)
    }

    @Test func notJSONIsMalformed() {
        #expect(throws: SyncProtocolError(.requestMalformed, "the body is not valid JSON (unexpected end at byte 11)"))
        {
            try WireCodec().decode(PushRequest.self, from: Data("{\"replica\":".utf8))
        }
        // Bodies without events go through `JSONDecoder`, after the same rule set.
        for body in [
            #"{"error":{"code":"a","message":"b","code":"c"}}"#, "{\"error\":{}} x",
            "[" + String(repeating: "[", count: 600),
        ] {
            #expect(throws: SyncProtocolError.self) { try WireCodec().decode(ErrorBody.self, from: Data(body.utf8)) }
            do {
                _ = try WireCodec().decode(ErrorBody.self, from: Data(body.utf8))
            } catch {
                #expect(error.code == .requestMalformed, "\(body.prefix(40))")
            }
        }
    }

    @Test func wrongShapesAreInvalidAndNameTheField() throws {
        let cases: [(String, String)] = [
            (#"[]"#, "the body"),
            (#"{"events":[]}"#, "replica"),
            (#"{"replica":"nothex","events":[]}"#, "replica"),
            (#"{"replica":"6d2c1f0e9a8b4c7d8e9f001122334455","events":{}}"#, "events"),
            (#"{"replica":"6d2c1f0e9a8b4c7d8e9f001122334455","events":[{"id":"not-a-uuid"}]}"#, "events[0].id"),
        ]
        for (body, field) in cases {
            do {
                _ = try WireCodec().decode(PushRequest.self, from: Data(body.utf8))
                Issue.record("\(body) decoded")
            } catch {
                #expect(error.code == .requestInvalid, "\(body)")
                #expect(error.message.contains(field), "\(body): \(error.message)")
            }
        }
    }

    @Test func gzipBombStopsAtTheDecompressedCap() throws {
        let limits = ProtocolLimits(maxDecompressedBodyBytes: 1 << 20)
        let bomb = Gzip.compress(Data(count: 64 << 20), level: 9)
        #expect(bomb.count < 1 << 20)
        #expect(throws: SyncProtocolError.self) { try WireCodec(limits: limits).inflate(bomb, coding: .gzip) }
        do {
            _ = try WireCodec(limits: limits).inflate(bomb, coding: .gzip)
        } catch {
            #expect(error.code == .requestTooLarge)
        }
    }

    @Test func truncatedAndCorruptGzipAreMalformed() throws {
        let json = try WireCodec().encode(PushRequest(replica: Self.replica, events: [Self.event()]))
        let gzip = Gzip.compress(json)
        for body in [gzip.prefix(gzip.count / 2), Data("not gzip at all".utf8), Data()] {
            do {
                _ = try WireCodec().inflate(Data(body), coding: .gzip)
                Issue.record("accepted a bad gzip stream")
            } catch {
                #expect(error.code == .requestMalformed)
            }
        }
    }

    @Test func oversizedWireBodiesAreTooLarge() {
        let limits = ProtocolLimits(maxCompressedBodyBytes: 10, maxDecompressedBodyBytes: 20)
        let codec = WireCodec(limits: limits)
        #expect(throws: SyncProtocolError.tooLarge("the body is larger than 10 bytes")) {
            try codec.inflate(Data(count: 11), coding: .gzip)
        }
        #expect(throws: SyncProtocolError.tooLarge("the body is larger than 20 bytes")) {
            try codec.inflate(Data(count: 21), coding: .identity)
        }
    }

    @Test func contentCodings() throws {
        #expect(try ContentCoding(header: nil) == .identity)
        #expect(try ContentCoding(header: "GZIP") == .gzip)
        #expect(try ContentCoding(header: " identity ") == .identity)
        for header in ["br", "deflate", "gzip, gzip", "compress"] {
            #expect(throws: SyncProtocolError.self) { try ContentCoding(header: header) }
        }
        #expect(ContentCoding.acceptsGzip("gzip, deflate"))
        #expect(ContentCoding.acceptsGzip("br;q=1, *;q=0.5"))
        #expect(!ContentCoding.acceptsGzip("gzip;q=0, *"))
        #expect(!ContentCoding.acceptsGzip("identity"))
        #expect(!ContentCoding.acceptsGzip(nil))
    }

    @Test func responsesAreCompressedOnlyWhenAcceptedAndLargeEnough() throws {
        let codec = WireCodec()
        let small = Data(count: 100)
        let large = Data(repeating: 65, count: 4096)
        #expect(codec.compressIfWorthIt(small, acceptEncoding: "gzip").1 == .identity)
        #expect(codec.compressIfWorthIt(large, acceptEncoding: nil).1 == .identity)
        let (packed, coding) = codec.compressIfWorthIt(large, acceptEncoding: "gzip")
        #expect(coding == .gzip)
        #expect(try Gzip.decompress(packed) == large)
    }

    @Test func pushResultsEncodeOnlyTheirFields() throws {
        let id = Self.event().id
        let results = PushResponse(results: [
            .accepted(id, seq: 42), .duplicate(id, seq: 17),
            .rejected(id, EventRejection(.conflictVersion, "stale", currentVersion: 4)),
        ])
        let object = try JSONSerialization.jsonObject(with: WireCodec().encode(results)) as! [String: [[String: Any]]]
        let rows = object["results"]!
        #expect(Set(rows[0].keys) == ["id", "status", "seq"])
        #expect(rows[1]["status"] as? String == "duplicate")
        #expect(Set(rows[2].keys) == ["id", "status", "code", "message", "currentVersion"])
        #expect(rows[2]["code"] as? String == "conflict.version")
    }
}
