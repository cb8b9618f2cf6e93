import Foundation
import SyncEventStore
import SyncModels
import SyncProtocol
import Synchronization

/// The background sync client (docs/ARCHITECTURE.md, "From a local edit to every replica"): pushes the outbox in
/// batches and pulls pages into the local event store through `/v1/sync`, each answer (acknowledgements, rejections
/// with their rollback, the page and its cursor) applied in one transaction, until nothing is left. It never loses a
/// write: events leave the outbox only when the server acknowledges them, a retried push is deduplicated by event id,
/// rejected events are rolled back and surfaced, and authentication failures pause sync without touching local data.
///
/// `syncNow()` runs one cycle; `run()` keeps syncing on local writes (pushed at once, coalesced while a push is in
/// flight), an interval, connectivity changes and explicit requests, with backoff between failures
/// (`SyncScheduler`), and holds the live stream in the foreground (`SyncEngine+Live.swift`).
public final class SyncEngine: Sendable {
    public let store: EventStore
    public let transport: any SyncTransport
    public let configuration: Configuration
    public let journal: SyncJournal
    let state: Mutex<EngineStatus>
    /// The transaction sizes the store has learned to fit `applyBudget` (`ApplyBudget`), kept from sync to
    /// sync.
    private let learned: Mutex<ApplyBudget>
    /// The stable points of the last prune: a sync prunes by itself only when they have moved since.
    private let prunedAt = Mutex<[String: Int64]>([:])
    /// What the long-poll leaves for the run loop (`applyPolledPages`): pages with other replicas' events,
    /// oldest first, or the need for a cycle (a page with more after it, a reset).
    let polled = Mutex(PollResults())
    struct PollResults {
        var pages: [PolledPage] = []
        var needsCycle = false
    }
    let inbox = TriggerInbox()
    /// The live stream's and the long-poll's tasks, and what the stream leaves for the run loop.
    let links = Mutex(LiveLinks())
    let statusBroadcast = Mutex<[UUID: AsyncStream<EngineStatus>.Continuation]>([:])
    /// The streams in conflict as of the last applied answer, or when the engine opened (nil if that read
    /// failed): only changes from there are journaled.
    let conflicts: Mutex<Set<String>?>
    /// Conflicts and verifications as metrics (`EngineMetrics`).
    let metrics: EngineMetrics
    /// The blob queue, when the app has attachments: `syncNow()` uploads what pending events wait for before
    /// it pushes them, and `run()` uploads in a task of its own, so that a large file does not hold up the
    /// cycles.
    public let blobs: BlobSync?
    /// Whether `run()` is running (its own task then uploads blobs, not `syncNow()`).
    let running = Mutex(false)

    public init(
        store: EventStore, transport: any SyncTransport, configuration: Configuration = Configuration(),
        blobs: BlobSync? = nil
    ) throws {
        self.store = store
        self.blobs = blobs
        self.transport = transport
        self.configuration = configuration
        self.journal = try SyncJournal(database: store.database, bounds: configuration.journal)
        let conflicts = try? store.database.writer.read { db in try store.streamsInConflict(in: db) }
        self.conflicts = Mutex(conflicts)
        var status = EngineStatus()
        status.openConflicts = conflicts?.count ?? 0
        self.state = Mutex(status)
        self.metrics = EngineMetrics(factory: configuration.metricsFactory)
        metrics.openConflicts.record(status.openConflicts)
        self.learned = Mutex(Self.budget(configuration))
        if let blobs {
            // At once, in the caller's thread: the status shows the queue's progress when its call returns. The
            // queue's progress as it is then, not as it was told: two calls may be told out of order.
            blobs.observe { [weak self, weak blobs] _ in
                guard let self, let blobs else { return }
                self.updateStatusNow { $0.blobs = blobs.progress }
            }
            // A blob request refused for its token gets a new one from the provider, as a cycle's would.
            blobs.renewTokens { [weak self] in
                await self?.refreshToken(after: .authentication(code: "auth.expired", message: "a blob request"))
                    ?? false
            }
        }
    }

    /// The current status.
    public var status: EngineStatus { state.withLock { $0 } }

    // MARK: - Triggers

    /// Ask for a sync now (skips any backoff wait).
    public func requestSync() { post(.explicit) }
    /// The network came back.
    public func connectivityChanged() { post(.connectivity) }
    /// A new token is in the transport: resume after an authentication pause.
    public func tokenRefreshed() { post(.tokenRefreshed) }

    func post(_ trigger: SyncTrigger) {
        let inbox = inbox
        Task { await inbox.post(trigger) }
    }

    // MARK: - One cycle

    /// Pushes and pulls until the outbox is empty and the server has nothing more, then returns. Told to
    /// reset (410 `reset.required`), it resets the store and goes on at once with the bootstrap: the pull
    /// from the start, then the re-base of pending events (`Configuration.rebaser`), then their push.
    /// - Throws: the `SyncFailure` that ended the cycle; what was committed before it stays committed.
    public func syncNow() async throws(SyncFailure) {
        journal.hold("start")
        // The events that wait for a blob go out in this cycle once it is uploaded. A blob that fails waits
        // for the next cycle; the events before it go out now.
        if let blobs, !running.withLock({ $0 }) {
            let report = await blobs.uploadPending()
            if report.committed > 0 || report.lastFailure != nil {
                await journal.record(
                    "blob.upload",
                    "\(report.committed) blobs committed, \(report.chunks) chunks (\(report.bytes) bytes) sent, \(report.waiting) waiting"
                        + (report.lastFailure.map { ": \($0)" } ?? ""))
            }
        }
        var budget = learned.withLock { $0 }
        defer { learned.withLock { [budget] in $0 = budget } }
        var resets = 0
        var refreshed = false
        while true {
            do {
                try await syncToHead(budget: &budget)
                break
            } catch {
                // What the cycle buffered before it failed still reaches the tables.
                try? await store.flushWriteBehind(budget: &budget)
                // An expired token, with a provider: a new one, and the cycle again (once).
                if case .authentication = error, !refreshed, await refreshToken(after: error) {
                    refreshed = true
                    continue
                }
                let error = tokenFailureToRetry(error)
                await recordFailure(error)
                if case .resetRequired = error, resets == 0 {
                    resets += 1
                    continue
                }
                throw error
            }
        }
        // The pull reached the head: everything at or below the points it folded at has arrived. A failed
        // purge leaves what it did not reach for the next sync.
        if let report = try? await store.purgeFoldedIfAny() {
            await journal.record(
                "fold.purge",
                "\(report.streams) streams folded on arrival purged, \(report.retired) retired, \(report.pagesFreed) pages freed"
            )
        }
        if let threshold = configuration.autoCompactAfter, status.stablePoints != prunedAt.withLock({ $0 }),
            let counts = try? await store.counts(), counts[.confirmed] ?? 0 >= threshold
        {
            // A failed prune leaves the store as it was (one transaction); the next sync tries again.
            _ = try? await compact()
        }
        // The last verification as this engine saw it, or as the journal kept it from an earlier process (the
        // schedule holds across restarts, and a command-line run does not verify each time).
        let lastVerified: Date?
        if let seen = status.lastVerified {
            lastVerified = seen
        } else {
            lastVerified = try? await journal.lastTime(of: "verify")
        }
        if let interval = configuration.verifyInterval,
            lastVerified.map({ Date().timeIntervalSince($0) >= Double(interval.components.seconds) }) ?? true
        {
            // A failed verification is journaled and tried again at the next interval; the sync succeeded.
            _ = try? await verify()
        }
        await updateStatus { status in
            status.lastSuccess = Date()
            status.lastError = nil
            status.pausedForAuthentication = false
            status.cycles += 1
            status.inFlight = 0
        }
    }

    /// Cycles up to the head; when that ends a reset's bootstrap, re-bases the pending events and cycles again
    /// to push them.
    private func syncToHead(budget: inout ApplyBudget) async throws(SyncFailure) {
        var end = try await cycle(budget: &budget)
        // Folded events held in memory were lost: the store went back to before them; pull them again.
        var rewinds = 0
        while end == .rewound, rewinds < 3 {
            rewinds += 1
            await journal.record("fold.rewind", "folded events held in memory were lost: pulling them again")
            end = try await cycle(budget: &budget)
        }
        guard end == .reachedHead, try await local({ try await self.store.isBootstrapping() }) else { return }
        try await flushWriteBehind(&budget)
        let report = try await local { try await self.store.rebase(with: self.configuration.rebaser) }
        await journal.record(
            "rebase",
            "pending events after the reset: \(report.kept) kept, \(report.superseded) superseded by \(report.reissued) re-issued"
        )
        _ = try await cycle(budget: &budget)
    }

    /// How a cycle ended.
    enum CycleEnd: Sendable, Hashable {
        /// The outbox is pushed and the server had nothing more.
        case reachedHead
        /// At its bound on rounds.
        case bounded
        /// An answer did not follow the stored cursor (see `EventStore.SyncResponseOutcome.rewound`).
        case rewound
    }

    /// Round trips until the outbox is empty and the server has nothing more, pipelined: as soon as an answer
    /// arrives, the next request (the outbox after this batch, the cursor of this answer) goes out, and this
    /// answer is applied while the server works on that one. Only the engine writes answers, one at a time
    /// and in order, and a cursor is stored only with the page it belongs to: a crash at any point leaves
    /// the store at the end of an applied answer, and the next cycle resumes from there (a request that was
    /// in flight is sent again; pushes are deduplicated by event id).
    ///
    /// While the store is bootstrapping after a reset, nothing is pushed: the pending events wait for the
    /// re-base that follows the pull.
    ///
    /// A long pull folds on arrival (see `Configuration.foldOnArrival`) from the first answer that says it is
    /// long to the end of the cycle.
    /// - Returns: whether it ended with the outbox pushed and nothing more to pull, at its bound on rounds,
    ///   or on an answer that did not follow the stored cursor.
    private func cycle(budget: inout ApplyBudget) async throws(SyncFailure) -> CycleEnd {
        var sizing = PageSizing(configuration)
        var limit = sizing.size.value
        // Events per transaction, when the server marks its pages: from the page size at each cycle's start.
        budget.events = sizing.size
        let pushing = try await !local { try await self.store.isBootstrapping() }
        var plan = try await makePlan(after: 0, cursor: nil, fromStore: true, limit: limit, pushing: pushing)
        var fetch = send(plan)
        defer { fetch.cancel() }
        let firstBatch = plan.batch.count
        await updateStatus { $0.inFlight = firstBatch }
        var lastApply: Duration? = nil
        var folding = false
        for _ in 0..<configuration.maxRoundsPerCycle {
            // While the answer travels, read the batch that follows this one: it does not depend on the
            // answer (which confirms or rejects only events of this batch), so the next request goes out as
            // soon as the answer is in. Read before the answer is applied, the outbox's acknowledged position
            // can only be older than after it: the replica vouches for less, never for more.
            let upcoming = readOutbox(after: plan.lastPosition, pushing: pushing)
            defer { upcoming.cancel() }
            let waitStart = ContinuousClock.now
            let (exchange, roundTrip) = try await fetch.value.get()
            let waited = ContinuousClock.now - waitStart
            let response = exchange.response
            guard response.results.count == plan.batch.count else {
                throw .retryable(
                    reason: "the server answered \(response.results.count) results for \(plan.batch.count) events",
                    retryAfter: nil)
            }
            // A marked page is applied in transactions sized on their own: the page grows while full.
            let marked = plan.markEvery != nil && response.marks != nil
            sizing.next(
                full: response.hasMore && response.events.count >= plan.limit, marked: marked, lastApply: lastApply)
            limit = sizing.size.value
            let next = try await upcoming.value.get().plan(
                after: plan.lastPosition, cursor: response.cursor, limit: limit, excludeOwn: pushing,
                markEvery: Self.markSpacing(configuration.markEvery, limit: limit, cursor: response.cursor))
            let more = !next.batch.isEmpty || response.hasMore
            if more { fetch = send(next) }
            if !folding, configuration.foldOnArrival, let threshold = configuration.autoCompactAfter,
                (response.remaining ?? 0) + response.events.count >= threshold
            {
                folding = true
            }
            // More pages follow: projections may keep this one in memory (see `projectionLag`).
            let applyStart = ContinuousClock.now
            let applied = try await apply(
                response, pushed: plan.batch, markEvery: marked ? plan.markEvery : nil, budget: &budget,
                foldThrough: folding ? Self.points(response.othersStable) : [:], follows: plan.cursor ?? "",
                requestID: exchange.requestID)
            let outcome = applied.outcome
            if outcome.rewound {
                await updateStatus { $0.traffic += exchange.traffic }
                return .rewound
            }
            lastApply = applied.longest
            let flushed = applied.flushed
            await updateStatus {
                $0.traffic += exchange.traffic
                $0.inFlight = more ? next.batch.count : 0
                $0.remainingToPull = response.remaining
                $0.pulledEvents += response.events.count
                if let stable = response.stable { $0.stablePoints.merge(stable) { $1 } }
            }
            configuration.onRound?(
                SyncRound(
                    pushed: plan.batch.count, acknowledged: outcome.acknowledged, rejected: outcome.rolledBack.count,
                    pulled: response.events.count, inserted: outcome.pulled.inserted + outcome.pulled.folded,
                    folded: outcome.pulled.folded, pageLimit: plan.limit,
                    hasMore: response.hasMore, roundTrip: roundTrip, waited: waited,
                    apply: ContinuousClock.now - applyStart - flushed, traffic: exchange.traffic, flush: flushed,
                    remaining: response.remaining, events: response.events, transactions: applied.transactions,
                    longestTransaction: applied.longest))
            if !more { return .reachedHead }
            plan = next
        }
        // The cycle ends at its bound on rounds: nothing stays buffered past it.
        try await flushWriteBehind(&budget)
        return .bounded
    }

    /// Stable points by scope, from an answer's names (unknown names left out).
    static func points(_ named: [String: Int64]?) -> [Scope: Int64] {
        var points: [Scope: Int64] = [:]
        for (name, seq) in named ?? [:] {
            if let scope = try? Scope(name) { points[scope] = seq }
        }
        return points
    }

    /// Writes what projections hold in memory (`EventStore.flushWriteBehind(budget:)`).
    private func flushWriteBehind(_ budget: inout ApplyBudget) async throws(SyncFailure) {
        do {
            try await store.flushWriteBehind(budget: &budget)
        } catch {
            throw Self.storeFailure(error)
        }
    }

    /// The next request: pending events after `after` (cut by the push policy) and the cursor to pull from
    /// (the stored one when `fromStore`).
    private func makePlan(after: Int64, cursor: String?, fromStore: Bool, limit: Int, pushing: Bool = true)
        async throws(SyncFailure) -> Plan
    {
        let outbox = try await readOutboxNow(after: after, pushing: pushing)
        let cursor = fromStore ? outbox.storedCursor : cursor
        return outbox.plan(
            after: after, cursor: cursor, limit: limit, excludeOwn: pushing,
            markEvery: Self.markSpacing(configuration.markEvery, limit: limit, cursor: cursor))
    }

    /// Reads the pending events after `after`, cut by the push policy (none when not `pushing`).
    private func readOutboxNow(after: Int64, pushing: Bool) async throws(SyncFailure) -> OutboxRead {
        try await local { () async throws -> OutboxRead in
            // One read for all three.
            let snapshot = try await self.store.outboxSnapshot(
                after: after, limit: pushing ? self.configuration.batch.maxEvents : 0)
            let pending = snapshot.pending
            // Payload bytes plus the envelope's fixed fields (ids, clocks, dot: about 300 bytes): close enough
            // to bound a batch, without encoding every event a second time.
            let sizes = pending.map { $0.event.payload.canonicalData().count + 300 }
            let first = self.configuration.batch.batches(sizes: sizes).first ?? 0
            return OutboxRead(
                batch: Array(pending.prefix(first)), storedCursor: snapshot.cursor,
                acknowledged: snapshot.acknowledged)
        }
    }

    /// `readOutboxNow` in a task of its own, to read ahead while an answer travels.
    private func readOutbox(after: Int64, pushing: Bool) -> Task<Result<OutboxRead, SyncFailure>, Never> {
        Task {
            do throws(SyncFailure) {
                return .success(try await readOutboxNow(after: after, pushing: pushing))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Sends `plan` in a task of its own, so the engine applies the answer before while it travels.
    private func send(_ plan: Plan) -> Task<Result<(TransportExchange, Duration), SyncFailure>, Never> {
        let request = SyncRequest(
            replica: store.replica, events: plan.batch.map(\.event), cursor: plan.cursor, scopes: configuration.scopes,
            limit: plan.limit, acknowledged: plan.acknowledged, excludeOwn: plan.excludeOwn ? true : nil,
            markEvery: plan.markEvery)
        let transport = transport
        return Task {
            let start = ContinuousClock.now
            do throws(SyncFailure) {
                let exchange = try await transport.sync(request)
                return .success((exchange, ContinuousClock.now - start))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Applies one answer through the store (`EventStore.apply(_:budget:also:)`: in transactions that fit
    /// `budget`, split at the answer's marks when `markEvery` is given), with its journal entries in the same
    /// transactions: what was pushed with the first, the pull with the last (counted over the whole answer).
    /// `foldThrough` and `follows` as in `SyncAnswer`; `requestID`, the request's id, ends the journal's lines.
    func apply(
        _ response: SyncResponse, pushed batch: [StoredEvent], markEvery: Int?, budget: inout ApplyBudget,
        foldThrough: [Scope: Int64] = [:], follows: String? = nil, requestID: String? = nil
    ) async throws(SyncFailure) -> AppliedAnswer {
        let answer = SyncAnswer(
            response, pushed: batch, markEvery: markEvery, foldThrough: foldThrough, follows: follows)
        let journal = journal
        let pushed = !batch.isEmpty
        let pulled = !response.events.isEmpty
        let applied: AppliedAnswer
        do {
            applied = try await store.apply(answer, budget: &budget) { transaction, db in
                journal.write(
                    SyncJournal.entries(
                        for: transaction.total, pushed: transaction.isFirst && pushed,
                        pulled: transaction.isLast && pulled, requestID: requestID),
                    in: db)
            }
        } catch {
            throw Self.storeFailure(error)
        }
        if pushed || pulled { await trackConflicts() }
        return applied
    }

    /// A budget for answers applied outside a cycle (live frames, long-poll pages): one transaction each.
    func oneTransactionBudget() -> ApplyBudget { Self.budget(configuration) }

    /// The store's budget as the configuration sets it, before anything is learned.
    static func budget(_ configuration: Configuration) -> ApplyBudget {
        ApplyBudget(
            transaction: configuration.applyBudget, writeBehind: configuration.projectionLag,
            events: PageSizing(configuration).size)
    }

    /// Bounds the local log with the stable points the server last sent (`EngineStatus.stablePoints`):
    /// folds the confirmed events at or below them into the projections' snapshots, deletes them and gives
    /// the space back (`EventStore.prune`). Pending and rejected events are never touched. Journaled as
    /// `compact`. Nil when no answer has brought stable points yet.
    @discardableResult
    public func compact() async throws -> EventPruneReport? {
        let points = status.stablePoints.compactMap { name, seq in (try? Scope(name)).map { ($0, seq) } }
        guard !points.isEmpty else { return nil }
        let report = try await store.prune(stablePoints: Dictionary(points) { a, _ in a })
        let stable = status.stablePoints
        prunedAt.withLock { $0 = stable }
        await journal.record(
            "compact", "\(report.foldedEvents) events folded, \(report.pagesFreed) pages freed")
        return report
    }

    /// Runs store work, turning a local database failure into a permanent sync failure.
    private func local<T: Sendable>(_ body: @Sendable () async throws -> T) async throws(SyncFailure) -> T {
        do {
            return try await body()
        } catch {
            throw Self.storeFailure(error)
        }
    }

    /// A local database failure as a sync failure: permanent.
    static func storeFailure(_ error: any Error) -> SyncFailure {
        .permanent(code: "store.error", message: String(describing: error))
    }
}
