import Foundation
import PostgresNIO
import SyncServerTesting
import Testing

@testable import SyncServer

/// The schema and the statements stay within what a database distributed by `scope` (Citus) accepts:
/// docs/SCALING.md says how to distribute the tables; these checks keep that possible.
@Suite struct CitusRulesTests {
    /// The tables distributed by scope (every other table is a reference table or the server's own
    /// bookkeeping).
    static let distributed = ["events", "scopes", "streams", "replica_progress", "scope_compaction", "folded_events"]

    /// Every unique index (primary keys included) of every table but the migrations' bookkeeping includes
    /// `scope`: Citus enforces uniqueness only within a shard.
    @Test func everyUniqueIndexIncludesTheScope() async throws {
        try await TestServer.run { server in
            let rows = try await server.database.connection { connection in
                var found: [(table: String, index: String, columns: [String])] = []
                let query: PostgresQuery = """
                    SELECT t.relname::text, i.relname::text, array_agg(a.attname::text)
                    FROM pg_index x
                    JOIN pg_class i ON i.oid = x.indexrelid
                    JOIN pg_class t ON t.oid = x.indrelid
                    JOIN pg_namespace n ON n.oid = t.relnamespace
                    JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = ANY(x.indkey)
                    WHERE x.indisunique AND n.nspname = 'public' AND t.relname <> 'schema_migrations'
                    GROUP BY 1, 2
                    """
                for try await (table, index, columns) in try await connection.query(query, logger: TestDatabase.logger)
                    .decode((String, String, [String]).self)
                {
                    found.append((table, index, columns))
                }
                return found
            }
            let tables = Set(rows.map(\.table))
            for table in Self.distributed { #expect(tables.contains(table), "no unique index on \(table)") }
            for row in rows {
                #expect(row.columns.contains("scope"), "\(row.table).\(row.index) is unique on \(row.columns) alone")
            }
        }
    }

    /// Every statement of the server that reads or writes a distributed table names the scope, so that it
    /// can be routed to the shards of the scopes it names.
    @Test func everyStatementOnADistributedTableNamesTheScope() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/SyncServer")
        let files = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        #expect(files.count > 10)
        let table = try Regex(#"\b(events|scopes|streams|replica_progress|scope_compaction|folded_events)\b"#)
        let dml = try Regex(#"\b(SELECT|INSERT|UPDATE|DELETE)\b"#)
        let scopeColumn = try Regex(#"(^|[^a-z_])scope([^a-z_s]|$)"#)
        var checked = 0
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            // The SQL of multi-line string literals, and of one-line ones that start with a statement.
            var statements = text.components(separatedBy: "\"\"\"").enumerated().filter { $0.offset % 2 == 1 }
                .map(\.element)
            statements += text.split(separator: "\n").compactMap { line -> String? in
                guard let start = line.firstMatch(of: try! Regex(#""(SELECT|INSERT|UPDATE|DELETE|WITH) [^"]*""#))
                else { return nil }
                return String(line[start.range])
            }
            for statement in statements
            where statement.contains(dml) && statement.contains(table)
                && !statement.trimmingCharacters(in: .whitespacesAndNewlines).hasPrefix("CREATE")
            {
                checked += 1
                #expect(
                    statement.contains(scopeColumn),
                    "\(file.lastPathComponent): a statement on a distributed table without its scope: \(statement)")
            }
        }
        #expect(checked > 10)
    }
}
