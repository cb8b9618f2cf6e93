import Foundation
import SyncCompression
import SyncModels

/// Encodes and decodes protocol v1 bodies: JSON (with RFC 3339 times), optionally gzip, within limits.
///
/// JSON is read by the one parser of the stack, `JSONReader`, with its one rule set (RFC 8259, nesting up to
/// 512, repeated keys, invalid UTF-8 and trailing data refused): the bodies that carry events entirely
/// (`FastEventDecoding`), any other body is checked by it before `JSONDecoder` maps it to its type.
///
/// Decoding turns every failure into the `SyncProtocolError` the server answers with: a body that is not
/// JSON under the rule set is `request.malformed`; JSON of the wrong shape is `request.invalid` with the path
/// of the offending field (never its value); a gzip body that is truncated or corrupt is `request.malformed`;
/// one that inflates past `maxDecompressedBodyBytes` is `request.tooLarge`.
public struct WireCodec: Sendable {
    public var limits: ProtocolLimits

    public init(limits: ProtocolLimits = .standard) {
        self.limits = limits
    }

    /// The JSON bytes of `value`.
    ///
    /// The bodies a client sends events in (`PushRequest`, `SyncRequest`) are written by `JSONWriter`, the
    /// one writer of the stack: keys sorted, payloads in their canonical form (the bytes the client's log and
    /// the server's store hold for them; a non-finite double is `null` there as in the log). Anything else
    /// goes through `JSONEncoder`.
    public func encode<T: Encodable>(_ value: T) throws -> Data {
        if let request = value as? PushRequest { return Self.write(request) }
        if let request = value as? SyncRequest { return Self.write(request) }
        return try Self.encoder.encode(value)
    }

    /// `{"events":[…],"replica":"…"}`.
    static func write(_ request: PushRequest) -> Data {
        var writer = JSONWriter(capacity: 64 + request.events.count * 400)
        writer.raw("{\"events\":")
        write(request.events, to: &writer)
        writer.raw(",\"replica\":")
        writer.string(request.replica.description)
        writer.raw("}")
        return writer.data
    }

    /// `{"acknowledged":…,"cursor":…,"events":[…],"excludeOwn":…,"limit":…,"markEvery":…,"replica":"…","scopes":[…]}`,
    /// absent fields left out.
    static func write(_ request: SyncRequest) -> Data {
        var writer = JSONWriter(capacity: 128 + request.events.count * 400)
        writer.raw("{")
        if let acknowledged = request.acknowledged {
            writer.raw("\"acknowledged\":")
            writer.string(acknowledged)
            writer.raw(",")
        }
        if let cursor = request.cursor {
            writer.raw("\"cursor\":")
            writer.string(cursor)
            writer.raw(",")
        }
        writer.raw("\"events\":")
        write(request.events, to: &writer)
        if let excludeOwn = request.excludeOwn {
            writer.raw(excludeOwn ? ",\"excludeOwn\":true" : ",\"excludeOwn\":false")
        }
        if let limit = request.limit {
            writer.raw(",\"limit\":")
            writer.int(limit)
        }
        if let markEvery = request.markEvery {
            writer.raw(",\"markEvery\":")
            writer.int(markEvery)
        }
        writer.raw(",\"replica\":")
        writer.string(request.replica.description)
        if let scopes = request.scopes {
            writer.raw(",\"scopes\":[")
            for (index, scope) in scopes.enumerated() {
                if index > 0 { writer.raw(",") }
                writer.string(scope.name)
            }
            writer.raw("]")
        }
        writer.raw("}")
        return writer.data
    }

    /// Events as `Event`'s `Codable` conformance describes them (absent fields left out), keys sorted.
    static func write(_ events: [Event], to writer: inout JSONWriter) {
        writer.raw("[")
        for (index, event) in events.enumerated() {
            if index > 0 { writer.raw(",") }
            writer.raw("{\"dot\":{\"counter\":")
            writer.int(event.dot.counter)
            writer.raw(",\"replica\":")
            writer.string(event.dot.replica.description)
            writer.raw("},\"hlc\":")
            writer.string(event.hlc.description)
            writer.raw(",\"id\":")
            writer.string(event.id.description)
            writer.raw(",\"payload\":")
            writer.value(event.payload)
            if let receivedAt = event.receivedAt {
                writer.raw(",\"receivedAt\":")
                writer.string(RFC3339.string(from: receivedAt))
            }
            writer.raw(",\"schemaVersion\":")
            writer.int(event.schemaVersion)
            writer.raw(",\"scope\":")
            writer.string(event.scope.name)
            if let seq = event.seq {
                writer.raw(",\"seq\":")
                writer.int(seq)
            }
            writer.raw(",\"stream\":")
            writer.string(event.stream)
            writer.raw(",\"streamVersion\":")
            writer.int(event.streamVersion)
            writer.raw(",\"type\":")
            writer.string(event.type)
            writer.raw("}")
        }
        writer.raw("]")
    }

    /// Decodes a body as received: checks the size for its coding, inflates gzip with the cap, parses JSON.
    /// - Throws: `SyncProtocolError` (`request.tooLarge`, `request.malformed`, `request.invalid`).
    public func decode<T: Decodable>(_ type: T.Type, body: Data, coding: ContentCoding) throws(SyncProtocolError)
        -> T
    {
        try decode(type, from: inflate(body, coding: coding))
    }

    /// The plain bytes of a body as received.
    /// - Throws: `SyncProtocolError` `request.tooLarge` past a limit, `request.malformed` for a bad gzip stream.
    public func inflate(_ body: Data, coding: ContentCoding) throws(SyncProtocolError) -> Data {
        guard body.count <= coding.maxWireBytes(limits) else {
            throw .tooLarge("the body is larger than \(coding.maxWireBytes(limits)) bytes")
        }
        switch coding {
        case .identity:
            return body
        case .gzip:
            do {
                return try Gzip.decompress(body, maxOutputBytes: limits.maxDecompressedBodyBytes)
            } catch let error as Gzip.Failure {
                switch error.kind {
                case .tooLarge:
                    throw .tooLarge("the body inflates past \(limits.maxDecompressedBodyBytes) bytes")
                case .truncated:
                    throw .malformed("the gzip stream ends early")
                case .corrupt:
                    throw .malformed("the body is not a valid gzip stream")
                }
            } catch {
                throw .malformed("the body is not a valid gzip stream")
            }
        }
    }

    /// Compresses a response body when the client accepts gzip and the body is at least the threshold.
    /// - Returns: the bytes to send and whether they are gzip.
    public func compressIfWorthIt(_ body: Data, acceptEncoding: String?, level: Int32 = 6) -> (Data, ContentCoding) {
        guard body.count >= limits.compressionThresholdBytes, ContentCoding.acceptsGzip(acceptEncoding) else {
            return (body, .identity)
        }
        return (Gzip.compress(body, level: level), .gzip)
    }

    /// Parses JSON into `type`.
    /// - Throws: `SyncProtocolError` `request.malformed` or `request.invalid`.
    public func decode<T: Decodable>(_ type: T.Type, from data: Data) throws(SyncProtocolError) -> T {
        // The bodies that carry events (and so payloads) are read by `JSONReader` alone.
        if T.self == PushRequest.self { return try FastEventDecoding.pushRequest(data) as! T }
        if T.self == SyncRequest.self { return try FastEventDecoding.syncRequest(data) as! T }
        if T.self == SyncResponse.self { return try FastEventDecoding.syncResponse(data) as! T }
        if T.self == PullResponse.self { return try FastEventDecoding.pullResponse(data) as! T }
        if T.self == PushResponse.self { return try FastEventDecoding.pushResponse(data) as! T }
        if T.self == LiveFrame.self { return try FastEventDecoding.liveFrame(data) as! T }
        // Others: the rule set decides whether the body is JSON, `JSONDecoder` only maps it to `type`.
        try FastEventDecoding.validate(data)
        do {
            return try Self.decoder.decode(type, from: data)
        } catch let error as DecodingError {
            throw Self.protocolError(for: error)
        } catch {
            throw .malformed("the body is not valid JSON")
        }
    }

    /// Maps a `DecodingError` to the protocol's codes, naming the field but never quoting input.
    static func protocolError(for error: DecodingError) -> SyncProtocolError {
        func path(_ codingPath: [any CodingKey], _ key: (any CodingKey)? = nil) -> String {
            let keys = codingPath + (key.map { [$0] } ?? [])
            if keys.isEmpty { return "the body" }
            return keys.map { key in key.intValue.map { "[\($0)]" } ?? ".\(key.stringValue)" }.joined()
                .trimmingPrefix(".").description
        }
        switch error {
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty, context.underlyingError != nil {
                return .malformed("the body is not valid JSON")
            }
            if context.codingPath.isEmpty { return .malformed("the body is not valid JSON") }
            return .invalid("\(path(context.codingPath)) has an invalid value: \(context.debugDescription)")
        case .keyNotFound(let key, let context):
            return .invalid("\(path(context.codingPath, key)) is missing")
        case .valueNotFound(_, let context):
            return .invalid("\(path(context.codingPath)) must not be null")
        case .typeMismatch(let type, let context):
            return .invalid("\(path(context.codingPath)) has the wrong type (expected \(Self.typeName(type)))")
        @unknown default:
            return .invalid("the body does not match the protocol")
        }
    }

    static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "a boolean"
        case is Int.Type, is Int64.Type, is UInt64.Type, is Int32.Type: "an integer"
        case is Double.Type: "a number"
        case is [Any].Type: "an array"
        default: type == [String: Any].self ? "an object" : "a value of another type"
        }
    }

    /// Shared: `JSONEncoder` and `JSONDecoder` are `Sendable` and not mutated after this set-up.
    static let encoder: JSONEncoder = {
        let encoder = CanonicalJSON.encoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }()

    static let decoder: JSONDecoder = CanonicalJSON.decoder()
}
