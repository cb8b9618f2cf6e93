import Logging
import PostgresNIO
import Synchronization

/// The PostgreSQL pool of one event loop (`ServerConfiguration.requestsOnTheirLoops`), which keeps its connections
/// open and alive without a timer per lease.
///
/// PostgresNIO's pool sets timers whenever a connection goes back to it idle: the keep-alive ping and, above the
/// pool's minimum, the idle timeout; the next lease cancels them. Each timer is a child task sleeping on a
/// Dispatch timer, which Dispatch's manager thread wakes for: about 60 µs of CPU per lease, a third of what a
/// bare Hummingbird and PostgresNIO server spends on a request one at a time (`sync-bench bare-server`). So a
/// loop's pool has all of its connections as its minimum, opened at start and kept, with PostgresNIO's
/// keep-alive off; `run` pings instead each connection that no lease has used for `keepAlive`, from one sleep per
/// interval.
package final class LoopPool: Sendable {
    package let client: PostgresClient
    /// Connections: the pool's minimum and maximum both.
    let size: Int
    /// How long a connection may stay unused before it is pinged (nil: never pinged).
    let keepAlive: Duration?
    private let uses = Mutex<[ObjectIdentifier: Use]>([:])

    /// What the pool knows of a connection it has leased.
    private struct Use {
        let connection: PostgresConnection
        var lastUsed: ContinuousClock.Instant
        var leased: Bool
    }

    /// A pool of `size` connections to `configuration`'s database served by `loop`; `configuration`'s pool
    /// options are replaced.
    package init(
        configuration: PostgresClient.Configuration, size: Int, keepAlive: Duration?, loop: any EventLoop,
        logger: Logger
    ) {
        var configuration = configuration
        configuration.options.maximumConnections = size
        configuration.options.minimumConnections = size
        configuration.options.keepAliveBehavior = nil
        self.client = PostgresClient(configuration: configuration, eventLoopGroup: loop, backgroundLogger: logger)
        self.size = size
        self.keepAlive = keepAlive
    }

    /// Records that a lease took `connection`.
    package func leased(_ connection: PostgresConnection) {
        uses.withLock { uses in
            uses[ObjectIdentifier(connection), default: Use(connection: connection, lastUsed: .now, leased: true)]
                .leased = true
        }
    }

    /// Records that a lease gave `connection` back.
    package func released(_ connection: PostgresConnection) {
        let now = ContinuousClock.now
        uses.withLock { uses in
            uses[ObjectIdentifier(connection)] = Use(connection: connection, lastUsed: now, leased: false)
        }
    }

    /// Runs the pool until the task is cancelled or the pool shuts down: learns its connections at start (by
    /// leasing all of them at once, for up to `warmUp`), then pings, every `keepAlive`, those not used since.
    package func run(logger: Logger, warmUp: Duration = .seconds(10)) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await self.learnConnections(within: warmUp)
                await self.keepConnectionsAlive(logger: logger)
            }
            await client.run()
            group.cancelAll()
        }
    }

    /// Whether no lease holds `connection`.
    private func isIdle(_ connection: PostgresConnection) -> Bool {
        uses.withLock { uses in uses[ObjectIdentifier(connection)]?.leased == false }
    }

    /// Connections the pool knows of and has not seen closed.
    var known: Int {
        uses.withLock { uses in uses.values.count { !$0.connection.isClosed } }
    }

    /// Pings the connections not used for `keepAlive` with `SELECT 1` (a failed ping closes its connection, and
    /// the pool opens another), and forgets the closed ones.
    func pingIdle(logger: Logger) async {
        guard let keepAlive else { return }
        let now = ContinuousClock.now
        let idle = uses.withLock { uses in
            uses = uses.filter { !$0.value.connection.isClosed }
            return uses.values.filter { !$0.leased && now - $0.lastUsed >= keepAlive }.map(\.connection)
        }
        await withTaskGroup(of: Void.self) { group in
            for connection in idle {
                group.addTask {
                    // Looked at again when the ping is sent: a lease may have taken the connection since the list
                    // was made (on a loaded machine, between the two), and a lease's statements are its own. On
                    // the loop, nothing runs between this look and the query's write.
                    guard self.isIdle(connection) else { return }
                    do {
                        _ = try await connection.query("SELECT 1", logger: logger).collect()
                    } catch {
                        logger.debug(
                            "a keep-alive ping failed", metadata: ["error": "\(String(reflecting: error))"])
                    }
                }
            }
        }
    }

    private func keepConnectionsAlive(logger: Logger) async {
        guard let keepAlive else { return }
        while true {
            do { try await Task.sleep(for: keepAlive) } catch { return }
            await pingIdle(logger: logger)
        }
    }

    /// Leases all `size` connections at once, so that each is known from the start even if no request ever
    /// needs it (a connection not yet known is pinged only after its first lease). Gives up after `limit`
    /// (PostgreSQL not reachable yet): the others are learned at their first lease.
    private func learnConnections(within limit: Duration) async {
        let everyone = Rendezvous(count: size)
        await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<size {
                group.addTask {
                    try? await self.client.withConnection { connection in
                        self.released(connection)
                        await everyone.arrive()
                    }
                    return true
                }
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            var leased = 0
            for await lease in group {
                if lease {
                    leased += 1
                    if leased < size { continue }
                }
                // All arrived and left, or out of time: the leases still waiting are cancelled, the timer too.
                everyone.open()
                group.cancelAll()
            }
        }
    }
}

/// Holds those who arrive until `count` have, or until it is opened.
private final class Rendezvous: Sendable {
    private struct State {
        var arrived = 0
        var open = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let count: Int
    private let state = Mutex(State())

    init(count: Int) {
        self.count = count
    }

    func arrive() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let released = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.arrived += 1
                state.waiting.append(continuation)
                guard state.open || state.arrived >= count else { return [] }
                state.open = true
                defer { state.waiting = [] }
                return state.waiting
            }
            for waiting in released { waiting.resume() }
        }
    }

    func open() {
        let released = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for waiting in released { waiting.resume() }
    }
}
