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
    public var event: Event
    public var status: SyncStatus
    /// For rejected events: the server's stable code and message.
    public var rejection: Rejection?

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

    static let columns =
        "position, event_id, scope, stream, stream_version, type, schema_version, payload, hlc, dot_replica, dot_counter, status, seq, received_at, reject_code, reject_message"

    init(row: Row) throws {
        let payload: Data = row["payload"]
        let receivedAt: String? = row["received_at"]
        do {
            event = Event(
                id: try EventID(row["event_id"]),
                scope: try Scope(row["scope"]),
                stream: row["stream"],
                streamVersion: row["stream_version"],
                type: row["type"],
                schemaVersion: row["schema_version"],
                hlc: try HLCTimestamp(row["hlc"]),
                dot: Dot(replica: try ReplicaID(row["dot_replica"]), counter: UInt64(row["dot_counter"] as Int64)),
                payload: try PayloadCodec.decode(payload),
                seq: row["seq"],
                receivedAt: receivedAt.flatMap(RFC3339.date(from:)))
        } catch let error as SyncModelsError {
            throw EventStoreError(
                code: "store.corrupt", message: "event row \(row["position"] as Int64): \(error.message)")
        }
        position = row["position"]
        status = SyncStatus(rawValue: row["status"]) ?? .pending
        if let code: String = row["reject_code"] {
            rejection = Rejection(code: code, message: row["reject_message"] ?? "")
        }
    }
}

/// Payload bytes in the log: canonical JSON.
enum PayloadCodec {
    static func encode(_ payload: JSONValue) throws -> Data {
        payload.canonicalData()
    }

    static func decode(_ data: Data) throws -> JSONValue {
        do {
            return try JSONValue(parsing: data)
        } catch {
            throw SyncModelsError(code: "payload.invalid", message: "stored payload is not JSON")
        }
    }
}
