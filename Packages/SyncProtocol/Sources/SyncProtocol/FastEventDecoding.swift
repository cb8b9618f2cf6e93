import Foundation
import SyncModels

/// Decodes the bodies that carry events — `PushRequest` and `SyncRequest` (the server's push hot path),
/// `PullResponse`, `SyncResponse` and `PushResponse` (the client's) — straight from their bytes with
/// `JSONReader`, the one JSON parser, so that a body and the payloads in it mean the same on the server and
/// the client as everywhere else (see `JSONReader` for the rule set).
///
/// It is the only decoder of these bodies: nothing falls back to `JSONDecoder`. It reads what their
/// `Codable` conformances describe — the same keys, optional fields absent or `null`, unknown keys skipped
/// (but checked), times as RFC 3339 — and refuses the rest with the error the server answers:
/// - `request.malformed` for a body that is not JSON under the rule set (a repeated key, invalid UTF-8,
///   nesting past 512, trailing data, …), even when the wrong shape shows first;
/// - `request.invalid` for JSON of the wrong shape, naming the field (never its value). An integer field
///   takes any number whose value is an integer in range, however it is written (`"streamVersion": 1`,
///   `1.0` or `1e0`), as JSON Schema's `integer` in the OpenAPI document has it; a number with a fraction
///   (`1.5`) or out of range is of the wrong shape.
enum FastEventDecoding {
    static func pushRequest(_ data: Data) throws(SyncProtocolError) -> PushRequest {
        try BodyDecoder.decode(data) { decoder, reader throws(JSONReader.Bail) in try decoder.pushRequest(&reader) }
    }

    static func syncRequest(_ data: Data) throws(SyncProtocolError) -> SyncRequest {
        try BodyDecoder.decode(data) { decoder, reader throws(JSONReader.Bail) in try decoder.syncRequest(&reader) }
    }

    static func pullResponse(_ data: Data) throws(SyncProtocolError) -> PullResponse {
        try BodyDecoder.decode(data) { decoder, reader throws(JSONReader.Bail) in try decoder.pullResponse(&reader) }
    }

    static func syncResponse(_ data: Data) throws(SyncProtocolError) -> SyncResponse {
        try BodyDecoder.decode(data) { decoder, reader throws(JSONReader.Bail) in try decoder.syncResponse(&reader) }
    }

    static func pushResponse(_ data: Data) throws(SyncProtocolError) -> PushResponse {
        try BodyDecoder.decode(data) { decoder, reader throws(JSONReader.Bail) in try decoder.pushResponse(&reader) }
    }

    static func liveFrame(_ data: Data) throws(SyncProtocolError) -> LiveFrame {
        try BodyDecoder.decode(data) { decoder, reader throws(JSONReader.Bail) in try decoder.liveFrame(&reader) }
    }

    /// Checks that a body is JSON under the rule set.
    /// - Throws: `SyncProtocolError` `request.malformed`.
    static func validate(_ data: Data) throws(SyncProtocolError) {
        let outcome = data.withUnsafeBytes { bytes in
            Result { () throws(JSONReader.Bail) in try JSONReader.validate(bytes) }
        }
        if case .failure(let bail) = outcome { throw BodyDecoder.malformed(bail) }
    }
}

/// The reading of one body. A refusal for the shape of the body records `problem` (the message of the
/// `request.invalid` answer) before it throws; a refusal for its syntax comes from the reader.
private struct BodyDecoder {
    typealias Bail = JSONReader.Bail

    private var problem: String?

    static func decode<Body>(
        _ data: Data, _ read: (inout BodyDecoder, inout JSONReader) throws(Bail) -> Body
    ) throws(SyncProtocolError) -> Body {
        var decoder = BodyDecoder()
        let outcome: Result<Body, Bail> = data.withUnsafeBytes { bytes in
            var reader = JSONReader(bytes)
            do throws(Bail) {
                let body = try read(&decoder, &reader)
                try reader.expectEnd()
                return .success(body)
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .success(let body):
            return body
        case .failure(let bail):
            if bail.isMalformed { throw Self.malformed(bail) }
            // The shape is wrong where the reader stopped; the body is only "invalid" if it is JSON at all.
            try FastEventDecoding.validate(data)
            throw .invalid(decoder.problem ?? "the body does not match the protocol")
        }
    }

    static func malformed(_ bail: Bail) -> SyncProtocolError {
        .malformed("the body is not valid JSON (\(bail))")
    }

    // MARK: - Fields

    /// Reads a value with `read`; when it is not of the expected shape, records the problem at `path`.
    private mutating func field<Value>(
        _ reader: inout JSONReader, _ path: @autoclosure () -> String, expected: String,
        _ read: (inout BodyDecoder, inout JSONReader) throws(Bail) -> Value
    ) throws(Bail) -> Value {
        do {
            return try read(&self, &reader)
        } catch {
            guard !error.isMalformed, problem == nil else { throw error }
            switch error.reason {
            case .wrongType where (try? reader.peek()) == UInt8(ascii: "n"):
                problem = "\(path()) must not be null"
            case .wrongType:
                problem = "\(path()) has the wrong type (expected \(expected))"
            case .notAnInteger:
                problem = "\(path()) must be an integer in range"
            default:
                problem = "\(path()) has an invalid value"
            }
            throw error
        }
    }

    private mutating func string(_ reader: inout JSONReader, _ path: @autoclosure () -> String) throws(Bail) -> String {
        try field(&reader, path(), expected: "a string") { _, reader throws(Bail) in try reader.readString() }
    }

    private mutating func int64(_ reader: inout JSONReader, _ path: @autoclosure () -> String) throws(Bail) -> Int64 {
        try field(&reader, path(), expected: "an integer") { _, reader throws(Bail) in try reader.readIntegerValue() }
    }

    private mutating func bool(_ reader: inout JSONReader, _ path: @autoclosure () -> String) throws(Bail) -> Bool {
        try field(&reader, path(), expected: "a boolean") { _, reader throws(Bail) in try reader.readBool() }
    }

    /// A string parsed from its UTF-8 bytes by `parse`; the parser's message (never the input) goes into the
    /// problem.
    private mutating func parsed<Value>(
        _ reader: inout JSONReader, _ path: @autoclosure () -> String,
        _ parse: (UnsafeRawBufferPointer) throws -> Value
    ) throws(Bail) -> Value {
        var detail: String?
        do {
            return try field(&reader, path(), expected: "a string") { _, reader throws(Bail) in
                try reader.readString { bytes in
                    do {
                        return try parse(bytes)
                    } catch {
                        detail = (error as? SyncModelsError)?.message
                        return nil
                    }
                }
            }
        } catch {
            if error.reason == .refused, let detail, let problem, problem.hasSuffix("has an invalid value") {
                self.problem = problem + ": " + detail
            }
            throw error
        }
    }

    /// `null` is nil (and so is an absent key, which the caller never reads).
    private mutating func optional<Value>(
        _ reader: inout JSONReader, _ read: (inout BodyDecoder, inout JSONReader) throws(Bail) -> Value
    ) throws(Bail) -> Value? {
        try reader.readNull() ? nil : try read(&self, &reader)
    }

    private mutating func missing(_ path: String) -> Bail {
        if problem == nil { problem = "\(path) is missing" }
        return Bail()
    }

    private mutating func invalid(_ path: String, _ message: String) -> Bail {
        if problem == nil { problem = "\(path) has an invalid value: \(message)" }
        return Bail()
    }

    /// An object: `member` reads the value of each key it knows and returns false for the others, which are
    /// skipped (and checked).
    private mutating func object(
        _ reader: inout JSONReader, _ path: @autoclosure () -> String,
        _ member: (inout BodyDecoder, inout JSONReader, String) throws(Bail) -> Bool
    ) throws(Bail) {
        try field(&reader, path(), expected: "an object") { decoder, reader throws(Bail) in
            try reader.readObject { reader, key throws(Bail) in
                if try !member(&decoder, &reader, key) { try reader.skipValue() }
            }
        }
    }

    private mutating func array(
        _ reader: inout JSONReader, _ path: @autoclosure () -> String,
        _ element: (inout BodyDecoder, inout JSONReader, Int) throws(Bail) -> Void
    ) throws(Bail) {
        var index = 0
        try field(&reader, path(), expected: "an array") { decoder, reader throws(Bail) in
            try reader.readArray { reader throws(Bail) in
                try element(&decoder, &reader, index)
                index += 1
            }
        }
    }

    // MARK: - Bodies

    mutating func pushRequest(_ reader: inout JSONReader) throws(Bail) -> PushRequest {
        var replica: ReplicaID?
        var events: [Event]?
        try object(&reader, "the body") { decoder, reader, key throws(Bail) in
            switch key {
            case "replica": replica = try decoder.replica(&reader, "replica")
            case "events": events = try decoder.events(&reader, "events")
            default: return false
            }
            return true
        }
        guard let replica else { throw missing("replica") }
        guard let events else { throw missing("events") }
        return PushRequest(replica: replica, events: events)
    }

    mutating func syncRequest(_ reader: inout JSONReader) throws(Bail) -> SyncRequest {
        var replica: ReplicaID?
        var events: [Event]?
        var cursor: String?
        var scopes: [Scope]?
        var limit: Int?
        var acknowledged: String?
        var excludeOwn: Bool?
        var markEvery: Int?
        try object(&reader, "the body") { decoder, reader, key throws(Bail) in
            switch key {
            case "replica": replica = try decoder.replica(&reader, "replica")
            case "markEvery":
                markEvery = try decoder.optional(&reader) { decoder, reader throws(Bail) in
                    Int(try decoder.int64(&reader, "markEvery"))
                }
            case "excludeOwn":
                excludeOwn = try decoder.optional(&reader) { decoder, reader throws(Bail) in
                    try decoder.bool(&reader, "excludeOwn")
                }
            case "acknowledged":
                acknowledged = try decoder.optional(&reader) { decoder, reader throws(Bail) in
                    try decoder.string(&reader, "acknowledged")
                }
            case "events": events = try decoder.events(&reader, "events")
            case "cursor":
                cursor = try decoder.optional(&reader) { decoder, reader throws(Bail) in
                    try decoder.string(&reader, "cursor")
                }
            case "scopes":
                scopes = try decoder.optional(&reader) { decoder, reader throws(Bail) in
                    var list: [Scope] = []
                    try decoder.array(&reader, "scopes") { decoder, reader, index throws(Bail) in
                        list.append(try decoder.scope(&reader, "scopes[\(index)]"))
                    }
                    return list
                }
            case "limit":
                limit = try decoder.optional(&reader) { decoder, reader throws(Bail) in
                    Int(try decoder.int64(&reader, "limit"))
                }
            default: return false
            }
            return true
        }
        guard let replica else { throw missing("replica") }
        guard let events else { throw missing("events") }
        return SyncRequest(
            replica: replica, events: events, cursor: cursor, scopes: scopes, limit: limit, acknowledged: acknowledged,
            excludeOwn: excludeOwn, markEvery: markEvery)
    }

    /// `{"scope": seq, …}`, the value of `field`.
    mutating func stablePoints(_ reader: inout JSONReader, _ field: String = "stable") throws(Bail) -> [String: Int64] {
        var points: [String: Int64] = [:]
        try object(&reader, field) { decoder, reader, key throws(Bail) in
            points[key] = try decoder.int64(&reader, "\(field).\(key)")
            return true
        }
        return points
    }

    /// `["<cursor>", …]`.
    mutating func marks(_ reader: inout JSONReader) throws(Bail) -> [String] {
        var marks: [String] = []
        try array(&reader, "marks") { decoder, reader, index throws(Bail) in
            marks.append(try decoder.string(&reader, "marks[\(index)]"))
        }
        return marks
    }

    mutating func pullResponse(_ reader: inout JSONReader) throws(Bail) -> PullResponse {
        var events: [Event]?
        var cursor: String?
        var hasMore: Bool?
        var remaining: Int64?
        var stable: [String: Int64]?
        var othersStable: [String: Int64]?
        var marks: [String]?
        var purged: [String: Int64]?
        try object(&reader, "the body") { decoder, reader, key throws(Bail) in
            switch key {
            case "marks": marks = try decoder.marks(&reader)
            case "events": events = try decoder.events(&reader, "events")
            case "cursor": cursor = try decoder.string(&reader, "cursor")
            case "hasMore": hasMore = try decoder.bool(&reader, "hasMore")
            case "remaining": remaining = try decoder.int64(&reader, "remaining")
            case "stable": stable = try decoder.stablePoints(&reader)
            case "othersStable": othersStable = try decoder.stablePoints(&reader, "othersStable")
            case "purged": purged = try decoder.stablePoints(&reader, "purged")
            default: return false
            }
            return true
        }
        guard let events else { throw missing("events") }
        guard let cursor else { throw missing("cursor") }
        guard let hasMore else { throw missing("hasMore") }
        return PullResponse(
            events: events, cursor: cursor, hasMore: hasMore, remaining: remaining.map { Int($0) }, stable: stable,
            othersStable: othersStable, marks: marks, purged: purged)
    }

    mutating func liveFrame(_ reader: inout JSONReader) throws(Bail) -> LiveFrame {
        var scope: Scope?
        var after: Int64?
        var head: Int64?
        var events: [Event]?
        try object(&reader, "the frame") { decoder, reader, key throws(Bail) in
            switch key {
            case "scope": scope = try decoder.scope(&reader, "scope")
            case "after": after = try decoder.int64(&reader, "after")
            case "head": head = try decoder.int64(&reader, "head")
            // Each event keeps its payload's canonical bytes: a device stores them as they are (and reads the
            // value only if it needs it), as it does for a pulled page.
            case "events": events = try decoder.eventsAndPayloads(&reader, "events").0
            default: return false
            }
            return true
        }
        guard let scope else { throw missing("scope") }
        guard let after else { throw missing("after") }
        guard let head else { throw missing("head") }
        guard let events else { throw missing("events") }
        return LiveFrame(scope: scope, after: after, head: head, events: events)
    }

    mutating func syncResponse(_ reader: inout JSONReader) throws(Bail) -> SyncResponse {
        var results: [PushResult]?
        var events: [Event]?
        var payloads = CanonicalPayloads()
        var cursor: String?
        var hasMore: Bool?
        var remaining: Int64?
        var stable: [String: Int64]?
        var othersStable: [String: Int64]?
        var marks: [String]?
        var purged: [String: Int64]?
        try object(&reader, "the body") { decoder, reader, key throws(Bail) in
            switch key {
            case "marks": marks = try decoder.marks(&reader)
            case "results": results = try decoder.results(&reader)
            case "events":
                let read = try decoder.eventsAndPayloads(&reader, "events")
                events = read.0
                payloads = read.1
            case "cursor": cursor = try decoder.string(&reader, "cursor")
            case "hasMore": hasMore = try decoder.bool(&reader, "hasMore")
            case "remaining": remaining = try decoder.int64(&reader, "remaining")
            case "stable": stable = try decoder.stablePoints(&reader)
            case "othersStable": othersStable = try decoder.stablePoints(&reader, "othersStable")
            case "purged": purged = try decoder.stablePoints(&reader, "purged")
            default: return false
            }
            return true
        }
        guard let results else { throw missing("results") }
        guard let events else { throw missing("events") }
        guard let cursor else { throw missing("cursor") }
        guard let hasMore else { throw missing("hasMore") }
        var response = SyncResponse(
            results: results, events: events, cursor: cursor, hasMore: hasMore, remaining: remaining.map { Int($0) },
            stable: stable, othersStable: othersStable, marks: marks, purged: purged)
        response.canonicalPayloads = payloads
        return response
    }

    mutating func pushResponse(_ reader: inout JSONReader) throws(Bail) -> PushResponse {
        var results: [PushResult]?
        try object(&reader, "the body") { decoder, reader, key throws(Bail) in
            guard key == "results" else { return false }
            results = try decoder.results(&reader)
            return true
        }
        guard let results else { throw missing("results") }
        return PushResponse(results: results)
    }

    // MARK: - Parts

    private mutating func replica(_ reader: inout JSONReader, _ path: @autoclosure () -> String) throws(Bail)
        -> ReplicaID
    {
        try parsed(&reader, path()) { try ReplicaID(utf8: $0) }
    }

    private mutating func scope(_ reader: inout JSONReader, _ path: @autoclosure () -> String) throws(Bail) -> Scope {
        let name = try string(&reader, path())
        do {
            return try Scope(name)
        } catch {
            throw invalid(path(), (error as? SyncModelsError)?.message ?? "not a scope name")
        }
    }

    private mutating func events(_ reader: inout JSONReader, _ path: String) throws(Bail) -> [Event] {
        var events: [Event] = []
        try array(&reader, path) { decoder, reader, index throws(Bail) in
            events.append(try decoder.event(&reader, index))
        }
        return events
    }

    /// `events`, with each payload's bytes when they are canonical (`CanonicalPayloads`).
    private mutating func eventsAndPayloads(_ reader: inout JSONReader, _ path: String) throws(Bail) -> (
        [Event], CanonicalPayloads
    ) {
        var events: [Event] = []
        var payloads = CanonicalPayloads()
        try array(&reader, path) { decoder, reader, index throws(Bail) in
            var bytes: Data?
            events.append(try decoder.event(&reader, index, canonicalPayload: &bytes))
            payloads.bytes.append(bytes)
        }
        return (events, payloads)
    }

    /// One event, as `Event`'s `Codable` conformance reads it.
    private mutating func event(_ reader: inout JSONReader, _ index: Int) throws(Bail) -> Event {
        var ignored: Data?
        return try event(&reader, index, canonicalPayload: &ignored, keep: false)
    }

    /// One event; `canonicalPayload` gets its payload's bytes when `keep` and they are canonical.
    private mutating func event(
        _ reader: inout JSONReader, _ index: Int, canonicalPayload: inout Data?, keep: Bool = true
    ) throws(Bail) -> Event {
        var id: EventID?
        var scope: Scope?
        var stream: String?
        var streamVersion: Int64?
        var type: String?
        var schemaVersion: Int?
        var hlc: HLCTimestamp?
        var dot: Dot?
        var payload: JSONValue?
        var canonical: Data?
        var seq: Int64?
        var receivedAt: Date?
        var carries: Int64?
        try object(&reader, "events[\(index)]") { decoder, reader, key throws(Bail) in
            switch key {
            case "id": id = try decoder.parsed(&reader, "events[\(index)].id") { try EventID(utf8: $0) }
            case "scope": scope = try decoder.scope(&reader, "events[\(index)].scope")
            case "stream": stream = try decoder.string(&reader, "events[\(index)].stream")
            case "streamVersion": streamVersion = try decoder.int64(&reader, "events[\(index)].streamVersion")
            case "type": type = try decoder.string(&reader, "events[\(index)].type")
            case "schemaVersion": schemaVersion = Int(try decoder.int64(&reader, "events[\(index)].schemaVersion"))
            case "hlc":
                hlc = try decoder.parsed(&reader, "events[\(index)].hlc") { try HLCTimestamp(utf8: $0) }
            case "dot": dot = try decoder.dot(&reader, index)
            case "payload":
                if keep {
                    // Canonical bytes are kept as they are; the event builds the value only if it is read.
                    let raw = try reader.readRawValue()
                    if JSONWriter.isCanonical(raw) {
                        canonical = Data(raw)
                        payload = nil
                    } else {
                        var nested = JSONReader(raw)
                        payload = try nested.readValue()
                        canonical = nil
                    }
                } else {
                    payload = try reader.readValue()
                }
            case "seq":
                seq = try decoder.optional(&reader) { decoder, reader throws(Bail) in
                    try decoder.int64(&reader, "events[\(index)].seq")
                }
            case "carries":
                carries = try decoder.optional(&reader) { decoder, reader throws(Bail) in
                    try decoder.int64(&reader, "events[\(index)].carries")
                }
            case "receivedAt":
                receivedAt = try decoder.optional(&reader) { decoder, reader throws(Bail) in
                    let text = try decoder.string(&reader, "events[\(index)].receivedAt")
                    guard let date = RFC3339.date(from: text) else {
                        throw decoder.invalid("events[\(index)].receivedAt", "not an RFC 3339 time")
                    }
                    return date
                }
            default: return false
            }
            return true
        }
        guard let id else { throw missing("events[\(index)].id") }
        guard let scope else { throw missing("events[\(index)].scope") }
        guard let stream else { throw missing("events[\(index)].stream") }
        guard let streamVersion else { throw missing("events[\(index)].streamVersion") }
        guard let type else { throw missing("events[\(index)].type") }
        guard let schemaVersion else { throw missing("events[\(index)].schemaVersion") }
        guard let hlc else { throw missing("events[\(index)].hlc") }
        guard let dot else { throw missing("events[\(index)].dot") }
        var event: Event
        if let canonical {
            canonicalPayload = canonical
            event = Event(
                id: id, scope: scope, stream: stream, streamVersion: streamVersion, type: type,
                schemaVersion: schemaVersion, hlc: hlc, dot: dot, canonicalPayload: canonical, seq: seq,
                receivedAt: receivedAt)
        } else {
            canonicalPayload = nil
            guard let payload else { throw missing("events[\(index)].payload") }
            event = Event(
                id: id, scope: scope, stream: stream, streamVersion: streamVersion, type: type,
                schemaVersion: schemaVersion, hlc: hlc, dot: dot, payload: payload, seq: seq, receivedAt: receivedAt)
        }
        event.carries = carries
        return event
    }

    private mutating func dot(_ reader: inout JSONReader, _ index: Int) throws(Bail) -> Dot {
        var replica: ReplicaID?
        var counter: UInt64?
        try object(&reader, "events[\(index)].dot") { decoder, reader, key throws(Bail) in
            switch key {
            case "replica": replica = try decoder.replica(&reader, "events[\(index)].dot.replica")
            case "counter":
                counter = try decoder.field(&reader, "events[\(index)].dot.counter", expected: "an integer") {
                    _, reader throws(Bail) in
                    let value = try reader.readIntegerValue()
                    guard value >= 0 else { throw Bail(.notAnInteger, at: nil) }
                    return UInt64(value)
                }
            default: return false
            }
            return true
        }
        guard let replica else { throw missing("events[\(index)].dot.replica") }
        guard let counter else { throw missing("events[\(index)].dot.counter") }
        return Dot(replica: replica, counter: counter)
    }

    private mutating func results(_ reader: inout JSONReader) throws(Bail) -> [PushResult] {
        var results: [PushResult] = []
        try array(&reader, "results") { decoder, reader, index throws(Bail) in
            results.append(try decoder.result(&reader, index))
        }
        return results
    }

    /// One push result, as `PushResult`'s `Codable` conformance reads it.
    private mutating func result(_ reader: inout JSONReader, _ index: Int) throws(Bail) -> PushResult {
        var id: EventID?
        var status: PushResult.Status?
        var seq: Int64?
        var code: ErrorCode?
        var message: String?
        var currentVersion: Int64?
        try object(&reader, "results[\(index)]") { decoder, reader, key throws(Bail) in
            switch key {
            case "id": id = try decoder.parsed(&reader, "results[\(index)].id") { try EventID(utf8: $0) }
            case "status":
                let text = try decoder.string(&reader, "results[\(index)].status")
                guard let value = PushResult.Status(rawValue: text) else {
                    throw decoder.invalid("results[\(index)].status", "not a status of protocol v1")
                }
                status = value
            case "seq":
                seq = try decoder.optional(&reader) { decoder, reader throws(Bail) in
                    try decoder.int64(&reader, "results[\(index)].seq")
                }
            case "code":
                code = try decoder.optional(&reader) { decoder, reader throws(Bail) in
                    ErrorCode(rawValue: try decoder.string(&reader, "results[\(index)].code"))
                }
            case "message":
                message = try decoder.optional(&reader) { decoder, reader throws(Bail) in
                    try decoder.string(&reader, "results[\(index)].message")
                }
            case "currentVersion":
                currentVersion = try decoder.optional(&reader) { decoder, reader throws(Bail) in
                    try decoder.int64(&reader, "results[\(index)].currentVersion")
                }
            default: return false
            }
            return true
        }
        guard let id else { throw missing("results[\(index)].id") }
        guard let status else { throw missing("results[\(index)].status") }
        return PushResult(
            id: id, status: status, seq: seq, code: code, message: message, currentVersion: currentVersion)
    }
}
