import Foundation
import PostgresNIO
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

extension StoredEvent {
    /// A row of the pull's query and of compaction's windows (`EventRepository.events`, `Compactor.rows`:
    /// seq, event_id, stream, stream_version, type, schema_version, hlc, dot_replica, dot_counter,
    /// payload::text, received_at), read cell by cell with each column's type written out. `rows.decode((Int64, UUID, …).self)` took the variadic generic path, which
    /// looked up generic and tuple metadata for every row: 18 % of the server's CPU while it served a
    /// bootstrap, about half of it the lookups.
    init(pulled row: PostgresRow, scope: Scope) throws {
        var cells = row.makeIterator()
        func cell() throws -> PostgresCell {
            guard let cell = cells.next() else {
                throw PostgresDecodingError.Code.missingData
            }
            return cell
        }
        self.init(
            scope: scope, seq: try cell().decode(Int64.self), id: try cell().decode(UUID.self),
            stream: try cell().decode(String.self), streamVersion: try cell().decode(Int64.self),
            type: try cell().decode(String.self), schemaVersion: try cell().decode(Int32.self),
            hlc: try cell().decode(String.self), dotReplica: try cell().decode(String.self),
            dotCounter: try cell().decode(Int64.self), payloadJSON: try cell().decode(String.self),
            receivedAt: try cell().decode(Date.self))
    }
}
