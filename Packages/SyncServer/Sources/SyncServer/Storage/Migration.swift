import Logging
import PostgresNIO

/// One schema change, applied once per database in `id` order and recorded in `schema_migrations`.
///
/// Migrations are append-only: a released migration never changes, a new change gets a new id.
public struct Migration: Sendable {
    /// Unique and ordered, e.g. `0001-core`; rules use their own prefix (`note-quota-0001`).
    public var id: String
    /// SQL run in one transaction; several statements separated by `;` are allowed.
    public var statements: [String]

    public init(id: String, statements: [String]) {
        self.id = id
        self.statements = statements
    }
}

/// Applies migrations at start-up, idempotently, under a PostgreSQL advisory lock so that several servers
/// starting at once apply each migration exactly once (the others wait, then find nothing to do).
public struct Migrator: Sendable {
    /// The advisory lock key: any constant shared by every server of this schema.
    static let lockKey: Int64 = 0x5359_4E43_0001  // "SYNC" 1

    public var migrations: [Migration]
    /// Whether to distribute the tables on a Citus coordinator after the migrations, under the same lock
    /// (`CitusDistribution`; `SYNC_CITUS`).
    public var distributeOnCitus: Bool

    public init(migrations: [Migration], distributeOnCitus: Bool = false) {
        self.migrations = migrations.sorted { $0.id < $1.id }
        self.distributeOnCitus = distributeOnCitus
    }

    /// Applies every migration not yet recorded; returns the ids it applied.
    /// - Throws: the database error of the first statement that fails (its migration is rolled back).
    @discardableResult
    public func migrate(_ client: PostgresClient, logger: Logger) async throws -> [String] {
        try await client.withConnection { connection in
            try await Self.locked(on: connection, logger: logger) {
                let applied = try await apply(on: connection, logger: logger)
                if distributeOnCitus { _ = try await CitusDistribution().distribute(on: connection, logger: logger) }
                return applied
            }
        }
    }

    /// Runs `body` holding the migrations' advisory lock on `connection`, released however `body` ends.
    static func locked<Result>(
        on connection: PostgresConnection, logger: Logger, _ body: () async throws -> Result
    ) async throws -> Result {
        try await connection.checkedQuery("SELECT pg_advisory_lock(\(lockKey))", logger: logger)
        do {
            let result = try await body()
            try await connection.checkedQuery("SELECT pg_advisory_unlock(\(lockKey))", logger: logger)
            return result
        } catch {
            _ = try? await connection.checkedQuery("SELECT pg_advisory_unlock(\(lockKey))", logger: logger)
            throw error
        }
    }

    /// Whether every migration is recorded (for `/readyz`).
    public func isUpToDate(_ client: PostgresClient, logger: Logger) async throws -> Bool {
        let rows = try await client.query(
            "SELECT id FROM schema_migrations", logger: logger)
        var applied: Set<String> = []
        for try await id in rows.decode(String.self) { applied.insert(id) }
        return migrations.allSatisfy { applied.contains($0.id) }
    }

    private func apply(on connection: PostgresConnection, logger: Logger) async throws -> [String] {
        try await connection.checkedQuery(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                id text PRIMARY KEY,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """, logger: logger)
        var applied: Set<String> = []
        for try await id in try await connection.checkedQuery("SELECT id FROM schema_migrations", logger: logger)
            .decode(String.self)
        {
            applied.insert(id)
        }
        var done: [String] = []
        for migration in migrations where !applied.contains(migration.id) {
            try await connection.transaction(logger: logger) { connection in
                for statement in migration.statements {
                    try await connection.checkedQuery(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.checkedQuery(
                    "INSERT INTO schema_migrations (id) VALUES (\(migration.id))", logger: logger)
            }
            logger.info("applied migration", metadata: ["sync.migration.id": "\(migration.id)"])
            done.append(migration.id)
        }
        return done
    }
}
