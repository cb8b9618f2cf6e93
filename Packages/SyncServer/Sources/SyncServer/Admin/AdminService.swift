import Foundation
import Logging
import PostgresNIO
import SyncProtocol
import Synchronization

/// The answers of the admin API (`/v1/admin/*`, docs/PROTOCOL.md, "Admin API"): the server's status from
/// memory (`AdminStats`, the pool's and the hubs' gauges), and scopes and their replicas from the database,
/// sorted, searched and paged there. Ids, counts and times only: never a payload.
final class AdminService: Sendable {
    let database: Database
    let metrics: ServerMetrics
    let configuration: ServerConfiguration
    let domainName: String
    let version: String
    /// Per scope, its stored rows and their bytes, read at most every `storageMaxAge` (they take a scan of the
    /// scope's rows), and its head when last answered, for its events per second.
    private let storage = Mutex([String: ScopeStorage]())
    private let heads = Mutex([String: HeadSample]())
    let storageMaxAge: Duration

    init(
        database: Database, metrics: ServerMetrics, configuration: ServerConfiguration, domainName: String,
        version: String = AdminService.serverVersion, storageMaxAge: Duration = .seconds(10)
    ) {
        self.database = database
        self.metrics = metrics
        self.configuration = configuration
        self.domainName = domainName
        self.version = version
        self.storageMaxAge = storageMaxAge
    }

    /// The version the status reports: the protocol's, with the server library's own.
    static let serverVersion = "1.0.0"

    struct ScopeStorage: Sendable {
        var readAt: ContinuousClock.Instant
        var rows: Int64
        var bytes: Int64
    }

    struct HeadSample: Sendable {
        var at: ContinuousClock.Instant
        var head: Int64
        var perSecond: Double
    }

    // MARK: Status

    func status(now: Date = Date()) -> AdminStatus {
        let stats = metrics.admin.snapshot
        let nowSecond = Int64(now.timeIntervalSince1970)
        let window = stats.seconds.filter { $0.time > nowSecond - Int64(AdminStats.latencyWindowSeconds) }
        var push = LatencyHistogram()
        var pull = LatencyHistogram()
        for second in window {
            push.merge(second.push)
            pull.merge(second.pull)
        }
        // Requests per second over the last complete ten seconds.
        let recent = stats.seconds.filter { $0.time >= nowSecond - 10 && $0.time < nowSecond }
        let perSecond = Double(recent.reduce(0) { $0 + $1.requests }) / 10
        let routes = stats.routes.map { key, totals in
            AdminStatus.Route(
                method: key.method, route: key.route, count: totals.count, errors: totals.errors,
                p50Ms: totals.latency.percentileMilliseconds(0.5), p99Ms: totals.latency.percentileMilliseconds(0.99))
        }
        .sorted { ($0.count, $1.route) > ($1.count, $0.route) }
        let errors = stats.errors.map {
            AdminStatus.ErrorCount(code: $0.key.code, status: $0.key.status, count: $0.value)
        }
        .sorted { ($0.count, $1.code) > ($1.count, $0.code) }
        return AdminStatus(
            server: .init(
                version: version, domain: domainName, startedAt: metrics.admin.startedAt,
                uptimeSeconds: now.timeIntervalSince(metrics.admin.startedAt), residentBytes: Self.residentBytes()),
            requests: .init(total: stats.total, perSecond: perSecond, byRoute: routes),
            latency: .init(push: .init(push), pull: .init(pull)),
            errors: errors,
            events: .init(
                accepted: stats.accepted, duplicate: stats.duplicate, rejected: stats.rejected, pulled: stats.pulled),
            database: .init(
                poolSize: configuration.databasePoolSize, inUse: metrics.connectionsInUse.value,
                admitted: metrics.operationsAdmitted.value, queueLimit: configuration.databaseQueueLimit),
            connections: .init(
                liveStreams: metrics.liveSubscribers.value, longPolls: metrics.longPolls.value,
                parkedLongPolls: metrics.parkedLongPolls.value),
            series: stats.seconds.map { second in
                AdminStatus.Second(
                    t: second.time, requests: second.requests, errors: second.errors,
                    eventsAccepted: second.accepted, eventsPulled: second.pulled,
                    pushP99Ms: second.push.percentileMilliseconds(0.99),
                    pullP99Ms: second.pull.percentileMilliseconds(0.99))
            })
    }

    /// The process's resident memory in bytes (`/proc/self/statm`); nil where there is none.
    static func residentBytes() -> Int? {
        #if os(Linux)
            guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
            let fields = text.split(separator: " ")
            guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
            return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
        #else
            return nil
        #endif
    }

    // MARK: Scopes

    /// How the scopes are listed.
    struct ScopeQuery: Sendable, Equatable {
        enum Sort: String, Sendable, CaseIterable {
            case scope, head, lag, replicas, compactedAt
        }

        var search = ""
        var sort = Sort.scope
        var descending = false
        var limit = 50
        var offset = 0

        static let maxLimit = 500

        /// From `GET /v1/admin/scopes`'s query.
        /// - Throws: `SyncProtocolError` `request.invalid` naming the parameter that is not valid.
        init(query: [(name: String, value: String)]) throws(SyncProtocolError) {
            for (name, value) in query {
                switch name {
                case "search": search = value
                case "sort":
                    guard let sort = Sort(rawValue: value) else {
                        throw SyncProtocolError(
                            .requestInvalid,
                            "sort must be one of \(Sort.allCases.map(\.rawValue).joined(separator: ", "))")
                    }
                    self.sort = sort
                case "order":
                    guard value == "asc" || value == "desc" else {
                        throw SyncProtocolError(.requestInvalid, "order must be asc or desc")
                    }
                    descending = value == "desc"
                case "limit":
                    guard let limit = Int(value), (1...Self.maxLimit).contains(limit) else {
                        throw SyncProtocolError(.requestInvalid, "limit must be an integer in 1...\(Self.maxLimit)")
                    }
                    self.limit = limit
                case "offset":
                    guard let offset = Int(value), offset >= 0 else {
                        throw SyncProtocolError(.requestInvalid, "offset must be a non-negative integer")
                    }
                    self.offset = offset
                default: continue
                }
            }
        }

        init() {}

        /// The ORDER BY of the listing (from the cases above only, never from the request's text).
        var orderBy: String {
            let direction = descending ? "DESC" : "ASC"
            let nulls = descending ? "NULLS LAST" : "NULLS FIRST"
            switch sort {
            case .scope: return "s.scope \(direction)"
            case .head: return "s.head \(direction), s.scope"
            case .lag: return "s.head - COALESCE(p.stable, s.head) \(direction), s.scope"
            case .replicas: return "COALESCE(p.replicas, 0) \(direction), s.scope"
            case .compactedAt: return "c.compacted_at \(direction) \(nulls), s.scope"
            }
        }
    }

    func scopes(_ query: ScopeQuery, logger: Logger) async throws -> AdminScopes {
        let horizon = Double(configuration.evictionHorizonSeconds)
        let search = query.search.lowercased()
        typealias Row = (String, Int64, Int64, Int64, Int64, Date?, Int64?, Int64)
        let (total, rows) = try await database.withConnection { connection in
            let counted = try await connection.checkedQuery(
                "SELECT count(*) FROM scopes WHERE strpos(lower(scope), \(search)) > 0", logger: logger)
            var total: Int64 = 0
            for try await (count) in counted.decode(Int64.self) { total = count }
            let listed = try await connection.checkedQuery(
                """
                SELECT s.scope, s.head, s.retained_from_seq, COALESCE(c.compacted_through, 0),
                       COALESCE(c.removed_events, 0), c.compacted_at, p.stable, COALESCE(p.replicas, 0)
                FROM scopes s
                LEFT JOIN scope_compaction c ON c.scope = s.scope
                LEFT JOIN (
                    SELECT scope, min(acknowledged_seq) AS stable, count(*) AS replicas FROM replica_progress
                    WHERE seen_at > now() - make_interval(secs => \(horizon))
                    GROUP BY scope
                ) p ON p.scope = s.scope
                WHERE strpos(lower(s.scope), \(search)) > 0
                ORDER BY \(unescaped: query.orderBy)
                LIMIT \(query.limit) OFFSET \(query.offset)
                """, logger: logger)
            var rows: [Row] = []
            for try await row in listed.decode(Row.self) { rows.append(row) }
            return (total, rows)
        }
        let names = rows.map(\.0)
        let stored = try await storage(of: names, logger: logger)
        let blobBytes = try await blobBytes(of: names, logger: logger)
        let rates = eventsPerSecond(rows.map { ($0.0, $0.1) })
        return AdminScopes(
            total: Int(total), offset: query.offset, limit: query.limit, sort: query.sort.rawValue,
            order: query.descending ? "desc" : "asc",
            scopes: rows.map { row in
                let (scope, head, retainedFrom, compactedThrough, removed, compactedAt, stable, replicas) = row
                return AdminScopes.Scope(
                    scope: scope, head: head, storedEvents: stored[scope]?.rows ?? 0, bytes: stored[scope]?.bytes ?? 0,
                    blobBytes: blobBytes[scope] ?? 0, stable: stable, stableLag: stable.map { max(0, head - $0) },
                    retainedFrom: retainedFrom, compactedThrough: compactedThrough, compactedAt: compactedAt,
                    compactionRemoved: removed, replicas: Int(replicas), eventsPerSecond: rates[scope] ?? 0)
            })
    }

    /// The rows each scope stores (events not folded, and folded ones) and their bytes as stored, read again when
    /// older than `storageMaxAge`.
    func storage(of scopes: [String], logger: Logger) async throws -> [String: ScopeStorage] {
        let now = ContinuousClock.now
        // Looked up by the listed scopes, not by walking a cache that may hold every scope of the server.
        var known = storage.withLock { cache in
            var fresh: [String: ScopeStorage] = [:]
            for scope in scopes {
                if let value = cache[scope], now - value.readAt < storageMaxAge { fresh[scope] = value }
            }
            return fresh
        }
        let missing = scopes.filter { known[$0] == nil }
        guard !missing.isEmpty else { return known }
        let read = try await database.withConnection { connection in
            var found: [String: ScopeStorage] = [:]
            for table in ["events", "folded_events"] {
                let rows = try await connection.checkedQuery(
                    """
                    SELECT scope, count(*), COALESCE(sum(pg_column_size(payload)), 0)::int8 FROM \(unescaped: table)
                    WHERE scope = ANY(\(missing)::text[]) GROUP BY scope
                    """, logger: logger)
                for try await (scope, count, bytes) in rows.decode((String, Int64, Int64).self) {
                    found[scope, default: ScopeStorage(readAt: now, rows: 0, bytes: 0)].rows += count
                    found[scope]!.bytes += bytes
                }
            }
            return found
        }
        storage.withLock { cache in
            if cache.count > 100_000 { cache.removeAll(keepingCapacity: true) }
            for scope in missing {
                let value = read[scope] ?? ScopeStorage(readAt: now, rows: 0, bytes: 0)
                cache[scope] = value
                known[scope] = value
            }
        }
        return known
    }

    func blobBytes(of scopes: [String], logger: Logger) async throws -> [String: Int64] {
        guard !scopes.isEmpty else { return [:] }
        return try await database.withConnection { connection in
            let rows = try await connection.checkedQuery(
                "SELECT scope, sum(size)::int8 FROM blobs WHERE scope = ANY(\(scopes)::text[]) GROUP BY scope",
                logger: logger)
            var found: [String: Int64] = [:]
            for try await (scope, bytes) in rows.decode((String, Int64).self) { found[scope] = bytes }
            return found
        }
    }

    /// Events per second of each scope since the head an earlier answer saw (at least a second before; the rate
    /// last computed otherwise).
    func eventsPerSecond(_ scopes: [(String, Int64)], now: ContinuousClock.Instant = .now) -> [String: Double] {
        heads.withLock { samples in
            if samples.count > 100_000 { samples.removeAll(keepingCapacity: true) }
            var rates: [String: Double] = [:]
            for (scope, head) in scopes {
                guard let sample = samples[scope] else {
                    samples[scope] = HeadSample(at: now, head: head, perSecond: 0)
                    rates[scope] = 0
                    continue
                }
                let elapsed = now - sample.at
                guard elapsed >= .seconds(1) else {
                    rates[scope] = sample.perSecond
                    continue
                }
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                let rate = Double(max(0, head - sample.head)) / seconds
                samples[scope] = HeadSample(at: now, head: head, perSecond: rate)
                rates[scope] = rate
            }
            return rates
        }
    }

    // MARK: Replicas

    func replicas(of scope: String, limit: Int, offset: Int, logger: Logger) async throws -> AdminReplicas {
        let horizon = Double(configuration.evictionHorizonSeconds)
        typealias Row = (String, Int64, Date, Double, Bool)
        return try await database.withConnection { connection in
            let heads = try await connection.checkedQuery(
                """
                SELECT s.head,
                       (SELECT min(acknowledged_seq) FROM replica_progress
                        WHERE scope = \(scope) AND seen_at > now() - make_interval(secs => \(horizon))),
                       (SELECT count(*) FROM replica_progress WHERE scope = \(scope))
                FROM scopes s WHERE s.scope = \(scope)
                """, logger: logger)
            var found: (head: Int64, stable: Int64?, total: Int64)? = nil
            for try await row in heads.decode((Int64, Int64?, Int64).self) { found = row }
            guard let found else { throw SyncProtocolError(.routeNotFound, "no such scope") }
            let listed = try await connection.checkedQuery(
                """
                SELECT replica, acknowledged_seq, seen_at, EXTRACT(EPOCH FROM now() - seen_at)::float8,
                       seen_at > now() - make_interval(secs => \(horizon))
                FROM replica_progress WHERE scope = \(scope)
                ORDER BY acknowledged_seq, replica LIMIT \(limit) OFFSET \(offset)
                """, logger: logger)
            var replicas: [AdminReplicas.Replica] = []
            for try await (replica, acknowledged, seenAt, since, active) in listed.decode(Row.self) {
                replicas.append(
                    .init(
                        replica: replica, acknowledged: acknowledged, behind: max(0, found.head - acknowledged),
                        seenAt: seenAt, secondsSinceSeen: max(0, since), active: active,
                        holdsStable: active && acknowledged == found.stable && acknowledged < found.head))
            }
            return AdminReplicas(
                scope: scope, head: found.head, stable: found.stable, total: Int(found.total), offset: offset,
                limit: limit, replicas: replicas)
        }
    }
}
