import SyncModels

/// What a caller appends: the event without the identity and clocks the store assigns.
public struct EventDraft: Sendable, Hashable {
    public var scope: Scope
    public var stream: String
    public var type: String
    public var schemaVersion: Int
    public var payload: JSONValue
    /// The stream version the caller believes is current; the append fails with `conflict.version` if not.
    public var expectedVersion: ExpectedVersion
    /// The blobs the payload refers to (an attachment's bytes, named by hash): the event is pushed only once
    /// the server holds each of them in the event's scope (`EventStore+Blobs.swift`).
    public var blobs: [BlobReference]

    public init(
        scope: Scope, stream: String, type: String, schemaVersion: Int = 1, payload: JSONValue,
        expectedVersion: ExpectedVersion = .any, blobs: [BlobReference] = []
    ) {
        self.scope = scope
        self.stream = stream
        self.type = type
        self.schemaVersion = schemaVersion
        self.payload = payload
        self.expectedVersion = expectedVersion
        self.blobs = blobs
    }
}

/// Optimistic concurrency on one stream.
public enum ExpectedVersion: Sendable, Hashable, CustomStringConvertible {
    /// No check.
    case any
    /// The stream must have no events yet.
    case noStream
    /// The stream must be exactly at this version (its latest event's `streamVersion`).
    case exactly(Int64)

    public var description: String {
        switch self {
        case .any: "any"
        case .noStream: "no stream"
        case .exactly(let version): "\(version)"
        }
    }

    func check(stream: String, actual: Int64) throws {
        switch self {
        case .any: return
        case .noStream where actual == 0: return
        case .exactly(let version) where version == actual: return
        default: throw EventStoreError.versionConflict(stream: stream, expected: self, actual: actual)
        }
    }
}
