import ArgumentParser
import Foundation
import Logging
import PostgresNIO

/// Distributes the server's tables over a Citus cluster (docs/SCALING.md), from its coordinator: every table
/// of the schema with a `scope` column is distributed by `scope`, co-located with `scopes` (so a push or a
/// pull of one scope runs on one worker), and every other table becomes a reference table (a copy on each
/// node). Idempotent: tables already distributed are left as they are, so it runs after every start-up's
/// migrations and picks up the tables a new migration created. Migrations that alter a distributed table
/// need nothing of it: Citus propagates their DDL to the shards.
public struct CitusDistribution: Sendable {
    /// What one run did.
    public struct Report: Sendable, Codable, Hashable {
        /// Tables distributed by `scope` by this run, `scopes` first.
        public var distributed: [String] = []
        /// Tables made reference tables by this run.
        public var referenced: [String] = []
        /// Tables that were distributed or reference tables already.
        public var unchanged: [String] = []
        /// Functions of the schema created on every node by this run (`sync_lock_scopes`, a domain's), so that
        /// a push's transaction runs on a worker as on the coordinator (`CitusWorkers`).
        public var functions: [String] = []
        /// PL/pgSQL functions of the schema set by this run to plan their statements at every call
        /// (`planAtEveryCall`).
        public var plannedAtEveryCall: [String] = []
        /// Shard groups whose append function (`CitusShardAppend`) this run created or replaced on every worker.
        public var shardGroups = 0
    }

    /// The table every other one is co-located with.
    static let anchor = "scopes"

    public init() {}

    /// Whether `connection`'s database has the Citus extension.
    public static func isCitus(on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        let rows = try await connection.checkedQuery(
            "SELECT count(*) FROM pg_extension WHERE extname = 'citus'", logger: logger)
        for try await count in rows.decode(Int64.self) { return count > 0 }
        return false
    }

    /// Distributes what is not distributed yet. Run it under the migrator's lock (`Migrator.migrate` does),
    /// so that servers starting together do not race.
    /// - Throws: `ConfigurationError` when the database has no Citus extension; the database's error when a
    ///   table cannot be distributed.
    public func distribute(on connection: PostgresConnection, logger: Logger) async throws -> Report {
        guard try await Self.isCitus(on: connection, logger: logger) else {
            throw ConfigurationError(
                message:
                    "the database has no Citus extension: distributing needs a Citus coordinator (CREATE EXTENSION citus)"
            )
        }
        var tables: [(name: String, scoped: Bool, done: Bool)] = []
        let rows = try await connection.checkedQuery(
            """
            SELECT c.relname::text,
                   EXISTS (SELECT 1 FROM pg_attribute a
                           WHERE a.attrelid = c.oid AND a.attname = 'scope' AND NOT a.attisdropped),
                   EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition
            ORDER BY c.relname
            """, logger: logger)
        for try await (name, scoped, done) in rows.decode((String, Bool, Bool).self) {
            tables.append((name, scoped, done))
        }
        // `scopes` first: the others are co-located with it.
        tables.sort { ($0.name == Self.anchor ? 0 : 1, $0.name) < ($1.name == Self.anchor ? 0 : 1, $1.name) }
        var report = Report()
        for table in tables {
            if table.done {
                report.unchanged.append(table.name)
            } else if table.scoped {
                if table.name == Self.anchor {
                    try await connection.checkedQuery(
                        "SELECT create_distributed_table(\(table.name), 'scope')", logger: logger)
                } else {
                    try await connection.checkedQuery(
                        "SELECT create_distributed_table(\(table.name), 'scope', colocate_with => \(Self.anchor))",
                        logger: logger)
                }
                report.distributed.append(table.name)
            } else {
                try await connection.checkedQuery("SELECT create_reference_table(\(table.name))", logger: logger)
                report.referenced.append(table.name)
            }
        }
        report.functions = try await distributeFunctions(on: connection, logger: logger)
        report.plannedAtEveryCall = try await planAtEveryCall(on: connection, logger: logger)
        report.shardGroups = try await CitusShardAppend.install(on: connection, logger: logger)
        if !report.distributed.isEmpty || !report.referenced.isEmpty || !report.functions.isEmpty
            || !report.plannedAtEveryCall.isEmpty
        {
            logger.notice(
                "distributed tables on Citus",
                metadata: [
                    "sync.citus.distributed": "\(report.distributed.joined(separator: ","))",
                    "sync.citus.referenced": "\(report.referenced.joined(separator: ","))",
                    "sync.citus.functions": "\(report.functions.joined(separator: ","))",
                    "sync.citus.planned_at_every_call": "\(report.plannedAtEveryCall.joined(separator: ","))",
                ])
        }
        return report
    }

    /// Makes the schema's PL/pgSQL functions plan their statements at every call (`plan_cache_mode =
    /// force_custom_plan`, propagated to every node), those not set so yet; returns their signatures.
    ///
    /// Run on a worker, a statement of such a function on a distributed table gets a generic plan after a few
    /// calls (PL/pgSQL keeps it for the session), and Citus then plans the shard's local query again at every
    /// call and adds it to that plan's list of cached local plans, where its lookup (made on the plan before
    /// the shard is pruned) never finds it: about 96 KiB a call that the session holds until it ends, so a
    /// pooled connection that ran `sync_append` 2,000 times held 193 MB of `CachedPlan` (Citus 13.2).
    /// Planned at every call, no such plan is made; the call costs the same, since its local query was planned
    /// at every call anyway.
    private func planAtEveryCall(on connection: PostgresConnection, logger: Logger) async throws -> [String] {
        let rows = try await connection.checkedQuery(
            """
            SELECT p.oid::regprocedure::text
            FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
            WHERE n.nspname = current_schema() AND l.lanname = 'plpgsql'
              AND NOT EXISTS (SELECT 1 FROM pg_depend d
                              WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
              AND NOT coalesce('plan_cache_mode=force_custom_plan' = ANY (p.proconfig), false)
            ORDER BY 1
            """, logger: logger)
        var functions: [String] = []
        for try await signature in rows.decode(String.self) { functions.append(signature) }
        for signature in functions {
            try await connection.checkedQuery(
                PostgresQuery(unsafeSQL: "ALTER FUNCTION \(signature) SET plan_cache_mode = force_custom_plan"),
                logger: logger)
        }
        return functions
    }

    /// Creates the schema's own functions (not an extension's) on every node, those not there yet; returns
    /// their signatures. Citus propagates a later `CREATE OR REPLACE` of a function it knows.
    private func distributeFunctions(on connection: PostgresConnection, logger: Logger) async throws -> [String] {
        let rows = try await connection.checkedQuery(
            """
            SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = current_schema()
              AND NOT EXISTS (SELECT 1 FROM pg_depend d
                              WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
              AND NOT EXISTS (SELECT 1 FROM pg_dist_object o
                              WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid)
            ORDER BY 1
            """, logger: logger)
        var functions: [String] = []
        for try await signature in rows.decode(String.self) { functions.append(signature) }
        for signature in functions {
            try await connection.checkedQuery(
                "SELECT create_distributed_function(\(signature)::regprocedure)", logger: logger)
        }
        return functions
    }
}

extension SyncServerApp {
    /// Applies pending migrations, then distributes the tables on the Citus coordinator of
    /// `configuration.databaseURL` (`CitusDistribution`): what `sync-server distribute` runs.
    public static func distribute(configuration: ServerConfiguration, domain: any SyncDomain, logger: Logger)
        async throws -> CitusDistribution.Report
    {
        let url = try DatabaseURL(configuration.databaseURL)
        let client = PostgresClient(
            configuration: Database.clientConfiguration(url, poolSize: 1), backgroundLogger: logger)
        return try await client.whileRunning { client in
            let migrator = Migrator(migrations: Migration.generic + domain.rules.flatMap(\.migrations))
            try await migrate(
                migrator, client: client, timeoutSeconds: configuration.startupTimeoutSeconds, logger: logger)
            return try await client.withConnection { connection in
                try await Migrator.locked(on: connection, logger: logger) {
                    try await CitusDistribution().distribute(on: connection, logger: logger)
                }
            }
        }
    }
}

/// `distribute`: applies pending migrations, then distributes the server's tables by scope on a Citus
/// coordinator, idempotently, and prints what it did as JSON (`CitusDistribution.Report`). A server
/// executable adds it among its subcommands with its domain, as `compact`.
public struct DistributeOptions: ParsableArguments {
    @OptionGroup public var common: CommonOptions

    @Option(help: "The Citus coordinator's URL postgres://user@host:port/database (SYNC_DATABASE_URL).")
    public var databaseURL: String?

    public init() {}

    /// Runs it and prints the report.
    public func run(domain: any SyncDomain) async throws {
        var configuration = try common.configuration(environment: ProcessInfo.processInfo.environment)
        if let databaseURL { configuration.databaseURL = databaseURL }
        configuration.logFormat.bootstrap()
        var logger = Logger(label: "sync-server")
        logger.logLevel = Logger.Level(rawValue: configuration.logLevel) ?? .notice
        try printJSON(try await SyncServerApp.distribute(configuration: configuration, domain: domain, logger: logger))
    }
}
