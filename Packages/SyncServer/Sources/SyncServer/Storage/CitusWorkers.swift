import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// The nodes of a Citus cluster, each reached directly, so that a push runs its whole transaction on the node
/// that holds its scopes (docs/SCALING.md, "A push on its worker").
///
/// Citus keeps its metadata on every node, so a worker runs statements on distributed tables as the
/// coordinator does, and executes those on its own shards locally. A push's transaction sent to the worker of
/// its scopes (`ScopePlacements`) therefore makes one round trip per statement to one node, and commits there in
/// one phase, however many of that worker's shards it writes; through the coordinator, each statement's parts
/// went on to the worker, and a group that wrote two shards committed in two phases.
///
/// As a `Service`, it reads the nodes (`pg_dist_node`: active primaries holding shards) from the coordinator at
/// start-up and every `refresh`, keeps a pool for each (the coordinator's size and limits, the coordinator's
/// user and database) and a `LISTEN` on each through the long-poll hub, since a push's `NOTIFY` is sent by the
/// node it ran on. Until a node is known (or when it is the coordinator's own group, 0), its pushes use the
/// coordinator's pool.
///
/// A node that moves (its group at another address: a failover, `citus_update_node`) gets a new pool and
/// `LISTEN` at its new address, and one that leaves the cluster none; the old pool and its `LISTEN` are
/// retired: new pushes stop taking them at once, and they close once the requests that took them before have
/// had `acquireTimeout` to finish. A `LISTEN` left on an address that no longer answers would count as down
/// for ever, and the hub trusts no head while one is down: every long-poll would read the database.
final class CitusWorkers: Service, Sendable {
    private struct Node: Sendable {
        var host: String
        var port: Int
        var database: Database
        /// Finished when the node is retired.
        var retire: AsyncStream<Void>.Continuation
    }

    /// A node's new pool, to run with its `LISTEN` until `retired` ends.
    private struct Opened: Sendable {
        var client: PostgresClient
        var source: String
        var retired: AsyncStream<Void>
    }

    let coordinator: Database
    let url: DatabaseURL
    let poolSize: Int
    let poolOptions: Database.PoolOptions
    let acquireTimeout: Duration
    let metrics: ServerMetrics
    let hub: LongPollHub
    let logger: Logger
    let refresh: Duration
    private let nodes = Mutex<[Int32: Node]>([:])

    init(
        coordinator: Database, url: DatabaseURL, poolSize: Int, poolOptions: Database.PoolOptions = .init(),
        acquireTimeout: Duration, metrics: ServerMetrics, hub: LongPollHub, logger: Logger,
        refresh: Duration = .seconds(30)
    ) {
        self.coordinator = coordinator
        self.url = url
        self.poolSize = poolSize
        self.poolOptions = poolOptions
        self.acquireTimeout = acquireTimeout
        self.metrics = metrics
        self.hub = hub
        self.logger = logger
        self.refresh = refresh
    }

    /// The pool of node group `group`, or nil while it is not known.
    func database(group: Int32) -> Database? {
        group == 0 ? coordinator : nodes.withLock { $0[group]?.database }
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { tasks in
                while !Task.isCancelled {
                    var wait = self.refresh
                    do {
                        for node in self.update(try await self.readNodes()) {
                            tasks.addTask { await self.serve(node) }
                        }
                    } catch {
                        // At start-up the coordinator may not be ready yet: ask again soon.
                        wait = .seconds(1)
                        self.logger.warning(
                            "Citus nodes not read; pushes go through the coordinator meanwhile",
                            metadata: ["error.type": "\(type(of: error))"])
                    }
                    try? await Task.sleep(for: wait)
                }
                tasks.cancelAll()
            }
        }
    }

    /// The active primary nodes other than the coordinator: group id, host and port.
    private func readNodes() async throws -> [(Int32, String, Int)] {
        try await coordinator.withConnection { [logger] connection in
            let rows = try await connection.checkedQuery(
                """
                SELECT groupid, nodename, nodeport FROM pg_dist_node
                WHERE noderole = 'primary' AND isactive AND groupid <> 0
                ORDER BY groupid
                """, logger: logger)
            var nodes: [(Int32, String, Int)] = []
            for try await (group, host, port) in rows.decode((Int32, String, Int32).self) {
                nodes.append((group, host, Int(port)))
            }
            return nodes
        }
    }

    /// Runs a node's pool and its `LISTEN` until the node is retired and the requests that took the pool before
    /// have had `acquireTimeout`, or until shutdown.
    private func serve(_ node: Opened) async {
        await withDiscardingTaskGroup { group in
            group.addTask { await node.client.run() }
            group.addTask { await self.hub.listen(via: node.client, source: node.source) }
            for await _ in node.retired {}
            if !Task.isCancelled {
                try? await Task.sleep(for: acquireTimeout)
                logger.info("Citus node's old pool closed", metadata: ["sync.citus.node": "\(node.source)"])
            }
            group.cancelAll()
        }
    }

    /// Takes the cluster's nodes as `pg_dist_node` lists them: opens a pool for each group that has none at its
    /// address (with one connection more than the coordinator's, for its `LISTEN`), and retires the pools of
    /// groups that moved or left. Returns the pools opened, each with the source its `LISTEN` is known by (the
    /// node group and address).
    private func update(_ listed: [(Int32, String, Int)]) -> [Opened] {
        nodes.withLock { nodes -> [Opened] in
            var opened: [Opened] = []
            let groups = Set(listed.map(\.0))
            for (group, node) in nodes where !groups.contains(group) {
                nodes[group] = nil
                node.retire.finish()
                logger.info(
                    "Citus node left the cluster; its pushes go through the coordinator",
                    metadata: ["sync.citus.node": "group \(group) \(node.host):\(node.port)"])
            }
            for (group, host, port) in listed {
                if let known = nodes[group] {
                    if known.host == host && known.port == port { continue }
                    known.retire.finish()
                    logger.info(
                        "Citus node moved",
                        metadata: ["sync.citus.node": "group \(group) \(known.host):\(known.port) -> \(host):\(port)"])
                }
                var nodeURL = url
                nodeURL.host = host
                nodeURL.port = port
                let client = PostgresClient(
                    configuration: Database.clientConfiguration(nodeURL, poolSize: poolSize + 1, options: poolOptions),
                    backgroundLogger: logger)
                let name = "group \(group)"
                let (retired, retire) = AsyncStream<Void>.makeStream()
                nodes[group] = Node(
                    host: host, port: port,
                    database: Database(
                        client: client, queueLimit: coordinator.queueLimit, acquireTimeout: acquireTimeout,
                        metrics: metrics, node: name),
                    retire: retire)
                logger.info("Citus node reached directly", metadata: ["sync.citus.node": "\(name) \(host):\(port)"])
                opened.append(Opened(client: client, source: "\(name) \(host):\(port)", retired: retired))
            }
            return opened
        }
    }
}
