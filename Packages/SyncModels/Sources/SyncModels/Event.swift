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
    public var payload: JSONValue
    /// The event's position in its scope, assigned by the server.
    public var seq: Int64?
    /// When the server committed the event.
    public var receivedAt: Date?

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
        self.payload = payload
        self.seq = seq
        self.receivedAt = receivedAt
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
