import Foundation
import OpenAPIKit
import SyncModels
import Testing

@testable import SyncProtocol

@Suite struct OpenAPIDocumentTests {
    static func document() throws -> OpenAPI.Document {
        try JSONDecoder().decode(OpenAPI.Document.self, from: Data(OpenAPIDocument.json.utf8))
    }

    @Test func isValidOpenAPI31() throws {
        let document = try Self.document()
        #expect(document.openAPIVersion == .v3_1_0)
        try document.validate()
    }

    @Test func describesExactlyTheListedOperations() throws {
        let document = try Self.document()
        var operations: [String] = []
        for (path, item) in document.paths {
            guard let item = item.pathItemValue else { continue }
            for endpoint in item.endpoints {
                operations.append("\(endpoint.method.rawValue.uppercased()) \(path.rawValue)")
            }
        }
        #expect(operations.sorted() == OpenAPIDocument.operations.sorted())
    }

    @Test func listsEveryErrorCodeAndRejectionCode() throws {
        let text = OpenAPIDocument.json
        for code in ErrorCode.requestCodes + ErrorCode.rejectionCodes {
            #expect(text.contains("\"\(code.rawValue)\""), "\(code) is not in the document")
        }
        let limits = ProtocolLimits.standard
        #expect(text.contains("\"maxItems\": \(limits.maxEventsPerPush)"))
        #expect(text.contains("\"maximum\": \(limits.maxPullLimit)"))
        #expect(text.contains("\"maximum\": \(limits.maxWaitSeconds)"))
    }

    /// The document as plain JSON: `components.schemas`.
    static func schemas() throws -> [String: Any] {
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(OpenAPIDocument.json.utf8)) as? [String: Any])
        let components = try #require(object["components"] as? [String: Any])
        return try #require(components["schemas"] as? [String: Any])
    }

    /// The names of the properties a schema of `components.schemas` declares (and those of its `allOf`).
    static func properties(_ name: String, in schemas: [String: Any]) throws -> Set<String> {
        let schema = try #require(schemas[name] as? [String: Any], "no schema \(name)")
        var names = Set((schema["properties"] as? [String: Any] ?? [:]).keys)
        for part in schema["allOf"] as? [[String: Any]] ?? [] {
            if let reference = part["$ref"] as? String {
                names.formUnion(try properties(String(reference.split(separator: "/").last!), in: schemas))
            }
            names.formUnion((part["properties"] as? [String: Any] ?? [:]).keys)
        }
        return names
    }

    /// The keys of `value` as JSON, every optional field of it set.
    static func keys<T: Encodable>(_ value: T) throws -> Set<String> {
        let object = try JSONSerialization.jsonObject(with: try WireCodec.encoder.encode(value))
        return Set(try #require(object as? [String: Any]).keys)
    }

    /// The schemas of the answers name exactly the fields the protocol's types carry (issue 48: `purged`, in
    /// docs/PROTOCOL.md and the code, was missing from the schemas of pull and sync answers), and a pushed
    /// event's schema the fields an event carries.
    @Test func answerSchemasNameEveryFieldOfTheirTypes() throws {
        let schemas = try Self.schemas()
        let id = try EventID("018f4e3a-5b7c-7d8e-9f00-112233445566")
        let replica = try ReplicaID("6d2c1f0e9a8b4c7d8e9f001122334455")
        var event = Event(
            id: id, scope: try Scope("a"), stream: "s", streamVersion: 1, type: "t", schemaVersion: 1,
            hlc: HLCTimestamp(physical: 1, counter: 0, node: replica.high), dot: Dot(replica: replica, counter: 1),
            payload: .null, seq: 1, receivedAt: Date(timeIntervalSince1970: 0))
        event.carries = 0
        let points: [String: Int64] = ["a": 1]
        let answers: [(String, Set<String>)] = [
            (
                "PullResponse",
                try Self.keys(
                    PullResponse(
                        events: [], cursor: "", hasMore: false, remaining: 0, stable: points, othersStable: points,
                        marks: [], purged: points))
            ),
            (
                "SyncResponse",
                try Self.keys(
                    SyncResponse(
                        results: [], events: [], cursor: "", hasMore: false, remaining: 0, stable: points,
                        othersStable: points, marks: [], purged: points))
            ),
            (
                "PushResult",
                try Self.keys(
                    PushResult(
                        id: id, status: .rejected, seq: 1, code: .conflictVersion, message: "m", currentVersion: 1))
            ),
            (
                "ChecksumResponse",
                try Self.keys(
                    ChecksumResponse(
                        scope: "a", after: 0, through: 1, checksum: 1, events: 1, head: 1, compactedThrough: 0))
            ),
            ("LiveFrame", try Self.keys(LiveFrame(scope: try Scope("a"), after: 0, head: 1, events: [event]))),
            ("LiveSubscribed", try Self.keys(LiveMessage.Subscribed(heartbeatSeconds: 15))),
            ("StoredEvent", try Self.keys(event)),
            ("PushedEvent", try Self.keys(event)),
        ]
        for (name, keys) in answers {
            #expect(try Self.properties(name, in: schemas) == keys, "\(name)")
        }
    }

    /// Request schemas describe what the server parses (issue 48): a pushed event's integers in the range the
    /// decoder reads, with its envelope's rules left to the per-event answer; optional sync fields that take
    /// `null`; cursors in the alphabet the server issues; HLCs with a 48-bit physical time.
    @Test func requestSchemasStateWhatTheServerParses() throws {
        let schemas = try Self.schemas()
        let pushed = try #require((schemas["PushedEvent"] as? [String: Any])?["properties"] as? [String: Any])
        for field in ["streamVersion", "schemaVersion"] {
            let schema = try #require(pushed[field] as? [String: Any])
            #expect(schema["minimum"] as? Int64 == .min && schema["maximum"] as? Int64 == .max, "\(field)")
        }
        let push = try #require((schemas["PushRequest"] as? [String: Any])?["properties"] as? [String: Any])
        let items = try #require((push["events"] as? [String: Any])?["items"] as? [String: Any])
        #expect(items["$ref"] as? String == "#/components/schemas/PushedEvent")
        let sync = try #require((schemas["SyncRequest"] as? [String: Any])?["properties"] as? [String: Any])
        for field in ["scopes", "limit", "excludeOwn", "markEvery"] {
            let types = try #require((sync[field] as? [String: Any])?["type"] as? [String])
            #expect(types.contains("null"), "\(field)")
        }
        let cursor = try #require(schemas["Cursor"] as? [String: Any])
        let alphabet = try Regex(try #require(cursor["pattern"] as? String))
        #expect(try alphabet.wholeMatch(in: ScopeCursor([try Scope("a.b:c-d_e"): 1_234_567]).encoded) != nil)
        let hlc = try Regex(try #require((schemas["HLC"] as? [String: Any])?["pattern"] as? String))
        #expect(
            try hlc.wholeMatch(in: HLCTimestamp(physical: HLCTimestamp.maxPhysical, counter: 1, node: 2).description)
                != nil)
        #expect(try hlc.wholeMatch(in: "0001000000000000:0000:0000000000000000") == nil)
    }

    @Test func everyRequestCodeHasAStatusAndRejectionCodesDoNotExceptScope() {
        for code in ErrorCode.requestCodes {
            #expect(code.httpStatus != nil, "\(code)")
        }
        #expect(ErrorCode.validationFailed.httpStatus == nil)
        #expect(ErrorCode.conflictVersion.httpStatus == nil)
        #expect(ErrorCode.eventInvalid.httpStatus == nil)
        #expect(ErrorCode.scopeForbidden.httpStatus == 403)
    }
}
