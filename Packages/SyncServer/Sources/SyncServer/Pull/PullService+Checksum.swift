import Logging
import PostgresNIO
import SyncModels
import SyncProtocol

extension PullService {
    /// The checksum of `request.scope`'s events in `(after, through]` (docs/PROTOCOL.md, "Checksums"), read
    /// in one statement, so that the head, the running sum and the rows are of one snapshot.
    ///
    /// A whole prefix is the scope's running sum (`scopes.checksum`, which every push moves with the head)
    /// minus the events above `through`: a few rows for a device at the head. A range is the sum of its rows.
    /// Both need the rows themselves: a range that reaches below the scope's `compacted_through` (whose
    /// events are folded into snapshots that lie at other seqs) or into events stored before the server kept
    /// checksums (`checksum_from`) cannot be given.
    /// - Throws: `SyncProtocolError` `scope.forbidden` for a scope not in the token, `request.invalid` for a
    ///   position past the head, `checksum.unavailable` as said.
    func checksum(_ request: ChecksumRequest, identity: TokenIdentity, logger: Logger) async throws
        -> ChecksumResponse
    {
        _ = try Self.scopes(requested: [request.scope], identity: identity)
        let name = request.scope.name
        // Prefix: the rows above `through` (subtracted); range: the rows in `(after, through]`.
        let low = request.after ?? request.through
        let high = request.after == nil ? Int64.max : request.through
        let row = try await database.withConnection { connection in
            let rows = try await connection.checkedQuery(
                """
                SELECT s.head, s.checksum, s.checksum_from, coalesce(c.compacted_through, 0),
                       (SELECT coalesce(sum(e.checksum), 0)::int8 FROM events e
                        WHERE e.scope = \(name) AND e.seq > \(low) AND e.seq <= \(high)),
                       (SELECT count(*) FROM events e WHERE e.scope = \(name) AND e.seq > \(low) AND e.seq <= \(high))
                FROM scopes s LEFT JOIN scope_compaction c ON c.scope = s.scope
                WHERE s.scope = \(name)
                """, logger: logger)
            var found: (Int64, Int64, Int64, Int64, Int64, Int64)?
            for try await values in rows.decode((Int64, Int64, Int64, Int64, Int64, Int64).self) { found = values }
            return found
        }
        let (head, running, from, folded, sum, count) = row ?? (0, 0, 0, 0, 0, 0)
        guard request.through <= head else {
            throw SyncProtocolError.invalid("through (\(request.through)) is past the scope's head (\(head))")
        }
        let start = request.after ?? 0
        if request.after == nil, from > 0 {
            throw SyncProtocolError(
                .checksumUnavailable, "the scope holds events from before checksums (through \(from)): ask for a range")
        }
        // A prefix needs the rows above `through`, a range its own, all in `events`: above `folded` (a range
        // may start at it exactly) and above `from`.
        let lowest = request.after == nil ? request.through : start
        if lowest < max(folded, from) && request.through > start {
            throw SyncProtocolError(
                .checksumUnavailable,
                "\(lowest) is below \(max(folded, from)): in folded history or before checksums")
        }
        return ChecksumResponse(
            scope: name, after: start, through: request.through,
            checksum: request.after == nil ? running - sum : sum, events: request.after == nil ? nil : count,
            head: head, compactedThrough: folded)
    }
}
