import Foundation
import GRDB
import SyncModels

/// Where an event stands in the sync cycle. The local log is the outbox: pending rows are what a sync pushes.
public enum SyncStatus: String, Sendable, Hashable, Codable {
    /// Made here, not yet acknowledged by the server (no `seq`).
    case pending
    /// Acknowledged by the server, which gave it `seq`.
    case confirmed
    /// Refused by the server; kept for the user to see, with no effect on projections.
    case rejected
}

/// An event as the local log holds it.
public struct StoredEvent: Sendable, Hashable {
    /// The local log position: increases with every insert, never reused (also after pruning).
    public var position: Int64
    public var event: Event {
        // Bytes carried for the old event would not be this one's.
        didSet { payloadBytes = nil }
    }
    public var status: SyncStatus
    /// For rejected events: the server's stable code and message.
    public var rejection: Rejection?
    /// The payload's canonical JSON bytes when the store has them at hand (the bytes it just wrote to the
    /// log), so that projections read them without encoding the payload again (`withPayloadBytes`). Not part
    /// of the event's value: equality and hashing ignore it.
    var payloadBytes: Data?

    public struct Rejection: Sendable, Hashable, Codable {
        public var code: String
        public var message: String
        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }
    }

    public init(position: Int64, event: Event, status: SyncStatus, rejection: Rejection? = nil) {
        self.position = position
        self.event = event
        self.status = status
        self.rejection = rejection
    }

    init(position: Int64, event: Event, status: SyncStatus, payloadBytes: Data) {
        self.init(position: position, event: event, status: status)
        self.payloadBytes = payloadBytes
    }

    /// Runs `body` on the canonical JSON bytes of the payload, as the log stores them: the bytes the store
    /// wrote when it has them, else the payload encoded now (the same bytes). A projection that decodes
    /// payloads from bytes reads them this way instead of encoding `event.payload` itself.
    public func withPayloadBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        if let payloadBytes { return try payloadBytes.withUnsafeBytes(body) }
        return try PayloadCodec.encode(event).withUnsafeBytes(body)
    }

    public static func == (lhs: StoredEvent, rhs: StoredEvent) -> Bool {
        lhs.position == rhs.position && lhs.event == rhs.event && lhs.status == rhs.status
            && lhs.rejection == rhs.rejection
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(position)
        hasher.combine(event)
        hasher.combine(status)
        hasher.combine(rejection)
    }

    static let columns =
        "position, event_id, scope, stream, stream_version, type, schema_version, payload, hlc, dot_replica, dot_counter, status, seq, received_at, reject_code, reject_message"

    /// Decodes a row selected with `columns`, by column index, parsing the text forms straight from SQLite's
    /// bytes (a rebuild decodes every row of the log).
    init(row: Row) throws {
        position = row[0]
        do {
            let id = try Self.parse(row, 1) { try EventID(utf8: $0) }
            let hlc = try Self.parse(row, 8) { try HLCTimestamp(utf8: $0) }
            let replica = try Self.parse(row, 9) { try ReplicaID(utf8: $0) }
            let payload = try Self.parse(row, 7, PayloadCodec.decode)
            let receivedAt: Date? =
                row.hasNull(atIndex: 13)
                ? nil : try Self.parse(row, 13) { RFC3339.date(utf8: $0) } ?? RFC3339.date(from: row[13])
            event = Event(
                id: id, scope: try Scope(row[2]), stream: row[3], streamVersion: row[4], type: row[5],
                schemaVersion: row[6], hlc: hlc, dot: Dot(replica: replica, counter: UInt64(row[10] as Int64)),
                payload: payload, seq: row[12], receivedAt: receivedAt)
        } catch let error as SyncModelsError {
            throw EventStoreError(code: "store.corrupt", message: "event row \(position): \(error.message)")
        }
        status = SyncStatus(rawValue: row[11]) ?? .pending
        if let code: String = row[14] {
            rejection = Rejection(code: code, message: row[15] ?? "")
        }
    }

    /// Runs `body` on the bytes of column `index` in place (no copy); an empty buffer for NULL.
    static func parse<T>(_ row: Row, _ index: Int, _ body: (UnsafeRawBufferPointer) throws -> T) throws -> T {
        try row.withUnsafeData(atIndex: index) { data in
            guard let data else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
            return try data.withUnsafeBytes(body)
        }
    }
}

/// Payload bytes in the log: canonical JSON.
enum PayloadCodec {
    static func encode(_ payload: JSONValue) throws -> Data {
        payload.canonicalData()
    }

    /// The canonical bytes of `event`'s payload: those it holds when it was decoded from them.
    static func encode(_ event: Event) -> Data {
        event.canonicalPayload ?? event.payload.canonicalData()
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) throws -> JSONValue {
        do {
            return try JSONValue(parsing: bytes)
        } catch {
            throw SyncModelsError(code: "payload.invalid", message: "stored payload is not JSON")
        }
    }
}
