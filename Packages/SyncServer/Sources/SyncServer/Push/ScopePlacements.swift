import Logging
import PostgresNIO
import SyncModels
import Synchronization

/// Where each scope lives on a Citus cluster: the group id of the node holding the shard of `scopes` (and so of
/// every co-located table) its name hashes to, so that a push runs its transaction on that node
/// (`CitusWorkers`; docs/SCALING.md, "A push on its worker").
///
/// A scope's first push reads its placement (one query to the coordinator, `resolve`); after that it is known.
/// Known placements are looked up again in the background once they are `maxAge` old, several scopes in one
/// query, so a shard moved to another worker (`citus_move_shard_placement`, a rebalance) follows within that
/// time; until then its pushes run on the old worker, which routes their statements to the new one (and commits
/// in two phases): slower, never wrong.
final class ScopePlacements: Sendable {
    /// Where a scope is: the node group holding its shards, and the id of its shard of `scopes`.
    struct Place: Sendable {
        var group: Int32
        var shard: Int64
    }

    private struct Placement {
        var place: Place
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

    /// Where `scope` is: as last looked up, or, when it is not known, read now; nil when the coordinator cannot
    /// answer.
    func resolve(_ scope: String) async -> Place? {
        if let place = place(of: scope) { return place }
        do {
            let found = try await database.withConnection { [logger] connection in
                try await Self.read([scope], on: connection, logger: logger)
            }
            store(found)
            return found[scope]
        } catch {
            logger.debug("scope placement not read", metadata: ["sync.error": "\(String(reflecting: error))"])
            return nil
        }
    }

    /// Where `scope` is as last looked up, or nil when it is not known yet; starts a lookup in the background
    /// when it is unknown or old.
    func place(of scope: String) -> Place? {
        let now = ContinuousClock.now
        let (place, start) = state.withLock { state -> (Place?, Bool) in
            let known = state.placements[scope]
            if known == nil || now - known!.readAt > maxAge {
                state.wanted.insert(scope)
            }
            guard !state.wanted.isEmpty, !state.looking else { return (known?.place, false) }
            state.looking = true
            return (known?.place, true)
        }
        if start { Task { await self.lookUp() } }
        return place
    }

    /// Forgets where `scopes` are (a call found their shards elsewhere): their next push reads it again.
    func forget(_ scopes: [String]) {
        state.withLock { state in
            for scope in scopes { state.placements[scope] = nil }
        }
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
                store(
                    try await database.withConnection { [logger] connection in
                        try await Self.read(scopes, on: connection, logger: logger)
                    })
            } catch {
                // The database cannot answer now: the scopes stay unplaced until their next push asks again.
                logger.debug("scope placements not read", metadata: ["sync.error": "\(String(reflecting: error))"])
                state.withLock { $0.looking = false }
                return
            }
        }
    }

    private func store(_ found: [String: Place]) {
        let now = ContinuousClock.now
        state.withLock { state in
            if state.placements.count + found.count > capacity { state.placements.removeAll() }
            for (scope, place) in found { state.placements[scope] = Placement(place: place, readAt: now) }
        }
    }

    /// Where each of `scopes` is: its shard of `scopes` (the table every other is co-located with) and the node
    /// group holding it.
    static func read(_ scopes: [String], on connection: PostgresConnection, logger: Logger) async throws
        -> [String: Place]
    {
        let rows = try await connection.checkedQuery(
            """
            SELECT s.scope, p.groupid, p.shardid FROM unnest(\(scopes)::text[]) AS s(scope)
            JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('scopes', s.scope)
            """, logger: logger)
        var found: [String: Place] = [:]
        for try await (scope, group, shard) in rows.decode((String, Int32, Int64).self) {
            found[scope] = Place(group: group, shard: shard)
        }
        return found
    }
}

/// On a Citus cluster, the node a request of some scopes runs on: where the scopes are (`ScopePlacements`) and
/// that node's pool (`CitusWorkers`).
struct CitusRouting: Sendable {
    let placements: ScopePlacements
    let workers: CitusWorkers

    /// The node group holding every one of `scopes`, and its pool; nil when they span nodes, or a scope's
    /// placement or its node is not known (the request then goes through the coordinator).
    func node(of scopes: [Scope]) async -> (group: Int32, database: Database)? {
        guard let first = scopes.first, let place = await placements.resolve(first.name) else { return nil }
        for scope in scopes.dropFirst() where await placements.resolve(scope.name)?.group != place.group {
            return nil
        }
        guard let database = workers.database(group: place.group) else { return nil }
        return (place.group, database)
    }
}
