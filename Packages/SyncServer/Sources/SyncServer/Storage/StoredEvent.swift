import Foundation
import SyncModels

/// An event as read back from the `events` table, with its payload kept as the JSON text PostgreSQL
/// returns, so a pull writes it out without decoding and re-encoding it.
struct StoredEvent: Sendable {
    var scope: Scope
    var seq: Int64
    var id: UUID
    var stream: String
    var streamVersion: Int64
    var type: String
    var schemaVersion: Int32
    var hlc: String
    var dotReplica: String
    var dotCounter: Int64
    var payloadJSON: String
    var receivedAt: Date
}
