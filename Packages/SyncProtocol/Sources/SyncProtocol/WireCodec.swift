import Foundation
import SyncCompression
import SyncModels

/// Encodes and decodes protocol v1 bodies: JSON (with RFC 3339 times), optionally gzip, within limits.
///
/// Decoding turns every failure into the `SyncProtocolError` the server answers with: a body that is not
/// JSON is `request.malformed`; JSON of the wrong shape is `request.invalid` with the path of the offending
/// field (never its value); a gzip body that is truncated or corrupt is `request.malformed`; one that
/// inflates past `maxDecompressedBodyBytes` is `request.tooLarge`.
public struct WireCodec: Sendable {
    public var limits: ProtocolLimits

    public init(limits: ProtocolLimits = .standard) {
        self.limits = limits
    }

    /// The JSON bytes of `value`.
    public func encode<T: Encodable>(_ value: T) throws -> Data {
        try Self.encoder.encode(value)
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
        // The event-carrying bodies have a fast path that yields exactly what JSONDecoder would, or nil.
        if T.self == PushRequest.self, let request = FastEventDecoding.pushRequest(data) as? T { return request }
        if T.self == SyncRequest.self, let request = FastEventDecoding.syncRequest(data) as? T { return request }
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
