import Foundation
import Logging
import PostgresNIO

/// On a Citus cluster, `sync_append` for the scopes of one shard group, on the shards themselves: for each group
/// of co-located shards (the shard of `scopes` and those of `events`, `streams` and `replica_progress` with the
/// same hash range), `sync_append_shard_<id of the scopes shard>`, created on every worker (docs/SCALING.md,
/// "A push on its shards").
///
/// `sync_append` names the distributed tables, and run on a worker, each of its statements is planned by Citus
/// at every call: deparsed to its shard's query, which PostgreSQL then parses and plans again (about 0.58 ms a
/// one-event call on a worker, against 0.30 ms for the same call on one PostgreSQL). This function has the
/// same body with the shards' names instead, so its statements are a plain PostgreSQL's, planned once per
/// session (0.31–0.34 ms). Before anything else it takes the metadata lock Citus's own writes take on a shard
/// (`lock_shard_metadata` in share mode, which a shard move takes in exclusive mode on every worker before it
/// switches the placement), then checks that the shard group is placed on this node and that each scope of the
/// call hashes to it; if not (the shards moved, a caller's mistake), it raises SQLSTATE `SY004` having written
/// nothing, and the caller runs `sync_append` instead, which Citus routes wherever the shards are.
enum CitusShardAppend {
    /// The tables `sync_append` writes, each renamed to its shard in the function.
    static let tables = ["scopes", "events", "streams", "replica_progress"]

    /// The SQLSTATE of a call made on a node that does not hold the shard group, or for a scope of another.
    static let notHere = "SY004"

    /// The function of the shard group whose `scopes` shard is `shard`.
    static func name(scopesShard shard: Int64) -> String {
        "sync_append_shard_\(shard)"
    }

    /// The shard groups of the cluster: for each hash range, the shard id of each of `tables`.
    static func shardGroups(on connection: PostgresConnection, logger: Logger) async throws -> [[String: Int64]] {
        let rows = try await connection.checkedQuery(
            """
            SELECT s.logicalrelid::regclass::text, s.shardid, s.shardminvalue FROM pg_dist_shard s
            WHERE s.logicalrelid::regclass::text = ANY (\(tables)::text[])
            ORDER BY s.shardminvalue, s.logicalrelid::regclass::text
            """, logger: logger)
        var groups: [String: [String: Int64]] = [:]
        for try await (table, shard, minimum) in rows.decode((String, Int64, String).self) {
            groups[minimum, default: [:]][table] = shard
        }
        return groups.values.filter { $0.count == tables.count }.sorted { $0["scopes"]! < $1["scopes"]! }
    }

    /// The two functions of `group` (the shards of `tables`): the body of `sync_append` on the shards, and the
    /// overload that calls the rules' append functions after it, as `sync_append`'s does.
    static func statements(group: [String: Int64]) -> [String] {
        let scopesShard = group["scopes"]!
        let function = name(scopesShard: scopesShard)
        var body = Migration.appendFunction.statements[0]
        for table in tables {
            body = body.replacingOccurrences(
                of: "\\b\(table)\\b", with: "\(table)_\(group[table]!)", options: .regularExpression)
        }
        body = body.replacingOccurrences(
            of: "CREATE FUNCTION sync_append(", with: "CREATE OR REPLACE FUNCTION \(function)(")
        let guardStatements = """
            BEGIN
                PERFORM lock_shard_metadata(5, ARRAY[\(scopesShard)]::bigint[]);
                IF NOT EXISTS (SELECT 1 FROM pg_dist_placement p
                               WHERE p.shardid = \(scopesShard)
                                 AND p.groupid = (SELECT groupid FROM pg_dist_local_group)) THEN
                    RAISE EXCEPTION 'shard % is not placed on this node', \(scopesShard) USING ERRCODE = '\(notHere)';
                END IF;
                FOR at IN 1 .. coalesce(array_length(names, 1), 0) LOOP
                    IF get_shard_id_for_distribution_column('scopes', names[at]) <> \(scopesShard) THEN
                        RAISE EXCEPTION 'scope % is not in shard %', names[at], \(scopesShard)
                            USING ERRCODE = '\(notHere)';
                    END IF;
                END LOOP;
            """
        guard let begin = body.range(of: "\nBEGIN\n") else { return [] }
        body.replaceSubrange(begin, with: "\n" + guardStatements + "\n")
        var withRules = Migration.appendWithRulesFunction.statements[0]
        withRules = withRules.replacingOccurrences(
            of: "CREATE FUNCTION sync_append(", with: "CREATE OR REPLACE FUNCTION \(function)(")
        withRules = withRules.replacingOccurrences(
            of: "RETURN QUERY SELECT * FROM sync_append(", with: "RETURN QUERY SELECT * FROM \(function)(")
        return [body, withRules]
    }

    /// Creates (or replaces) the functions of every shard group on every worker, as local functions of each
    /// (a function named after shards is nothing Citus needs to know of); returns how many shard groups have
    /// them. Run under the migrator's lock, after the tables are distributed.
    static func install(on connection: PostgresConnection, logger: Logger) async throws -> Int {
        let groups = try await shardGroups(on: connection, logger: logger)
        guard !groups.isEmpty else { return 0 }
        let script =
            "SET LOCAL citus.enable_ddl_propagation TO off;\n"
            + groups.flatMap(statements(group:)).joined(separator: ";\n") + ";"
        let rows = try await connection.checkedQuery(
            "SELECT nodename, nodeport, success, result FROM run_command_on_workers(\(script))", logger: logger)
        for try await (node, port, success, result) in rows.decode((String, Int32, Bool, String).self) {
            guard success else {
                throw CitusShardAppendError(
                    message: "the shard functions were not created on \(node):\(port): \(result)")
            }
        }
        return groups.count
    }
}

/// The shard groups' functions could not be created on a worker.
struct CitusShardAppendError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
