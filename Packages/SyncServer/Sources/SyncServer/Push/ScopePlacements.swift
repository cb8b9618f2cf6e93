import Logging
import PostgresNIO
import Synchronization

/// Where each scope lives on a Citus cluster: the group id of the node holding the shard of `scopes` (and so of
/// every co-located table) its name hashes to, so that a push runs its transaction on that node
/// (`CitusWorkers`; docs/SCALING.md, "A push on its worker").
///
/// A lookup never delays a push: a scope not known yet answers nil (its push goes through the coordinator, alone,
/// as before) and is looked up in the background, several scopes in one query. Known placements are looked up
/// again once they are `maxAge` old, so a shard moved to another worker (`citus_move_shard_placement`, a
/// rebalance) follows within that time; until then its pushes run on the old worker, which routes their
/// statements to the new one (and commits in two phases): slower, never wrong.
final class ScopePlacements: Sendable {
    private struct Placement {
        var group: Int32
        var readAt: ContinuousClock.Instant
    }

    private struct State {
        var placements: [String: Placement] = [:]
        var wanted: Set<String> = []
        var looking = false
    }

    let database: Database
    let maxAge: Duration
    /// The most scopes kept; past it the map starts over (its scopes are looked up again as they push).
    let capacity: Int
    let logger: Logger
    private let state = Mutex(State())

    init(database: Database, maxAge: Duration = .seconds(30), capacity: Int = 100_000, logger: Logger) {
        self.database = database
        self.maxAge = maxAge
        self.capacity = capacity
        self.logger = logger
    }

    /// The node group of `scope` as last looked up, or nil when it is not known yet; starts a lookup when it is
    /// unknown or old.
    func group(of scope: String) -> Int32? {
        let now = ContinuousClock.now
        let (group, start) = state.withLock { state -> (Int32?, Bool) in
            let known = state.placements[scope]
            if known == nil || now - known!.readAt > maxAge {
                state.wanted.insert(scope)
            }
            guard !state.wanted.isEmpty, !state.looking else { return (known?.group, false) }
            state.looking = true
            return (known?.group, true)
        }
        if start { Task { await self.lookUp() } }
        return group
    }

    /// Looks up the wanted scopes, in rounds, until none is left.
    private func lookUp() async {
        while true {
            let scopes = state.withLock { state -> [String] in
                let scopes = Array(state.wanted)
                state.wanted.removeAll()
                if scopes.isEmpty { state.looking = false }
                return scopes
            }
            guard !scopes.isEmpty else { return }
            do {
                let found = try await database.withConnection { [logger] connection in
                    try await Self.read(scopes, on: connection, logger: logger)
                }
                let now = ContinuousClock.now
                state.withLock { state in
                    if state.placements.count + found.count > capacity { state.placements.removeAll() }
                    for (scope, group) in found { state.placements[scope] = Placement(group: group, readAt: now) }
                }
            } catch {
                // The database cannot answer now: the scopes stay unplaced until their next push asks again.
                logger.debug("scope placements not read", metadata: ["sync.error": "\(String(reflecting: error))"])
                state.withLock { $0.looking = false }
                return
            }
        }
    }

    /// The node group of each of `scopes`' shards of `scopes` (the table every other is co-located with).
    static func read(_ scopes: [String], on connection: PostgresConnection, logger: Logger) async throws
        -> [String: Int32]
    {
        let rows = try await connection.checkedQuery(
            """
            SELECT s.scope, p.groupid FROM unnest(\(scopes)::text[]) AS s(scope)
            JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('scopes', s.scope)
            """, logger: logger)
        var found: [String: Int32] = [:]
        for try await (scope, group) in rows.decode((String, Int32).self) { found[scope] = group }
        return found
    }
}
