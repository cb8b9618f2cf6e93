import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOPosix
import PostgresNIO
import Prometheus
import ServiceLifecycle
import SyncProtocol
import Synchronization

/// Builds the sync server: the PostgreSQL pool, the long-poll hub and the HTTP application, run as
/// services of one `ServiceGroup` (the application's), with migrations applied before the server listens.
public struct SyncServerApp: Sendable {
    public var configuration: ServerConfiguration
    public var logger: Logger
    /// Where the server's metrics are kept and `/metrics` reads them from.
    public var registry: PrometheusCollectorRegistry
    /// The domain plugged in: its push rules, its commutative types, its stream folder.
    public var domain: any SyncDomain

    /// - Parameters:
    ///   - configuration: what the server listens on, its database, limits and policies.
    ///   - domain: what the served events mean to the server; `GenericDomain()` serves a plain ordered event
    ///     log.
    ///   - logger: the server's logger.
    ///   - registry: where the server keeps its metrics (`/metrics` reads them from it).
    public init(
        configuration: ServerConfiguration, domain: any SyncDomain = GenericDomain(), logger: Logger,
        registry: PrometheusCollectorRegistry
    ) {
        self.configuration = configuration
        self.domain = domain
        self.logger = logger
        self.registry = registry
    }

    /// How long a database operation waits for a connection before answering 503.
    public var acquireTimeout: Duration = .seconds(5)

    /// Called with the bound port once the server listens (useful with port 0).
    public var onListening: @Sendable (Int) async -> Void = { _ in }

    /// Where blob bytes go instead of the store `configuration.blobs.store` names: a `BlobStore` of one's own
    /// (over an object store, for example). Nil by default.
    public var blobStore: (any BlobStore)? = nil

    /// The runnable application (its `services` include the pool and the hub).
    /// - Throws: `ConfigurationError` for invalid configuration.
    public func makeApplication() async throws -> some ApplicationProtocol {
        try configuration.validate()
        LargeBuffers.returnedToTheSystem
        let rules = domain.rules
        let url = try DatabaseURL(configuration.databaseURL)
        var databaseLogger = logger
        databaseLogger.logLevel = max(logger.logLevel, .notice)
        let client = PostgresClient(
            // One more connection than the pool size for the LISTEN connection of the hub.
            configuration: Database.clientConfiguration(
                url, poolSize: configuration.databasePoolSize + 1, options: configuration.poolOptions),
            backgroundLogger: databaseLogger)
        let metrics = ServerMetrics(factory: PrometheusMetricsFactory(registry: registry))
        let executors = LoopExecutors.singleton
        var loopServices: [any Service] = []
        var loopPools: [ObjectIdentifier: LoopPool] = [:]
        if configuration.requestsOnTheirLoops {
            let perLoop = max(1, (configuration.databasePoolSize + executors.loops.count - 1) / executors.loops.count)
            for loop in executors.loops {
                let pool = LoopPool(
                    configuration: Database.clientConfiguration(url, poolSize: perLoop), size: perLoop,
                    keepAlive: configuration.poolOptions.keepAlive, loop: loop, logger: databaseLogger)
                loopPools[ObjectIdentifier(loop)] = pool
                if let executor = executors.executor(for: loop) {
                    loopServices.append(LoopPoolService(pool: pool, executor: executor, logger: databaseLogger))
                }
            }
        }
        let database = Database(
            client: client, queueLimit: configuration.databaseQueueLimit, acquireTimeout: acquireTimeout,
            metrics: metrics, waitingReads: max(1, configuration.databasePoolSize / 4), loopPools: loopPools)
        let live = LiveHub(
            database: database, logger: logger, metrics: metrics, heartbeatSeconds: configuration.liveHeartbeatSeconds,
            ringBytes: configuration.liveBufferBytes)
        let hub = LongPollHub(
            client: client, logger: logger, metrics: metrics, live: live,
            listensOnItsLoop: configuration.requestsOnTheirLoops)
        // On Citus, each push and pull runs on the node of its scopes, reached directly (docs/SCALING.md).
        let workers =
            configuration.citus
            ? CitusWorkers(
                coordinator: database, url: url, poolSize: configuration.databasePoolSize,
                poolOptions: configuration.poolOptions, acquireTimeout: acquireTimeout, metrics: metrics, hub: hub,
                logger: logger, refresh: .seconds(configuration.citusNodeRefreshSeconds)) : nil
        let routing = workers.map {
            CitusRouting(placements: ScopePlacements(database: database, logger: self.logger), workers: $0)
        }
        if let routing { live.routeReads(routing) }
        let readiness = Readiness(database: database)
        let codec = WireCodec(limits: configuration.limits)
        let tokens = await TokenVerifier(configuration: configuration, logger: logger)
        var api = SyncAPI(
            tokens: tokens,
            limiter: RequestLimiter(limit: configuration.maxConcurrentRequestsPerToken),
            push: PushService(
                database: database, rules: rules, limits: configuration.limits,
                isCommutative: Self.commutativity(domain: domain, prefixes: configuration.commutativeTypePrefixes),
                hub: hub, metrics: metrics, groupLanes: configuration.pushGroupLanes,
                groupMaxEvents: configuration.pushGroupEvents,
                citus: routing,
                blobReferences: { [domain] event in domain.blobReferences(in: event) }),
            pull: PullService(
                database: database, limits: configuration.limits, hub: hub,
                evictionHorizonSeconds: configuration.evictionHorizonSeconds,
                stablePoints: StablePointCache(
                    maxAge: .milliseconds(configuration.stablePointRefreshMilliseconds)), metrics: metrics,
                citus: routing),
            codec: codec, gzipLevel: configuration.gzipLevel, metrics: metrics, registry: registry,
            readiness: readiness)
        api.live = live
        let blobs = BlobService(
            database: database, store: try blobStore ?? Self.blobStore(configuration.blobs.store, database, logger),
            configuration: configuration.blobs, metrics: metrics)
        api.blobs = blobs
        if let token = configuration.adminToken {
            api.admin = AdminService(
                database: database, metrics: metrics, configuration: configuration, domainName: domain.name)
            api.adminCredential = AdminCredential(token: token)
        }
        api.readAhead = ReadAhead(maxEvents: configuration.readAheadEvents, maxAge: configuration.readAheadMaxAge)

        let router = Router(context: SyncRequestContext.self)
        router.add(middleware: AccessLogMiddleware())
        router.add(middleware: ErrorMiddleware(metrics: metrics))
        api.register(on: router)

        var services: [any Service] = [client, hub, live] + loopServices
        if let workers { services.append(workers) }
        if let refresh = tokens.providerRefreshService { services.append(refresh) }
        if configuration.blobs.sweepIntervalSeconds > 0 {
            services.append(
                BlobSweepService(
                    blobs: blobs, intervalSeconds: configuration.blobs.sweepIntervalSeconds, logger: logger))
        }
        if let folder = domain.folder, configuration.compaction.intervalSeconds > 0 {
            services.append(
                CompactionService(
                    compactor: Compactor(
                        database: database, folder: folder, batchEvents: configuration.compaction.batchEvents,
                        evictionHorizonSeconds: configuration.evictionHorizonSeconds,
                        pauseMilliseconds: configuration.compaction.pauseMilliseconds,
                        references: { domain.blobReferences(in: $0) }, logger: logger),
                    reclaimer: IndexReclaimer(database: database, logger: logger),
                    policy: configuration.compaction, metrics: metrics, logger: logger))
        }

        let migrator = Migrator(
            migrations: Migration.generic + rules.flatMap(\.migrations), distributeOnCitus: configuration.citus)
        logger.info("domain plugged in", metadata: ["sync.domain": "\(domain.name)", "sync.rules": "\(rules.count)"])
        let logger = self.logger
        let startupTimeout = configuration.startupTimeoutSeconds
        let onListening = self.onListening
        let liveAPI = api
        var app = Application(
            router: router,
            // `GET /v1/live` is served below the router, on each connection's event loop.
            // So is `POST /v1/push` unless turned off (`ServerConfiguration.pushesBelowRouter`).
            server: HTTPServerBuilder {
                [requestsOnTheirLoops = configuration.requestsOnTheirLoops, pushes = configuration.pushesBelowRouter]
                responder in
                let channel = HTTP1Channel(
                    responder: responder,
                    configuration: .init(
                        additionalChannelHandlers: [LiveChannelHandler(api: liveAPI, live: live, logger: logger)]
                            + (pushes ? [PushChannelHandler(api: liveAPI, logger: logger)] : [])))
                guard requestsOnTheirLoops else { return channel }
                return LoopBoundHTTP1Channel(inner: channel, executors: executors)
            },
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port), serverName: nil,
                backlog: configuration.listenBacklog,
                availableConnectionsDelegate: MaximumAvailableConnections(
                    configuration.maxConnections ?? FileLimit.connectionsDefault, logger: logger)),
            services: services,
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                logger.info("sync-server listening", metadata: ["sync.port": "\(port)"])
                await onListening(port)
            },
            logger: logger)
        app.beforeServerStarts {
            try await tokens.loadProviderKeys(timeoutSeconds: startupTimeout, logger: logger)
            try await Self.migrate(migrator, client: client, timeoutSeconds: startupTimeout, logger: logger)
            readiness.markMigrated()
        }
        return app
    }

    /// The blob store `store` names.
    /// - Throws: `ConfigurationError` for a directory that cannot be created.
    static func blobStore(_ store: BlobConfiguration.Store, _ database: Database, _ logger: Logger) throws
        -> any BlobStore
    {
        switch store {
        case .postgres:
            return PostgresBlobStore(database: database, logger: logger)
        case .directory(let path):
            do {
                return try DirectoryBlobStore(directory: path)
            } catch {
                throw ConfigurationError(message: "the blob directory \(path) cannot be created: \(error)")
            }
        }
    }

    /// Whether a type is commutative: the domain says so, or the configuration names its prefix.
    static func commutativity(domain: any SyncDomain, prefixes: [String]) -> @Sendable (String) -> Bool {
        { type in domain.isCommutative(type: type) || prefixes.contains { type.hasPrefix($0) } }
    }

    /// Whether start-up should try again after `error`: not for a database that is there but not what the
    /// configuration says (`SYNC_CITUS=true` without Citus), which waiting will not change.
    static func isWorthRetrying(_ error: any Error) -> Bool {
        !(error is ConfigurationError)
    }

    /// Applies migrations, retrying while the database is not reachable yet (e.g. starting in parallel
    /// with it under docker-compose) for up to `timeoutSeconds`.
    static func migrate(_ migrator: Migrator, client: PostgresClient, timeoutSeconds: Int, logger: Logger) async throws
    {
        let deadline = ContinuousClock.now + .seconds(timeoutSeconds)
        var attempt = 0
        while true {
            attempt += 1
            do {
                let applied = try await migrator.migrate(client, logger: logger)
                logger.info("database ready", metadata: ["sync.migrations.applied": "\(applied.count)"])
                return
            } catch {
                guard ContinuousClock.now < deadline, Self.isWorthRetrying(error) else { throw error }
                logger.warning(
                    "database not ready; retrying",
                    metadata: ["sync.startup.attempt": "\(attempt)", "error.type": "\(type(of: error))"])
                try await Task.sleep(for: .seconds(1))
            }
        }
    }
}

extension SyncServerApp {
    /// When `SYNC_TASKS_ON_EVENT_LOOPS` is `true`, makes NIO's event loops (`MultiThreadedEventLoopGroup.singleton`,
    /// which the HTTP server and the PostgreSQL pools use) Swift Concurrency's global executor: a request's
    /// tasks then run on the loops that carry its I/O instead of hopping to the concurrency pool's threads and
    /// back for every read, statement and answer. Off by default, measured both ways (Benchmarks/HISTORY.md,
    /// "The server's threads"): one push at a time costs the server about a fifth less CPU, but a push woken
    /// to thousands of waiters answers them later (their answers are written from the same loops that run
    /// the work), and at 32 pushes in flight it saves nothing. Call it first thing in an executable's `main`,
    /// from the main thread, once; nothing in the server blocks a thread on a future (`wait()`), which an
    /// event loop must never do.
    /// - Returns: whether the loops now run the process's tasks.
    @discardableResult
    public static func runTasksOnEventLoops(environment: [String: String] = ProcessInfo.processInfo.environment)
        -> Bool
    {
        guard environment["SYNC_TASKS_ON_EVENT_LOOPS"]?.lowercased() == "true" else { return false }
        let installed = NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        tasksOnEventLoops.withLock { $0 = installed }
        return installed
    }

    /// Whether `runTasksOnEventLoops` made the loops run the process's tasks (`serve` logs it).
    public static var runsTasksOnEventLoops: Bool { tasksOnEventLoops.withLock { $0 } }
    private static let tasksOnEventLoops = Mutex(false)
}
