import Logging
import Metrics
import NIOCore
import NIOPosix
import PostgresNIO
import SyncProtocol
import Synchronization

/// The server's access to PostgreSQL: a PostgresNIO connection pool plus admission control.
///
/// Every operation goes through `withConnection`/`withTransaction`, which (1) refuses new work with
/// 503 `server.unavailable` once `queueLimit` operations are already waiting or running, (2) gives up with
/// 503 when no connection is leased within `acquireTimeout` (database down or pool exhausted), and
/// (3) maps connection-level failures to 503. It also keeps the pool-usage gauges of `/metrics`.
final class Database: Sendable {
    let client: PostgresClient
    let queueLimit: Int
    let acquireTimeout: Duration
    private let admitted = Mutex(0)
    private let inUseGauge: LevelGauge
    private let waitingGauge: LevelGauge
    /// Push transactions run here (`sync_push_transactions_total`, by `node`: `database`, or on Citus a node
    /// reached directly).
    let pushTransactions: Counter

    /// A pool per event loop (`ServerConfiguration.requestsOnTheirLoops`): a lease made on a loop takes a connection
    /// served by the same loop. Empty otherwise.
    let loopPools: [ObjectIdentifier: LoopPool]

    /// Long-polls' reads at a time (`Lane.waiting`).
    let waitingLane: AsyncGate

    /// - Parameter node: for the pool of a Citus worker (`CitusWorkers`), its name: the pool's gauges then have
    ///   a `node` dimension of their own instead of being the server's.
    init(
        client: PostgresClient, queueLimit: Int, acquireTimeout: Duration, metrics: ServerMetrics,
        waitingReads: Int = 4, node: String? = nil, loopPools: [ObjectIdentifier: LoopPool] = [:]
    ) {
        self.client = client
        self.loopPools = loopPools
        self.waitingLane = AsyncGate(width: waitingReads)
        self.queueLimit = queueLimit
        self.acquireTimeout = acquireTimeout
        self.pushTransactions = Counter(
            label: "sync_push_transactions_total", dimensions: [("node", node ?? "database")], factory: metrics.factory)
        if let node {
            self.inUseGauge = LevelGauge(
                label: "sync_db_node_connections_in_use", dimensions: [("node", node)], factory: metrics.factory)
            self.waitingGauge = LevelGauge(
                label: "sync_db_node_operations_admitted", dimensions: [("node", node)], factory: metrics.factory)
        } else {
            self.inUseGauge = metrics.connectionsInUse
            self.waitingGauge = metrics.operationsAdmitted
        }
    }

    /// What a pool keeps open while idle, and how often it pings idle connections (nil: never);
    /// `ServerConfiguration.databasePoolMinimum` says what each costs.
    struct PoolOptions: Sendable {
        var minimum = 0
        var keepAlive: Duration? = .seconds(30)
    }

    /// The name the server's connections give PostgreSQL (`pg_stat_activity.application_name`).
    static let applicationName = "sync-server"

    /// The configuration of a pool for `url`.
    static func clientConfiguration(_ url: DatabaseURL, poolSize: Int, options: PoolOptions = PoolOptions())
        -> PostgresClient.Configuration
    {
        var configuration = PostgresClient.Configuration(
            host: url.host, port: url.port, username: url.username, password: url.password,
            database: url.database, tls: .disable)
        configuration.options.maximumConnections = poolSize
        configuration.options.minimumConnections = min(options.minimum, poolSize)
        configuration.options.keepAliveBehavior = options.keepAlive.map { .init(frequency: $0) }
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.additionalStartupParameters = [("application_name", applicationName)]
        return configuration
    }

    /// Runs `body` with a leased connection.
    /// - Throws: `SyncProtocolError` `server.unavailable` when the database cannot serve, otherwise what
    ///   `body` throws.
    func withConnection<Result: Sendable>(
        lane: Lane = .work, _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        if lane == .waiting {
            let queued = ContinuousClock.now
            await waitingLane.acquire()
            defer { waitingLane.release() }
            // Queued past the time a lease may take: the database is not keeping up (or is down), and
            // those behind in the line should not each wait that long again.
            guard ContinuousClock.now - queued < acquireTimeout else {
                throw SyncProtocolError(.serverUnavailable, "the server is saturated; retry later")
            }
            return try await leaseConnection(body)
        }
        let count = admitted.withLock { count in
            count += 1
            return count
        }
        waitingGauge.record(count)
        defer {
            let count = admitted.withLock { count in
                count -= 1
                return count
            }
            waitingGauge.record(count)
        }
        guard count <= queueLimit else {
            throw SyncProtocolError(.serverUnavailable, "the server is saturated; retry later")
        }
        return try await leaseConnection(body)
    }

    /// Who an operation is for: work a client waits on (pushes, pulls), or a long-poll, which waits anyway.
    enum Lane: Sendable {
        /// Admitted up to `queueLimit` operations, then refused with 503.
        case work
        /// The reads of long-polls: never refused, but at most `waitingLane`'s width at a time, so that a
        /// burst of devices connecting or timing out together queues here instead of filling the pool
        /// and the work queue.
        case waiting
    }

    /// Leases a connection and runs `body`, giving up with 503 after `acquireTimeout` without one.
    ///
    /// The lease runs in a task of its own (on the caller's event loop if it runs on one), which a timer on one of
    /// NIO's event loops cancels if no connection came in time (PostgresNIO then drops the waiting request). A
    /// task group with a child sleeping out the timeout beside it cost every lease a second task and a timer of
    /// Dispatch's, set and cancelled, which its manager thread woke for: 5–9 % of the server's CPU for a one-event
    /// push, one at a time.
    private func leaseConnection<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let lease = LeaseFlag()
        // Made on an event loop (a request served there, `ServerConfiguration.requestsOnTheirLoops`): the lease
        // stays on it, with a connection of its own pool when there is one.
        let executor = LoopExecutors.singleton.current
        let pool = executor.flatMap { loopPools[ObjectIdentifier($0.loop)] }
        let client = pool?.client ?? self.client
        let task = Task(executorPreference: executor) { [inUseGauge] in
            try await client.withConnection { connection in
                // Leased once the timeout has passed: the task is cancelled, and the caller answered 503.
                guard lease.start() else { throw CancellationError() }
                inUseGauge.adjust(by: 1)
                pool?.leased(connection)
                defer {
                    pool?.released(connection)
                    inUseGauge.adjust(by: -1)
                }
                return try await body(connection)
            }
        }
        let timeout = NIOSingletons.posixEventLoopGroup.any().scheduleTask(in: .init(acquireTimeout)) {
            if lease.expire() { task.cancel() }
        }
        defer { timeout.cancel() }
        do {
            return try await withTaskCancellationHandler {
                try await task.value
            } onCancel: {
                task.cancel()
            }
        } catch {
            if lease.expired {
                throw SyncProtocolError(.serverUnavailable, "no database connection became available in time")
            }
            throw Self.classify(error)
        }
    }

    /// Runs `body` in a transaction (committed when it returns, rolled back when it throws).
    func withTransaction<Result: Sendable>(
        logger: Logger, _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await withConnection { connection in
            try await connection.transaction(logger: logger) { connection in
                try await body(connection)
            }
        }
    }

    /// Connection-level failures become 503 `server.unavailable`; protocol errors pass through; anything
    /// else is left as is (and becomes a 500 if it reaches the client).
    static func classify(_ error: any Error) -> any Error {
        if error is SyncProtocolError { return error }
        // PostgresNIO surfaces some pool failures (e.g. its connection circuit breaker) as
        // `_ConnectionPoolModule.ConnectionPoolError`, a type of an underscored module: matched by name.
        if String(describing: type(of: error)) == "ConnectionPoolError" { return unavailable }
        if let error = error as? PSQLError {
            switch error.code {
            case .connectionError, .serverClosedConnection, .clientClosedConnection, .poolClosed, .uncleanShutdown,
                .queryCancelled:
                return unavailable
            case .server:
                let state = error.serverInfo?[.sqlState] ?? ""
                // 08: connection exception, 53: insufficient resources, 57: operator intervention.
                if state.hasPrefix("08") || state.hasPrefix("53") || state.hasPrefix("57") { return unavailable }
                return error
            default:
                return error
            }
        }
        if error is CancellationError { return unavailable }
        return error
    }

    /// Whether a database error is worth retrying the whole transaction for (serialization failure or
    /// deadlock, both rolled back by PostgreSQL).
    static func isRetryable(_ error: any Error) -> Bool {
        if error is AppendRace { return true }
        guard let error = error as? PSQLError, error.code == .server else { return false }
        let state = error.serverInfo?[.sqlState] ?? ""
        return state == "40001" || state == "40P01"
    }

    static let unavailable = SyncProtocolError(.serverUnavailable, "the database is unavailable; retry later")
    static let connectionClosed = SyncProtocolError(
        .serverUnavailable, "the database connection closed; retry later")
}

extension PostgresConnection {
    /// `query`, refused with 503 `server.unavailable` on a connection that has closed.
    ///
    /// Once a connection's channel has closed, NIO removes its handlers, and a query PostgresNIO writes after
    /// that is never answered: its `await` never returns. A connection closes under a request when
    /// PostgreSQL terminates the backend or restarts, or when the pool force-closes it (the server was
    /// cancelled); the request's next statement would then wait forever, holding its token's request slot
    /// and the server's shutdown. Every statement of the server and of its domains' rules goes through here.
    @discardableResult
    public func checkedQuery(
        _ query: PostgresQuery, logger: Logger, file: String = #fileID, line: Int = #line
    ) async throws -> PostgresRowSequence {
        guard !isClosed else { throw Database.connectionClosed }
        return try await self.query(query, logger: logger, file: file, line: line)
    }

    /// `BEGIN`, `body`, then `COMMIT`, or `ROLLBACK` when `body` throws; what fails is rethrown as it is.
    ///
    /// Unlike PostgresNIO's `withTransaction`, it writes nothing to a connection that has closed (see
    /// `checkedQuery`): PostgresNIO's sends `ROLLBACK` after any error, including the error of the connection
    /// closing, and waits for an answer that never comes. That hung requests, and the test suite with them,
    /// when the pool force-closed their connections. A closed connection's transaction is gone with it:
    /// nothing to roll back; a `COMMIT` it can no longer send means the transaction did not commit.
    func transaction<Result>(
        logger: Logger, _ body: (PostgresConnection) async throws -> sending Result
    ) async throws -> sending Result {
        try await checkedQuery("BEGIN", logger: logger)
        let value: Result
        do {
            value = try await body(self)
        } catch {
            _ = try? await checkedQuery("ROLLBACK", logger: logger)
            throw error
        }
        try await checkedQuery("COMMIT", logger: logger)
        return value
    }
}

/// Another transaction stored one of this batch's ids between the lookup and the insert; the batch is
/// rolled back and retried, which then sees it as a duplicate.
struct AppendRace: Error {}

/// At most `width` holders at a time; the rest wait in arrival order, however many.
final class AsyncGate: Sendable {
    private struct State {
        var free: Int
        var queue: [CheckedContinuation<Void, Never>] = []
        var head = 0
    }
    private let state: Mutex<State>

    init(width: Int) {
        state = Mutex(State(free: max(1, width)))
    }

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let admitted = state.withLock { state in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.queue.append(continuation)
                return false
            }
            if admitted { continuation.resume() }
        }
    }

    /// Hands the place to the next in line, or frees it.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.head < state.queue.count else {
                state.free += 1
                return nil
            }
            let next = state.queue[state.head]
            state.head += 1
            if state.head == state.queue.count {
                state.queue.removeAll(keepingCapacity: true)
                state.head = 0
            }
            return next
        }
        next?.resume()
    }
}

/// Where a lease stands: waiting for a connection, holding one, or given up on (`acquireTimeout` passed first).
final class LeaseFlag: Sendable {
    private enum State { case waiting, leased, expired }
    private let state = Mutex(State.waiting)

    /// The lease got its connection: true unless it had expired.
    func start() -> Bool {
        state.withLock { state in
            guard state == .waiting else { return false }
            state = .leased
            return true
        }
    }

    /// The timeout passed: true (the lease is given up) unless it had its connection.
    func expire() -> Bool {
        state.withLock { state in
            guard state == .waiting else { return false }
            state = .expired
            return true
        }
    }

    var expired: Bool { state.withLock { $0 == .expired } }
}

extension PostgresClient {
    /// Runs `body` while the client runs (its `run()` in a child task, cancelled when `body` returns or
    /// throws). `body` starts once `run()` is under way: a lease before it makes PostgresNIO log a warning.
    public func whileRunning<Result: Sendable>(_ body: @Sendable (PostgresClient) async throws -> Result)
        async throws -> Result
    {
        try await withThrowingTaskGroup(of: Void.self) { group in
            let (running, starts) = AsyncStream<Never>.makeStream()
            group.addTask {
                starts.finish()
                await self.run()
            }
            defer { group.cancelAll() }
            for await _ in running {}
            return try await body(self)
        }
    }
}
