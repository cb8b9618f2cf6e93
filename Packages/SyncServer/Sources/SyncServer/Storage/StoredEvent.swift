import Foundation
import PostgresNIO
import SyncCompression
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
    /// An event row's checksum (`EventChecksum`; nil for rows stored before checksums), or what a folded
    /// row carries: the sum of the checksums of the events it replaced.
    var checksum: Int64? = nil
    /// Whether the row is a folded one (`folded_events`), whose checksum the wire carries (`carries`).
    var isFolded = false
}

extension StoredEvent {
    /// A row of the pull's query and of compaction's windows (`EventRepository.events`, `Compactor.rows`:
    /// seq, event_id, stream, stream_version, type, schema_version, hlc, dot_replica, dot_counter,
    /// payload::text, received_at, and optionally checksum last), read cell by cell with each column's type written out. `rows.decode((Int64, UUID, …).self)` took the variadic generic path, which
    /// looked up generic and tuple metadata for every row: 18 % of the server's CPU while it served a
    /// bootstrap, about half of it the lookups.
    init(pulled row: PostgresRow, scope: Scope) throws {
        try self.init(row, scope: scope, folded: false)
    }

    /// A row of `folded_events` (the same columns, the payload as `FoldedPayload` bytes), as pulls and
    /// compaction read it.
    init(folded row: PostgresRow, scope: Scope) throws {
        try self.init(row, scope: scope, folded: true)
    }

    private init(_ row: PostgresRow, scope: Scope, folded: Bool) throws {
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
            dotCounter: try cell().decode(Int64.self),
            payloadJSON: folded
                ? try FoldedPayload.json(of: try cell().decode(ByteBuffer.self)) : try cell().decode(String.self),
            receivedAt: try cell().decode(Date.self))
        // The checksum column, when the query selected one (`checksum` or `carries`, last).
        checksum = try cells.next()?.decode(Int64?.self)
        isFolded = folded
    }
}

/// How `folded_events` stores a payload: a zero byte and the canonical JSON deflated (`Deflate`), or, when
/// that would not be smaller (and for rows moved from `events` by the migration), the JSON text itself,
/// which never starts with a zero byte. A snapshot's JSON is about two thirds base64; deflated it takes
/// about 0.68 of its text.
enum FoldedPayload {
    static func bytes(of json: String) -> ByteBuffer {
        let text = Array(json.utf8)
        let deflated = Deflate.compress(text)
        guard deflated.count + 1 < text.count else { return ByteBuffer(bytes: text) }
        var buffer = ByteBuffer()
        buffer.reserveCapacity(deflated.count + 1)
        buffer.writeInteger(UInt8(0))
        buffer.writeBytes(deflated)
        return buffer
    }

    static func json(of buffer: ByteBuffer) throws -> String {
        guard buffer.readableBytes > 0, buffer.readableBytesView.first == 0 else {
            return String(buffer: buffer)
        }
        return String(decoding: try Deflate.decompress(buffer.readableBytesView.dropFirst()), as: UTF8.self)
    }
}
