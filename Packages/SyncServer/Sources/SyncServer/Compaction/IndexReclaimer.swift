import Logging
import PostgresNIO

/// Gives back the space folds leave in B-tree indexes, with `REINDEX INDEX CONCURRENTLY`.
///
/// **Why `VACUUM` is not enough.** A fold deletes most rows of a window and writes one snapshot per stream at
/// the seq of its last event, so the snapshots that survive are spread over the whole history. `VACUUM`
/// makes the heap's free space reusable by the next events, but a B-tree page is only recycled once it is
/// empty: every page that keeps one surviving snapshot keeps its 8 KiB, and new entries go to the right
/// end of the tree (seqs grow). Measured with the churn benchmark (10,000 notes, 100,000 operations, a
/// fold every 10,000): the two indexes of `events` held 10,000 entries in 11.8 MiB, 8% of their leaf space
/// used, against 0.7 MiB rebuilt; the server's whole database went from 30.1 to 18.2 MiB.
///
/// **When.** After a compaction round that folded something (`CompactionService`) and after `sync-server
/// compact --vacuum`. An index is rebuilt when it is over `factor` times the bytes its entries need, as
/// the planner's statistics estimate them (`reltuples` × the columns' `avg_width` plus the tuple header,
/// at 90% fill), and the rebuild would give back at least `minimumBytes`; an index without statistics yet
/// is left alone.
///
/// **Safety.** `REINDEX … CONCURRENTLY` takes no lock that pushes or pulls wait for (inserts, updates and
/// deletes go on; the index is swapped at the end). A session advisory lock keeps two servers from rebuilding
/// at once. A rebuild interrupted by a crash leaves an invalid `…_ccnew` (or `…_ccold`) index behind, which
/// the next run drops first.
public struct IndexReclaimer: Sendable {
    let database: Database
    let logger: Logger
    /// How many times the bytes its entries need an index may take before it is rebuilt. Folds update each
    /// stream's row in `folded_events` in place, with a new seq: its index by seq takes new entries at its
    /// right end while vacuum leaves the old ones' pages half empty, and its primary key splits pages
    /// between vacuums; both reach about twice their size within a few folds, and stay there.
    public var factor: Double = 2
    /// The least space a rebuild must give back.
    public var minimumBytes: Int64 = 256 << 10

    init(database: Database, logger: Logger) {
        self.database = database
        self.logger = logger
    }

    /// One rebuilt index.
    public struct Rebuilt: Sendable, Codable, Hashable {
        public var index: String
        public var bytesBefore: Int64
        public var bytesAfter: Int64
    }

    /// An index of the current schema with its size and what its entries need.
    struct Measured: Sendable, Hashable {
        var index: String
        var bytes: Int64
        /// Nil when the table has no statistics yet.
        var needed: Int64?
    }

    /// Drops the leftovers of interrupted rebuilds, then rebuilds every bloated index; nothing when another
    /// server holds the maintenance lock.
    @discardableResult
    public func reclaim() async throws -> [Rebuilt] {
        let logger = self.logger
        return try await database.withConnection { connection in
            let locked =
                try await connection.checkedQuery(
                    "SELECT pg_try_advisory_lock(hashtextextended('sync.index-maintenance', 0))", logger: logger
                ).collect().first?.decode(Bool.self) ?? false
            guard locked else { return [] }
            do {
                let rebuilt = try await run(on: connection)
                _ = try await connection.checkedQuery(
                    "SELECT pg_advisory_unlock(hashtextextended('sync.index-maintenance', 0))", logger: logger)
                return rebuilt
            } catch {
                _ = try? await connection.checkedQuery(
                    "SELECT pg_advisory_unlock(hashtextextended('sync.index-maintenance', 0))", logger: logger)
                throw error
            }
        }
    }

    private func run(on connection: PostgresConnection) async throws -> [Rebuilt] {
        // Leftovers of a rebuild a crash interrupted: invalid, named by REINDEX CONCURRENTLY.
        let leftovers = try await connection.checkedQuery(
            """
            SELECT c.relname::text FROM pg_index i
            JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = current_schema() AND NOT i.indisvalid AND c.relname ~ '_cc(new|old)[0-9]*$'
            """, logger: logger
        ).collect().map { try $0.decode(String.self) }
        for name in leftovers {
            logger.notice("dropping an index left by an interrupted rebuild", metadata: ["sync.index": "\(name)"])
            _ = try await connection.checkedQuery(
                PostgresQuery(unsafeSQL: "DROP INDEX CONCURRENTLY IF EXISTS \(Self.quoted(name))"), logger: logger)
        }
        var rebuilt: [Rebuilt] = []
        for measured in try await measure(on: connection) where shouldRebuild(measured) {
            _ = try await connection.checkedQuery(
                PostgresQuery(unsafeSQL: "REINDEX INDEX CONCURRENTLY \(Self.quoted(measured.index))"), logger: logger)
            let after =
                try await connection.checkedQuery(
                    "SELECT pg_relation_size(to_regclass(\(Self.quoted(measured.index))))::int8", logger: logger
                ).collect().first?.decode(Int64?.self) ?? nil
            let entry = Rebuilt(index: measured.index, bytesBefore: measured.bytes, bytesAfter: after ?? 0)
            logger.info(
                "index rebuilt",
                metadata: [
                    "sync.index": "\(entry.index)", "sync.bytes_before": "\(entry.bytesBefore)",
                    "sync.bytes_after": "\(entry.bytesAfter)",
                ])
            rebuilt.append(entry)
        }
        return rebuilt
    }

    /// Every valid index of the current schema's tables, its bytes and the bytes its entries need.
    func measure(on connection: PostgresConnection) async throws -> [Measured] {
        try await connection.checkedQuery(
            """
            SELECT ic.relname::text, pg_relation_size(i.indexrelid)::int8,
                (greatest(t.reltuples, 0) * (w.width + 16) / 0.9)::int8
            FROM pg_index i
            JOIN pg_class ic ON ic.oid = i.indexrelid
            JOIN pg_class t ON t.oid = i.indrelid
            JOIN pg_namespace n ON n.oid = t.relnamespace
            LEFT JOIN LATERAL (
                SELECT sum(s.avg_width)::float8 AS width FROM pg_attribute a
                JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = t.relname AND s.attname = a.attname
                WHERE a.attrelid = t.oid AND a.attnum = ANY(i.indkey)
            ) w ON true
            WHERE n.nspname = current_schema() AND t.relkind = 'r' AND i.indisvalid AND t.reltuples >= 0
            ORDER BY 2 DESC
            """, logger: logger
        ).collect().map { row in
            let (index, bytes, needed) = try row.decode((String, Int64, Int64?).self)
            return Measured(index: index, bytes: bytes, needed: needed)
        }
    }

    func shouldRebuild(_ measured: Measured) -> Bool {
        guard let needed = measured.needed else { return false }
        return Double(measured.bytes) > factor * Double(max(needed, 8192))
            && measured.bytes - needed >= minimumBytes
    }

    /// A double-quoted SQL identifier.
    static func quoted(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
