import Logging
import PostgresNIO
import Prometheus
import SyncServerTesting
import Testing

@testable import SyncServer

/// `IndexReclaimer` on real PostgreSQL: an index that deletes left mostly empty is rebuilt small with every
/// row still found through it; a compact index is left alone; the leftover of an interrupted rebuild is
/// dropped.
@Suite struct IndexReclaimerTests {
    static func reclaimer(_ client: PostgresClient) -> IndexReclaimer {
        let metrics = ServerMetrics(factory: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
        return IndexReclaimer(
            database: Database(client: client, queueLimit: 4, acquireTimeout: .seconds(30), metrics: metrics),
            logger: TestDatabase.logger)
    }

    static func size(_ database: TestDatabase, _ index: String) async throws -> Int64 {
        try await database.integers("SELECT pg_relation_size(to_regclass(\(index)))::int8").first ?? -1
    }

    @Test func rebuildsWhatFoldsLeftEmptyAndDropsLeftovers() async throws {
        try await TestDatabase.with { database in
            // As a fold leaves `events`: 200,000 rows, of which one in 200 survives, spread over the history.
            try await database.execute(
                """
                CREATE TABLE history (scope text NOT NULL, seq int8 NOT NULL, stream text NOT NULL,
                    PRIMARY KEY (scope, seq))
                """)
            try await database.execute(
                "INSERT INTO history SELECT 'scope-1', g, 'stream-' || (g % 1000) FROM generate_series(1, 200000) g")
            try await database.execute("CREATE TABLE compact (id int8 PRIMARY KEY)")
            try await database.execute("INSERT INTO compact SELECT g FROM generate_series(1, 100000) g")
            try await database.execute("DELETE FROM history WHERE seq % 200 <> 0")
            try await database.execute("VACUUM (ANALYZE) history")
            try await database.execute("VACUUM (ANALYZE) compact")
            // An interrupted REINDEX CONCURRENTLY leaves an invalid index named …_ccnew; a failed unique
            // build leaves one just like it.
            try await database.execute("CREATE TABLE twins (v int4)")
            try await database.execute("INSERT INTO twins VALUES (1), (1)")
            await #expect(throws: (any Error).self) {
                try await database.execute("CREATE UNIQUE INDEX CONCURRENTLY twins_v_ccnew ON twins (v)")
            }
            #expect(try await database.integers("SELECT count(*) FROM pg_class WHERE relname = 'twins_v_ccnew'") == [1])

            let bloated = try await Self.size(database, "history_pkey")
            let compactBefore = try await Self.size(database, "compact_pkey")
            let rebuilt = try await TestServer.withClient(database) { client in
                try await Self.reclaimer(client).reclaim()
            }
            #expect(rebuilt.map(\.index) == ["history_pkey"], "compact_pkey is full: left alone")
            let after = try await Self.size(database, "history_pkey")
            #expect(rebuilt.first?.bytesBefore == bloated && rebuilt.first?.bytesAfter == after)
            #expect(after * 20 < bloated, "\(bloated) → \(after) bytes")
            #expect(try await Self.size(database, "compact_pkey") == compactBefore)
            #expect(try await database.integers("SELECT count(*) FROM pg_class WHERE relname = 'twins_v_ccnew'") == [0])
            // Every surviving row is still found through the rebuilt index.
            let found = try await database.connection { connection in
                _ = try await connection.query("SET enable_seqscan = off", logger: TestDatabase.logger)
                return try await connection.query(
                    "SELECT count(*) FROM history WHERE scope = 'scope-1' AND seq BETWEEN 1 AND 200000",
                    logger: TestDatabase.logger
                ).collect().first?.decode(Int64.self)
            }
            #expect(found == 1000)

            // Nothing left to rebuild: a second run does nothing.
            let again = try await TestServer.withClient(database) { client in
                try await Self.reclaimer(client).reclaim()
            }
            #expect(again.isEmpty)
        }
    }
}
