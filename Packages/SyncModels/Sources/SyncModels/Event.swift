import Foundation

/// The event envelope of protocol v1: one change to one stream (aggregate) in one scope.
///
/// Clients create events with `seq` and `receivedAt` absent; the server fills both in. Encoding with
/// `CanonicalJSON` (sorted keys) and decoding again round-trips byte for byte.
public struct Event: Hashable, Sendable, Codable {
    /// UUIDv7 made by the client; the idempotency key.
    public var id: EventID
    public var scope: Scope
    /// The stream (aggregate) this event belongs to, e.g. `note:<uuid>`.
    public var stream: String
    /// The version of `stream` after this event (1 for the stream's first event).
    public var streamVersion: Int64
    /// The event type, e.g. `note.titleSet`.
    public var type: String
    public var schemaVersion: Int
    public var hlc: HLCTimestamp
    public var dot: Dot
    /// The domain's payload. An event decoded from canonical JSON (`init(…canonicalPayload:…)`) holds its
    /// payload's bytes and builds this value only when it is read: a device applying a pulled page stores
    /// and projects the bytes, and never needs the value.
    public var payload: JSONValue {
        get {
            switch storedPayload {
            case .value(let value): return value
            case .canonical(let bytes): return Self.value(ofCanonical: bytes)
            }
        }
        set { storedPayload = .value(newValue) }
    }
    /// The event's position in its scope, assigned by the server.
    public var seq: Int64?
    /// When the server committed the event.
    public var receivedAt: Date?
    /// For a folded row (a snapshot the server's compaction wrote): the sum of the checksums of the events
    /// it replaced (`EventChecksum`), which it adds to its scope's checksum in their place. Absent for an
    /// ordinary event, whose checksum anyone computes from its fields. Not part of equality.
    public var carries: Int64?

    public init(
        id: EventID, scope: Scope, stream: String, streamVersion: Int64, type: String, schemaVersion: Int = 1,
        hlc: HLCTimestamp, dot: Dot, payload: JSONValue, seq: Int64? = nil, receivedAt: Date? = nil
    ) {
        self.id = id
        self.scope = scope
        self.stream = stream
        self.streamVersion = streamVersion
        self.type = type
        self.schemaVersion = schemaVersion
        self.hlc = hlc
        self.dot = dot
        self.storedPayload = .value(payload)
        self.seq = seq
        self.receivedAt = receivedAt
    }

    /// An event whose payload is held as the canonical JSON bytes `canonicalPayload`: bytes that
    /// `JSONReader` accepted and for which `JSONWriter.isCanonical` holds (a decoder that checked both keeps
    /// the bytes it read instead of building the value). `payload` parses them when it is read.
    public init(
        id: EventID, scope: Scope, stream: String, streamVersion: Int64, type: String, schemaVersion: Int = 1,
        hlc: HLCTimestamp, dot: Dot, canonicalPayload: Data, seq: Int64? = nil, receivedAt: Date? = nil
    ) {
        self.init(
            id: id, scope: scope, stream: stream, streamVersion: streamVersion, type: type,
            schemaVersion: schemaVersion, hlc: hlc, dot: dot, payload: .null, seq: seq, receivedAt: receivedAt)
        self.storedPayload = .canonical(canonicalPayload)
    }

    /// The payload's canonical bytes when the event holds them (`init(…canonicalPayload:…)`, and `payload`
    /// not set since); nil when it holds a value.
    public var canonicalPayload: Data? {
        if case .canonical(let bytes) = storedPayload { return bytes }
        return nil
    }

    /// How the payload is held: as a value, or as canonical bytes not parsed yet.
    private enum StoredPayload: Sendable {
        case value(JSONValue)
        case canonical(Data)
    }
    private var storedPayload: StoredPayload

    private static func value(ofCanonical bytes: Data) -> JSONValue {
        do {
            return try JSONValue(parsing: bytes)
        } catch {
            preconditionFailure("Event(canonicalPayload:) was given bytes JSONReader refuses: \(error)")
        }
    }

    /// Limits every component that accepts events applies.
    public enum Limits {
        public static let maxStreamLength = 256
        public static let maxTypeLength = 128
    }

    /// Checks the envelope's own rules (not any domain's): a UUIDv7 id, a non-empty stream and type within
    /// their lengths, a positive stream version, schema version and dot counter, and an HLC issued by the
    /// dot's replica.
    /// - Throws: `SyncModelsError` with code `event.invalid` and a message naming the field.
    public func validate() throws {
        func fail(_ message: String) -> SyncModelsError { SyncModelsError(code: "event.invalid", message: message) }
        guard id.isVersion7 else { throw fail("id must be a UUIDv7") }
        guard !stream.isEmpty, stream.utf8.count <= Limits.maxStreamLength else {
            throw fail("stream must be 1-\(Limits.maxStreamLength) bytes")
        }
        guard !type.isEmpty, type.utf8.count <= Limits.maxTypeLength else {
            throw fail("type must be 1-\(Limits.maxTypeLength) bytes")
        }
        guard streamVersion >= 1 else { throw fail("streamVersion must be at least 1") }
        guard schemaVersion >= 1 else { throw fail("schemaVersion must be at least 1") }
        guard dot.counter >= 1 else { throw fail("dot.counter must be at least 1") }
        guard hlc.node == dot.replica.high else { throw fail("hlc node must match dot.replica") }
    }
}

extension Event {
    public static func == (lhs: Event, rhs: Event) -> Bool {
        guard
            lhs.id == rhs.id && lhs.scope == rhs.scope && lhs.stream == rhs.stream
                && lhs.streamVersion == rhs.streamVersion && lhs.type == rhs.type
                && lhs.schemaVersion == rhs.schemaVersion && lhs.hlc == rhs.hlc && lhs.dot == rhs.dot
                && lhs.seq == rhs.seq && lhs.receivedAt == rhs.receivedAt
        else { return false }
        // Equal canonical bytes hold equal values; anything else compares the values.
        if let left = lhs.canonicalPayload, let right = rhs.canonicalPayload, left == right { return true }
        return lhs.payload == rhs.payload
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(scope)
        hasher.combine(stream)
        hasher.combine(streamVersion)
        hasher.combine(type)
        hasher.combine(schemaVersion)
        hasher.combine(hlc)
        hasher.combine(dot)
        hasher.combine(payload)
        hasher.combine(seq)
        hasher.combine(receivedAt)
    }

    private enum CodingKeys: String, CodingKey {
        case id, scope, stream, streamVersion, type, schemaVersion, hlc, dot, payload, seq, receivedAt, carries
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            id: try container.decode(EventID.self, forKey: .id),
            scope: try container.decode(Scope.self, forKey: .scope),
            stream: try container.decode(String.self, forKey: .stream),
            streamVersion: try container.decode(Int64.self, forKey: .streamVersion),
            type: try container.decode(String.self, forKey: .type),
            schemaVersion: try container.decode(Int.self, forKey: .schemaVersion),
            hlc: try container.decode(HLCTimestamp.self, forKey: .hlc),
            dot: try container.decode(Dot.self, forKey: .dot),
            payload: try container.decode(JSONValue.self, forKey: .payload),
            seq: try container.decodeIfPresent(Int64.self, forKey: .seq),
            receivedAt: try container.decodeIfPresent(Date.self, forKey: .receivedAt))
        carries = try container.decodeIfPresent(Int64.self, forKey: .carries)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(scope, forKey: .scope)
        try container.encode(stream, forKey: .stream)
        try container.encode(streamVersion, forKey: .streamVersion)
        try container.encode(type, forKey: .type)
        try container.encode(schemaVersion, forKey: .schemaVersion)
        try container.encode(hlc, forKey: .hlc)
        try container.encode(dot, forKey: .dot)
        try container.encode(payload, forKey: .payload)
        try container.encodeIfPresent(seq, forKey: .seq)
        try container.encodeIfPresent(receivedAt, forKey: .receivedAt)
        try container.encodeIfPresent(carries, forKey: .carries)
    }
}
