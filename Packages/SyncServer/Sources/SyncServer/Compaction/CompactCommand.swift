import ArgumentParser
import Foundation
import Logging
import PostgresNIO
import Prometheus

/// What `sync-server compact` did, printed as JSON.
public struct CompactionReport: Sendable, Codable, Hashable {
    /// One entry per scope compacted.
    public var scopes: [Compactor.ScopeReport]
    /// `pg_total_relation_size` (table, indexes and TOAST) of each of the server's tables, and of the whole
    /// database, before the pass and after it (after the `VACUUM`, when one ran).
    public var bytesBefore: [String: Int64]
    public var bytesAfter: [String: Int64]
    /// Whether a `VACUUM (ANALYZE)` of the database's tables followed.
    public var vacuumed: Bool
    /// The indexes rebuilt after the `VACUUM` because folds had left them mostly empty (`IndexReclaimer`).
    public var reindexed: [IndexReclaimer.Rebuilt] = []
    /// Blobs no event refers to any more after the pass, collected (`BlobService.collect`), and their bytes.
    public var collectedBlobs = 0
    public var collectedBlobBytes: Int64 = 0
    public var seconds: Double
}

extension SyncServerApp {
    /// The server's tables whose space `compact` reports.
    static let measuredTables = [
        "events", "folded_events", "streams", "scopes", "replica_progress", "scope_compaction", "blobs", "blob_parts",
        "blob_refs",
    ]

    /// One compaction pass over `scopes` (every scope with events past its last fold when nil), each up to
    /// its stable point whatever the policy says, then optionally a `VACUUM (ANALYZE)` and a rebuild of the
    /// indexes folds left bloated (`IndexReclaimer`): what `sync-server compact` runs. Applies pending
    /// migrations first.
    ///
    /// Space: deleted rows become free space inside the tables once vacuumed; autovacuum does that on its
    /// own after a fold, and `vacuum` does it at once. A `VACUUM` gives the file system back only the empty
    /// pages at a table's end (`events` after a fold that left it nothing, say); the rest of the freed space
    /// is reused by later rows (`VACUUM FULL` would give it back, under an exclusive lock).
    public static func compact(
        configuration: ServerConfiguration, domain: any SyncDomain, scopes: [String]?, vacuum: Bool, logger: Logger
    ) async throws -> CompactionReport {
        guard let folder = domain.folder else {
            throw ConfigurationError(message: "the \(domain.name) domain folds no streams; nothing to compact")
        }
        let started = ContinuousClock.now
        return try await withMigratedDatabase(configuration: configuration, domain: domain, logger: logger) {
            database in
            let compactor = Compactor(
                database: database, folder: folder, batchEvents: configuration.compaction.batchEvents,
                evictionHorizonSeconds: configuration.evictionHorizonSeconds,
                pauseMilliseconds: configuration.compaction.pauseMilliseconds,
                references: { domain.blobReferences(in: $0) }, logger: logger)
            let before = try await space(database, logger: logger)
            var names = scopes ?? []
            if scopes == nil { names = try await compactor.candidates().map(\.scope) }
            var reports: [Compactor.ScopeReport] = []
            for scope in names { reports.append(try await compactor.compact(scope: scope)) }
            if vacuum {
                // Every table of the database, the domain's included (a quota's table churns as notes come
                // and go): their free space becomes reusable, their statistics let `IndexReclaimer` judge
                // their indexes, and `events` gives back the empty pages at its end.
                try await database.withConnection { connection in
                    try await connection.checkedQuery("VACUUM (ANALYZE)", logger: logger)
                }
            }
            let reindexed = vacuum ? try await IndexReclaimer(database: database, logger: logger).reclaim() : []
            // What the pass released: blobs whose last references it folded away (of every scope).
            let blobs = BlobService(
                database: database, store: try Self.blobStore(configuration.blobs.store, database, logger),
                configuration: configuration.blobs,
                metrics: ServerMetrics(factory: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry())))
            let collected = try await blobs.collect(logger: logger)
            let after = try await space(database, logger: logger)
            var report = CompactionReport(
                scopes: reports, bytesBefore: before, bytesAfter: after, vacuumed: vacuum, reindexed: reindexed,
                seconds: (ContinuousClock.now - started) / .seconds(1))
            report.collectedBlobs = collected.blobs
            report.collectedBlobBytes = collected.bytes
            return report
        }
    }

    /// `body` with the database of `configuration` (a pool of 2), once the pending migrations of the server
    /// and `domain` are applied: what a one-off command (`compact`, `backfill-checksums`) runs in.
    static func withMigratedDatabase<Result: Sendable>(
        configuration: ServerConfiguration, domain: any SyncDomain, logger: Logger,
        _ body: @Sendable (Database) async throws -> Result
    ) async throws -> Result {
        let url = try DatabaseURL(configuration.databaseURL)
        let client = PostgresClient(
            configuration: Database.clientConfiguration(url, poolSize: 2), backgroundLogger: logger)
        return try await client.whileRunning { client in
            let migrator = Migrator(
                migrations: Migration.generic + domain.rules.flatMap(\.migrations),
                distributeOnCitus: configuration.citus)
            try await migrate(
                migrator, client: client, timeoutSeconds: configuration.startupTimeoutSeconds, logger: logger)
            return try await body(
                Database(
                    client: client, queueLimit: 16, acquireTimeout: .seconds(30),
                    metrics: ServerMetrics(factory: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
                ))
        }
    }

    /// Bytes of each measured table (with its indexes and TOAST) and of the database (`database`). On a Citus
    /// coordinator, a distributed table's bytes are those of its shards on the workers
    /// (`citus_total_relation_size`), and the database's are the coordinator's plus those of every distributed
    /// table.
    static func space(_ database: Database, logger: Logger) async throws -> [String: Int64] {
        try await database.withConnection { connection in
            var bytes: [String: Int64] = [:]
            let query: PostgresQuery =
                try await CitusDistribution.isCitus(on: connection, logger: logger)
                ? """
                WITH sizes AS (
                    SELECT c.relname::text AS name,
                           CASE WHEN p.logicalrelid IS NULL THEN pg_total_relation_size(c.oid)
                                ELSE citus_total_relation_size(c.oid) END AS bytes,
                           p.logicalrelid IS NOT NULL AND p.partmethod = 'h' AS sharded
                    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                    LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid
                    WHERE n.nspname = current_schema() AND c.relkind = 'r'
                )
                SELECT name, bytes FROM sizes WHERE name = ANY(\(measuredTables)::text[])
                UNION ALL
                SELECT 'database', pg_database_size(current_database())
                                   + (SELECT coalesce(sum(bytes), 0)::int8 FROM sizes WHERE sharded)
                """
                : """
                SELECT c.relname::text, pg_total_relation_size(c.oid) FROM pg_class c
                JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname = ANY(\(measuredTables)::text[])
                UNION ALL SELECT 'database', pg_database_size(current_database())
                """
            let rows = try await connection.checkedQuery(query, logger: logger)
            for try await (name, size) in rows.decode((String, Int64).self) { bytes[name] = size }
            return bytes
        }
    }
}

/// `compact [--scope S …] [--vacuum]`: one compaction pass now, whatever the policy, printed as JSON
/// (`CompactionReport`). A server executable adds it among its subcommands with its domain:
///
/// ```swift
/// struct Compact: AsyncParsableCommand {
///     @OptionGroup var compact: CompactOptions
///     func run() async throws { try await compact.run(domain: MyDomain()) }
/// }
/// ```
public struct CompactOptions: ParsableArguments {
    @OptionGroup public var common: CommonOptions

    @Option(help: "PostgreSQL URL postgres://user@host:port/database (SYNC_DATABASE_URL).")
    public var databaseURL: String?

    @Option(name: .customLong("scope"), help: "A scope to compact (repeatable; default: every scope with news).")
    public var scopes: [String] = []

    @Flag(help: "Run VACUUM (ANALYZE) on the database's tables afterwards, and rebuild the indexes folds left bloated.")
    public var vacuum = false

    public init() {}

    /// Runs the pass and prints its report.
    public func run(domain: any SyncDomain) async throws {
        var configuration = try common.configuration(environment: ProcessInfo.processInfo.environment)
        if let databaseURL { configuration.databaseURL = databaseURL }
        configuration.logFormat.bootstrap()
        var logger = Logger(label: "sync-server")
        logger.logLevel = Logger.Level(rawValue: configuration.logLevel) ?? .notice
        let report = try await SyncServerApp.compact(
            configuration: configuration, domain: domain, scopes: scopes.isEmpty ? nil : scopes, vacuum: vacuum,
            logger: logger)
        try printJSON(report)
    }
}

/// Prints a command's report as JSON, indented, keys sorted.
func printJSON(_ report: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    print(String(decoding: try encoder.encode(report), as: UTF8.self))
}
