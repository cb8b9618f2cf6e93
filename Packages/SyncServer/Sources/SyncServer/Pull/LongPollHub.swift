import Logging
import Metrics
import PostgresNIO
import ServiceLifecycle
import SyncModels
import Synchronization

/// Wakes long-polling pulls when events commit in their scopes.
///
/// Signals come from PostgreSQL `LISTEN sync_events` (every server's commits, including other replicas of
/// the server) and directly from this process's own pushes. A notification is only a hint: a woken pull
/// re-reads the database, and a pull that is never woken still answers at its deadline, so correctness
/// never depends on notifications arriving. As a `Service` it keeps the LISTEN connection open
/// (reconnecting with backoff) and on graceful shutdown wakes every waiter so shutdown is not held up.
final class LongPollHub: Service, Sendable {
    private let state = Mutex(LongPollState<CheckedContinuation<Void, Never>>())
    /// Signals so far per scope, counted before any waiter is resumed, and the heads reads found since: a
    /// read that starts at epoch *e* sees every commit signalled up to *e* (signals follow commits), which is
    /// what lets identical reads share one (`ReadCollapser`) and a poll at a known head wait without reading.
    private let clock = Mutex(ScopeClock())
    /// Whether each LISTEN connection is up, by source (the database, and on Citus each node a push may run
    /// on, `CitusWorkers`): without one, commits of other servers may go unsignalled, so no head is trusted
    /// (`knownHeads`). Keyed by each `listen` call: a Citus node that moves back to an address it left has a
    /// retiring LISTEN and a new one of the same source for a while.
    private let listening = Mutex<(next: Int, up: [Int: Bool])>((0, [:]))
    /// How long a head found by a read is trusted while no signal comes (a bound against a LISTEN
    /// connection that died without telling; notifications themselves are not lost while it lives).
    let headMaxAge: Duration

    /// Whether every commit, this server's and others', is signalled (every LISTEN connection is up).
    var isListening: Bool { listening.withLock { !$0.up.isEmpty && !$0.up.values.contains(false) } }

    /// The epoch of `scopes` now (see `ScopeEpoch`).
    func epoch(_ scopes: [Scope]) -> ScopeEpoch { clock.withLock { $0.epoch(scopes) } }

    /// A read that began at `epoch` found these heads of `scopes`.
    func learn(_ heads: [Scope: Int64], of scopes: [Scope], at epoch: ScopeEpoch) {
        let now = ContinuousClock.now
        clock.withLock { $0.learn(heads, of: scopes, at: epoch, now: now) }
    }

    /// The heads of `scopes` when all are known (no commit signalled since a read found them, the LISTEN
    /// connection up); nil otherwise. Look after `register`: a commit signalled afterwards then wakes the
    /// waiter.
    func knownHeads(_ scopes: [Scope]) -> [Scope: Int64]? {
        guard isListening else { return nil }
        let now = ContinuousClock.now
        return clock.withLock { $0.knownHeads(scopes, maxAge: headMaxAge, now: now) }
    }
    private let client: PostgresClient
    private let logger: Logger
    private let activeGauge: LevelGauge
    private let parkedGauge: LevelGauge
    private let listeningGauge: Gauge
    private let listenStarts: Counter
    private let active = Mutex(0)
    /// The live stream's hub, told of every commit this hub is signalled.
    let live: LiveHub?
    /// Whether notifications are read on the event loop of their LISTEN connection
    /// (`ServerConfiguration.requestsOnTheirLoops`) instead of waking a thread of the concurrency pool for each.
    private let listensOnItsLoop: Bool

    init(
        client: PostgresClient, logger: Logger, metrics: ServerMetrics, headMaxAge: Duration = .seconds(600),
        live: LiveHub? = nil, listensOnItsLoop: Bool = false
    ) {
        self.live = live
        self.listensOnItsLoop = listensOnItsLoop
        self.client = client
        self.headMaxAge = headMaxAge
        self.logger = logger
        self.activeGauge = metrics.longPolls
        self.parkedGauge = metrics.parkedLongPolls
        self.listeningGauge = metrics.listening
        self.listenStarts = metrics.listenStarts
    }

    /// Registers interest in `scopes`; nil when shutting down.
    func register(_ scopes: Set<Scope>) -> Int? {
        let id = state.withLock { $0.register(scopes) }
        if id != nil {
            activeGauge.record(
                active.withLock {
                    $0 += 1; return $0
                })
        }
        return id
    }

    func unregister(_ id: Int) {
        withState { $0.unregister(id) }?.resume()
        activeGauge.record(
            active.withLock {
                $0 -= 1; return $0
            })
    }

    /// Waits until a signal for the waiter's scopes, `deadline`, cancellation or shutdown, whichever is
    /// first. Returns at once if a signal arrived since the last wait.
    ///
    /// The request handler runs inside the HTTP server's service, so when that service starts its graceful
    /// shutdown the hub closes at once: long-polls answer immediately instead of holding the shutdown up for
    /// their remaining wait.
    func wait(_ id: Int, until deadline: ContinuousClock.Instant) async {
        await withGracefulShutdownHandler {
            await self.waitForSignal(id, until: deadline)
        } onGracefulShutdown: {
            self.close()
        }
    }

    /// Whether the hub is closed (shutting down): long-polls answer with what they have.
    var isClosed: Bool {
        state.withLock { $0.closed }
    }

    private func waitForSignal(_ id: Int, until deadline: ContinuousClock.Instant) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        if case .resumeNow = self.withState({ $0.wait(id, continuation) }) {
                            continuation.resume()
                        }
                    }
                } onCancel: {
                    self.withState { $0.stopWaiting(id) }?.resume()
                }
            }
            group.addTask {
                try? await Task.sleep(until: deadline, clock: .continuous)
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// A notification's scope and head: `scope head`, or `scope` alone (servers before heads were sent).
    static func notification(_ payload: String) -> (Scope, Int64?)? {
        let parts = payload.split(separator: " ", maxSplits: 1)
        guard let first = parts.first, let scope = try? Scope(String(first)) else { return nil }
        return (scope, parts.count > 1 ? Int64(parts[1]) : nil)
    }

    /// Events committed by this process: their scopes and new heads. A head its notification signalled
    /// already is not signalled again: on a loaded machine the notification may come back through LISTEN
    /// before the committing push runs this, and the waiters it woke then may not all have begun reading; a
    /// second signal would give those a later epoch, and their reads could not share the first (a thousand
    /// woken waiters read twice).
    func signal(heads: [Scope: Int64]) {
        let fresh = clock.withLock { clock in heads.keys.filter { clock.noteSignalled($0, head: heads[$0]!) } }
        live?.committed(heads: heads)
        if !fresh.isEmpty { signal(fresh) }
    }

    /// A commit's notification: ignored when this process already signalled that head or a later one (its
    /// own commits come back through LISTEN too; by then their waiters are woken, and a second signal
    /// would only make their reads unsharable with the first).
    func signal(_ scope: Scope, head: Int64?) {
        if let head, !clock.withLock({ $0.noteSignalled(scope, head: head) }) { return }
        live?.committed(scope, head: head)
        signal([scope])
    }

    /// Events committed in `scopes`.
    func signal(_ scopes: [Scope]) {
        let scopes = Set(scopes)
        clock.withLock { $0.signal(scopes) }
        for continuation in withState({ $0.signal(scopes) }) { continuation.resume() }
    }

    func signalAll() {
        live?.committedAnywhere()
        clock.withLock { $0.signalAll() }
        for continuation in withState({ $0.signalAll() }) { continuation.resume() }
    }

    /// Wakes every waiter and refuses new ones.
    func close() {
        for continuation in withState({ $0.close() }) { continuation.resume() }
    }

    /// A change of the waiters' state, keeping the gauge of parked waiters.
    private func withState<Result: Sendable>(
        _ body: (inout LongPollState<CheckedContinuation<Void, Never>>) -> Result
    ) -> Result {
        state.withLock { state in
            let result = body(&state)
            parkedGauge.record(state.parked)
            return result
        }
    }

    func run() async throws {
        await withGracefulShutdownHandler {
            await cancelWhenGracefulShutdown {
                await self.listen(via: self.client, source: "database")
            }
        } onGracefulShutdown: {
            self.close()
        }
        close()
    }

    /// Marks LISTEN `key` up or down, or forgets it (nil: it stopped listening for good).
    private func setListening(_ key: Int, _ up: Bool?) {
        // Recorded under the lock: two LISTENs changing at once do not leave the gauge at the first one's view.
        listening.withLock { listening in
            listening.up[key] = up
            listeningGauge.record(!listening.up.isEmpty && !listening.up.values.contains(false) ? 1 : 0)
        }
    }

    /// Keeps a LISTEN open through `client`, turning notifications into signals; reconnects with capped
    /// backoff. Until its first LISTEN is up, it counts as down; once cancelled it no longer counts (a Citus
    /// node's pool retired when the node moved or left). `source` names it in logs.
    func listen(via client: PostgresClient, source: String) async {
        let key = listening.withLock { listening in
            listening.next += 1
            return listening.next
        }
        setListening(key, false)
        defer { setListening(key, nil) }
        var failures = 0
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    let loop = self.listensOnItsLoop ? LoopExecutors.singleton.executor(for: connection.eventLoop) : nil
                    try await withTaskExecutorPreference(loop) {
                        try await connection.listen(on: EventRepository.channel) { notifications in
                            failures = 0
                            // Anything committed while not listening was missed: let every waiter re-read.
                            self.signalAll()
                            self.listenStarts.increment()
                            self.setListening(key, true)
                            defer { self.setListening(key, false) }
                            for try await notification in notifications {
                                guard let (scope, head) = Self.notification(notification.payload) else { continue }
                                self.signal(scope, head: head)
                            }
                        }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                failures += 1
                logger.warning(
                    "long-poll listener lost its connection; retrying",
                    metadata: [
                        "sync.listen.source": "\(source)", "sync.listen.failures": "\(failures)",
                        "error.type": "\(type(of: error))",
                    ])
            }
            let delay = min(5_000, 100 * (1 << min(failures, 6)))
            try? await Task.sleep(for: .milliseconds(delay))
        }
    }
}
