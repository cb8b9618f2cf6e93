import Foundation
import GRDB
import SyncCompression
import SyncModels

/// One line of an exported log: the envelope plus its local sync state.
public struct ExportedEvent: Codable, Sendable, Hashable {
    public var event: Event
    public var status: SyncStatus
    public var rejection: StoredEvent.Rejection?
}

/// How far a time-travel replay goes. Confirmed events qualify by their server order or time; pending
/// events have neither `seq` nor `receivedAt`, so only `.hlc` includes them.
public enum ReplayLimit: Sendable, Hashable {
    /// Confirmed events with `seq <= seq` (in their scope; in every scope when `scope` is nil).
    case seq(Int64, scope: Scope? = nil)
    /// Events whose HLC is at or before this one, pending ones included.
    case hlc(HLCTimestamp)
    /// Confirmed events the server received at or before this time.
    case time(Date)

    var sqlFilter: (String, StatementArguments) {
        switch self {
        case .seq(let seq, let scope?): ("status = 'confirmed' AND scope = ? AND seq <= ?", [scope.name, seq])
        case .seq(let seq, nil): ("status = 'confirmed' AND seq <= ?", [seq])
        case .hlc(let hlc): ("status != 'rejected' AND hlc <= ?", [hlc.description])
        case .time(let date): ("status = 'confirmed' AND received_at <= ?", [RFC3339.string(from: date)])
        }
    }
}

extension EventStore {
    /// Writes the whole log, in canonical order, as gzip-compressed JSON Lines (one `ExportedEvent` per line,
    /// canonical JSON). Reads one snapshot, so concurrent writes are either all in or all out.
    /// - Returns: the number of events written.
    @discardableResult
    public func export(to url: URL) async throws -> Int {
        let (lines, count) = try await database.read { db -> (Data, Int) in
            var lines = Data()
            var count = 0
            let encoder = CanonicalJSON.encoder()
            let rows = try Row.fetchCursor(
                db, sql: "SELECT \(StoredEvent.columns) FROM events ORDER BY \(Self.canonicalOrder)")
            while let row = try rows.next() {
                let stored = try StoredEvent(row: row)
                lines += try encoder.encode(
                    ExportedEvent(event: stored.event, status: stored.status, rejection: stored.rejection))
                lines.append(UInt8(ascii: "\n"))
                count += 1
            }
            return (lines, count)
        }
        try Gzip.compress(lines).write(to: url, options: .atomic)
        return count
    }

    /// Reads an export made by `export(to:)`.
    /// - Throws: `EventStoreError` `import.invalid` naming the first bad line.
    public static func readExport(from url: URL) throws -> [ExportedEvent] {
        let data: Data
        do {
            data = try Gzip.decompress(Data(contentsOf: url))
        } catch let failure as Gzip.Failure {
            throw EventStoreError(code: "import.invalid", message: "\(url.lastPathComponent): \(failure)")
        }
        let decoder = CanonicalJSON.decoder()
        var events: [ExportedEvent] = []
        for (index, line) in data.split(separator: UInt8(ascii: "\n")).enumerated() {
            do {
                events.append(try decoder.decode(ExportedEvent.self, from: Data(line)))
            } catch {
                throw EventStoreError(code: "import.invalid", message: "line \(index + 1) is not an exported event")
            }
        }
        return events
    }

    /// Loads an export into this store (meant for a fresh scratch database), keeping every event's status,
    /// `seq` and rejection, then rebuilds every projection. Events already present are skipped.
    /// - Returns: how many events were inserted.
    @discardableResult
    public func importLog(from url: URL) async throws -> Int {
        let exported = try Self.readExport(from: url)
        let inserted = try await database.writer.write { db -> Int in
            var inserted = 0
            for line in exported {
                try line.event.validate()
                if try Bool.fetchOne(
                    db, sql: "SELECT 1 FROM events WHERE scope = ? AND event_id = ?",
                    arguments: [line.event.scope.name, line.event.id.description]) == true
                {
                    continue
                }
                try Self.insert(line.event, status: line.status, db)
                try Self.count(line.status, 1, db)
                if let rejection = line.rejection {
                    try db.execute(
                        sql: "UPDATE events SET reject_code = ?, reject_message = ? WHERE scope = ? AND event_id = ?",
                        arguments: [
                            rejection.code, rejection.message, line.event.scope.name, line.event.id.description,
                        ])
                }
                inserted += 1
            }
            for projection in self.projections { try self.rebuild(projection, db) }
            return inserted
        }
        publish(.imported, [])
        return inserted
    }

    /// Time travel: rebuilds every projection from the events within `limit` only, so reading the
    /// projections shows the state as of then. Meant for a scratch store made with `importLog(from:)`; on a
    /// live store the next `rebuildAll()` returns to the present. The log itself is not changed.
    public func replay(until limit: ReplayLimit) async throws {
        let (filter, arguments) = limit.sqlFilter
        try await database.writer.write { db in
            if self.holdsFolded { try self.settleProjections(db) }
            for projection in self.projections {
                try projection.restoreSnapshot(streams: nil, in: db)
                try self.stream(
                    projection, db,
                    sql: "SELECT \(StoredEvent.columns) FROM events WHERE \(filter) ORDER BY \(Self.canonicalOrder)",
                    arguments: arguments)
            }
        }
        publish(.rebuilt, [])
    }
}
