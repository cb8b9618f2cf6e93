import Foundation
import Logging
import PostgresNIO
import SyncModels
import SyncProtocol

/// The check the push runs for every domain (docs/PROTOCOL.md, "Blobs"): an event that refers to blobs
/// (`SyncDomain.blobReferences(in:)`) is accepted only when every one of them is committed in the event's own
/// scope, else rejected with `blob.missing`; the references of accepted events are recorded in `blob_refs`.
///
/// It runs in the push transaction before the domain's rules, and only for pushes that carry references: a
/// push without any costs one call of the domain's `blobReferences(in:)` per event, before the transaction.
enum BlobReferenceCheck {
    /// The rejections of the events among `references` (by index in `events`) that refer to a blob their scope
    /// does not hold.
    static func rejections(
        _ references: [Int: [BlobReference]], in events: [Event], on connection: PostgresConnection, logger: Logger
    ) async throws -> [Int: EventRejection] {
        guard !references.isEmpty else { return [:] }
        var wanted: [String: Set<String>] = [:]
        for (index, blobs) in references {
            wanted[events[index].scope.name, default: []].formUnion(blobs.map(\.hash.hex))
        }
        // Locked until the push commits (`FOR KEY SHARE`), so that collection (`BlobService.collect`), which
        // locks a blob's row before it looks for references, waits for this push's references. One statement
        // per scope: each goes to one shard on Citus.
        var held: Set<[String]> = []
        for (scope, hashes) in wanted.sorted(by: { $0.key < $1.key }) {
            let rows = try await connection.checkedQuery(
                """
                SELECT hash FROM blobs WHERE scope = \(scope) AND hash = ANY(\(hashes.sorted())) ORDER BY hash
                FOR KEY SHARE
                """, logger: logger)
            for try await hash in rows.decode(String.self) { held.insert([scope, hash]) }
        }
        var rejections: [Int: EventRejection] = [:]
        for (index, blobs) in references {
            let scope = events[index].scope
            guard let missing = blobs.first(where: { !held.contains([scope.name, $0.hash.hex]) }) else { continue }
            rejections[index] = EventRejection(
                .blobMissing,
                "the event refers to blob \(missing.hash), which scope \(scope) does not hold: upload it, then push the event again"
            )
        }
        return rejections
    }

    /// The statement that records the references of accepted `events`, or nil when they have none.
    static func record(_ events: [(event: Event, references: [BlobReference])]) -> PostgresQuery? {
        var scopes: [String] = []
        var hashes: [String] = []
        var ids: [UUID] = []
        for (event, references) in events {
            for reference in Set(references.map(\.hash)) {
                scopes.append(event.scope.name)
                hashes.append(reference.hex)
                ids.append(event.id.uuid)
            }
        }
        guard !ids.isEmpty else { return nil }
        return """
            INSERT INTO blob_refs (scope, hash, event_id)
            SELECT * FROM unnest(\(scopes)::text[], \(hashes)::text[], \(ids)::uuid[])
            ON CONFLICT (scope, hash, event_id) DO NOTHING
            """
    }
}
