import Foundation
import PostgresNIO
import SyncServerTesting
import Testing

@testable import SyncServer

/// Migrations on a schema already distributed over a Citus cluster: a later migration that alters a
/// distributed table reaches its shards, and a table it creates is distributed at the next start. Runs when
/// the cluster of `scripts/citus.sh` is there (`SYNC_CITUS_URL`: `make citus`, the last step of `make test`).
@Suite(.enabled(if: TestDatabase.citusURL != nil, "no Citus cluster (SYNC_CITUS_URL is not set)"))
struct CitusMigrationTests {
    static let later = Migration(
        id: "9001-later",
        statements: [
            "ALTER TABLE events ADD COLUMN origin text",
            "CREATE INDEX events_origin ON events (scope, origin)",
            "CREATE TABLE scope_labels (scope text NOT NULL, label text NOT NULL, PRIMARY KEY (scope, label))",
            "CREATE TABLE label_colors (label text PRIMARY KEY, color text NOT NULL)",
        ])

    @Test func aLaterMigrationAltersTheShardsAndItsNewTablesAreDistributed() async throws {
        try await TestDatabase.with(citus: true) { database in
            let first = Migrator(migrations: Migration.generic + TestRule().migrations, distributeOnCitus: true)
            _ = try await TestServer.withClient(database) { try await first.migrate($0, logger: TestDatabase.logger) }
            let again = Migrator(
                migrations: Migration.generic + TestRule().migrations + [Self.later], distributeOnCitus: true)
            let applied = try await TestServer.withClient(database) {
                try await again.migrate($0, logger: TestDatabase.logger)
            }
            #expect(applied == ["9001-later"])
            let kinds = try await database.connection { connection in
                var found: [String: String] = [:]
                let rows = try await connection.query(
                    "SELECT logicalrelid::text, partmethod::text FROM pg_dist_partition", logger: TestDatabase.logger)
                for try await (table, method) in rows.decode((String, String).self) { found[table] = method }
                return found
            }
            #expect(kinds["scope_labels"] == "h" && kinds["label_colors"] == "n" && kinds["events"] == "h")
            // The new column is on every shard: a row using it lands and reads back through the coordinator.
            try await database.execute(
                """
                INSERT INTO events (scope, seq, event_id, stream, stream_version, type, schema_version, hlc,
                                    dot_replica, dot_counter, payload, origin)
                SELECT 's' || g, 1, gen_random_uuid(), 'x', 1, 't', 1, 'h', 'r', 1, '{}', 'later'
                FROM generate_series(1, 40) g
                """)
            #expect(try await database.integers("SELECT count(*) FROM events WHERE origin = 'later'") == [40])
            let shards = try await database.integers(
                """
                SELECT count(*) FROM run_command_on_shards('events',
                    $$SELECT count(*) FROM pg_attribute WHERE attrelid = '%s'::regclass AND attname = 'origin'$$)
                WHERE result = '1'
                """)
            let total = try await database.integers(
                "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'events'::regclass")
            #expect(shards == total && total.first ?? 0 > 0)
        }
    }
}
