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
    public struct Configuration: Sendable {
        /// Scopes to pull; nil pulls every scope in the token.
        public var scopes: [Scope]?
        /// Events per pulled page at the start of a cycle, and per local transaction that applies one. While
        /// pages come back full, the next page asks for twice as many, up to `maxPageSize`. A server that
        /// answers `marks` (see `markEvery`) lets the engine apply a page in several transactions, so a page
        /// then grows whatever applying it takes, and the transactions are sized instead: twice as many
        /// events while one takes less than half of `applyBudget`, half as many when one takes more, down to
        /// `minPageSize`. Without marks the page itself is sized that way.
        public var pageSize = 500
        /// The smallest page the engine shrinks to.
        public var minPageSize = 100
        /// The largest page the engine asks for (the protocol's maximum is 5,000).
        public var maxPageSize = 5_000
        /// Events between the cursors the engine asks for inside each page (`SyncRequest.markEvery`): a
        /// transaction of a long page ends at one of them and stores it as the cursor, so a crash between two
        /// resumes exactly there. Long pages cost less per event on both sides (measured: a fresh device
        /// pulling 400,000 events, 5,000-event pages against pages sized by `applyBudget`) while local writes
        /// still wait for one short transaction at most. A replica with a long cursor (many scopes) asks for
        /// marks further apart, since each mark is a cursor (`markSpacing`). 0 asks for none.
        public var markEvery = 100
        /// How long applying one page may hold the store's write lock. Local writes wait for it: it bounds
        /// the latency an edit sees while a long pull (a new device, a week offline) runs.
        public var applyBudget: Duration = .milliseconds(8)
        /// How long, during a long pull, projections that can (`BufferingProjection`) may hold pulled events
        /// in memory before their tables show them. Pages that have more after them are applied to the log
        /// and to memory only, and the buffered records are written at most this long after the first of
        /// them, and when the pull catches up: a record touched by many pages is then written once instead
        /// of once per page. The flushes run in transactions that each fit `applyBudget`. Zero writes every
        /// page's records with the page. Local commands that read a record before changing it see it current
        /// either way (`EventStore.writeBufferedProjections`); other readers of the tables see them up to this
        /// long behind while a pull runs.
        public var projectionLag: Duration = .seconds(1)
        public var batch = PushBatchPolicy()
        /// How long `run()` waits after a local write before its push when no push is in flight. Zero (the
        /// default) pushes at once: latency first. Writes made while a push is in flight go together in the
        /// next push whatever this is, and `minPushInterval` bounds how often a device pushes. A positive value
        /// (250 ms was the default before) trades latency for fewer, larger pushes; capped by `batch.maxAge`.
        public var debounce: Duration = .zero
        /// The sustained bound on pushes that local writes ask for: a device typing fast pushes at most once
        /// per interval (20 a second by default), each push carrying what was typed since the last one.
        /// Explicit requests, connectivity changes and new tokens are not bound by it.
        public var minPushInterval: Duration = .milliseconds(50)
        /// How many pushes local writes may start back to back before `minPushInterval` applies: a device that
        /// writes now and then never waits for the bound (`SyncScheduler`).
        public var pushBurst = 4
        public var backoff = BackoffPolicy()
        /// How often `run()` syncs without any other trigger; nil never.
        public var interval: Duration? = .seconds(30)
        /// Whether `run()` holds the live stream (`GET /v1/live`, `SyncTransport.live`) while in the
        /// foreground (`setLive`): once a cycle has reached the head, other replicas' events arrive as they
        /// commit and are applied at once, one short transaction per batch of frames. Without it, or when the
        /// transport or the server has no stream, the engine long-polls instead (`longPoll`).
        public var live = true
        /// The fallback of the live stream: while `run()` runs in the foreground without it (`live` off, or
        /// no stream at the server or in the transport), wait on the server for other replicas' events with
        /// long-polls of this length (`GET /v1/pull?wait=`, at most the server's longest wait, 30 s by
        /// default) and sync as soon as one arrives, so that a device sees others' edits within a round trip
        /// instead of at the next `interval`. The run loop applies the poll's pages itself when they continue
        /// the store, and runs a cycle otherwise (`applyPolledPages`). Nil: no long-poll (a transport that
        /// cannot pull also turns it off).
        public var longPoll: Duration? = .seconds(25)
        /// After a long-poll brings other replicas' events, how long the next poll waits before it is sent,
        /// so that what they push meanwhile comes in one page and one local transaction instead of one each.
        /// The first event after a quiet spell is seen at once; during a burst an event is seen up to this
        /// much later. With ten devices sharing a scope and each pushing four times a second, a device
        /// otherwise polls and applies about 36 times a second. Zero polls again at once.
        public var longPollLinger: Duration = .milliseconds(100)
        /// A bound on round trips per cycle, so a cycle always ends.
        public var maxRoundsPerCycle = 10_000
        /// How much of the sync journal the device keeps.
        public var journal = SyncJournal.Bounds()
        /// Decides, after a reset and the bootstrap that follows it, which pending events still apply and
        /// redoes the others (`EventStore.rebase(with:)`). The default pushes them all as they are; a domain
        /// whose operations refer to elements (sequences) supplies its own (the Notes app's `NotesRebaser`).
        public var rebaser: any EventRebaser = KeepPendingRebaser()
        /// The local log's size past which a successful sync prunes it at the stable points the server sent
        /// (`compact()`): confirmed events held. A prune goes in steps of whole streams (local writes wait for
        /// one step at most, see `EventStore.prune`), but each step has a fixed cost, so prunes are kept
        /// rare: after one the log holds only what the replicas have not all seen, and the next waits for
        /// this many again. Nil: only `compact()` prunes.
        public var autoCompactAfter: Int? = 50_000
        /// Whether a long pull folds on arrival (`EventStore.applySyncResponse(…foldThrough:…)`) the events
        /// that every other replica has acknowledged (the answers' `othersStable`), instead of logging them
        /// for the prune that `autoCompactAfter` would run right after: a pull is long when the server says
        /// it brings at least `autoCompactAfter` events. A new device pulling an unfolded history of a
        /// million events then writes its state, not a million log rows it deletes at once. Once such a pull
        /// reaches the head, the engine purges what it folded (`EventStore.purgeFolded()`, journaled
        /// `fold.purge`). Needs `autoCompactAfter`, and projections that all fold on arrival.
        public var foldOnArrival = true
        /// Called after each round trip's answer is applied, with what it did and where its time went (for
        /// metrics, benchmarks and load generators). Runs on the engine's task: keep it short.
        public var onRound: (@Sendable (SyncRound) -> Void)?

        public init(scopes: [Scope]? = nil) {
            self.scopes = scopes
        }
    }

    public let store: EventStore
    public let transport: any SyncTransport
    public let configuration: Configuration
    public let journal: SyncJournal
    private let state = Mutex(EngineStatus())
    /// Streams' versions a flush transaction writes (`EventStore.flushDeferredVersions(limit:)`), adapted as
    /// `flushProjections(limit:)` adapts its records' limit, on its own: a version costs another amount.
    private let versionFlushLimit = Mutex(SyncEngine.firstFlushLimit)
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
    private let statusBroadcast = Mutex<[UUID: AsyncStream<EngineStatus>.Continuation]>([:])

    public init(store: EventStore, transport: any SyncTransport, configuration: Configuration = Configuration()) throws
    {
        self.store = store
        self.transport = transport
        self.configuration = configuration
        self.journal = try SyncJournal(database: store.database, bounds: configuration.journal)
    }

    /// The current status.
    public var status: EngineStatus { state.withLock { $0 } }

    /// Status changes as they happen (each subscriber gets its own sequence, starting with the current one).
    public func statusUpdates() -> AsyncStream<EngineStatus> {
        let (stream, continuation) = AsyncStream<EngineStatus>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let id = UUID()
        statusBroadcast.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.statusBroadcast.withLock { $0.removeValue(forKey: id) }
        }
        continuation.yield(status)
        return stream
    }

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
        var flushLimit = Self.firstFlushLimit
        var resets = 0
        while true {
            do {
                try await syncToHead(flushLimit: &flushLimit)
                break
            } catch {
                // What the cycle buffered before it failed still reaches the tables.
                try? await flushProjections(limit: &flushLimit)
                await recordFailure(error)
                if case .resetRequired = error, resets == 0 {
                    resets += 1
                    continue
                }
                throw error
            }
        }
        if (try? await store.hasFoldedToPurge()) == true {
            // The pull reached the head: everything at or below the points it folded at has arrived. A failed
            // purge leaves what it did not reach for the next sync.
            if let report = try? await store.purgeFolded() {
                await journal.record(
                    "fold.purge",
                    "\(report.streams) streams folded on arrival purged, \(report.retired) retired, \(report.pagesFreed) pages freed"
                )
            }
        }
        if let threshold = configuration.autoCompactAfter, status.stablePoints != prunedAt.withLock({ $0 }),
            let counts = try? await store.counts(), counts[.confirmed] ?? 0 >= threshold
        {
            // A failed prune leaves the store as it was (one transaction); the next sync tries again.
            _ = try? await compact()
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
    private func syncToHead(flushLimit: inout Int) async throws(SyncFailure) {
        var end = try await cycle(flushLimit: &flushLimit)
        // Folded events held in memory were lost: the store went back to before them; pull them again.
        var rewinds = 0
        while end == .rewound, rewinds < 3 {
            rewinds += 1
            await journal.record("fold.rewind", "folded events held in memory were lost: pulling them again")
            end = try await cycle(flushLimit: &flushLimit)
        }
        guard end == .reachedHead, try await local({ try await self.store.isBootstrapping() }) else { return }
        try await flushProjections(limit: &flushLimit)
        let report = try await local { try await self.store.rebase(with: self.configuration.rebaser) }
        await journal.record(
            "rebase",
            "pending events after the reset: \(report.kept) kept, \(report.superseded) superseded by \(report.reissued) re-issued"
        )
        _ = try await cycle(flushLimit: &flushLimit)
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

    /// One round trip's request: a push batch and where to pull from.
    struct Plan: Sendable {
        var batch: [StoredEvent]
        /// The outbox position the batch was read after; the next batch is read after the last of this one.
        var after: Int64
        var cursor: String?
        var limit: Int
        /// What the replica vouches for while its outbox holds events (`EventStore.acknowledgedCursor`).
        var acknowledged: String?
        /// Whether to ask the server to leave this replica's own events out of the page: it holds them all,
        /// unless it is bootstrapping after a reset.
        var excludeOwn = false
        /// The `markEvery` the request asks for (nil: none).
        var markEvery: Int? = nil

        var lastPosition: Int64 { batch.last?.position ?? after }
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
    private func cycle(flushLimit: inout Int) async throws(SyncFailure) -> CycleEnd {
        var limit = max(1, configuration.pageSize)
        // Events per transaction, when the server marks its pages.
        var chunk = limit
        var bufferedSince: ContinuousClock.Instant? = nil
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
            let full = response.hasMore && response.events.count >= plan.limit
            limit =
                marked
                ? (full ? min(max(configuration.pageSize, configuration.maxPageSize), limit * 2) : limit)
                : nextPageSize(after: limit, full: full, lastApply: lastApply)
            let next = try await upcoming.value.get().plan(
                after: plan.lastPosition, cursor: response.cursor, limit: limit, excludeOwn: pushing,
                markEvery: Self.markSpacing(configuration.markEvery, limit: limit, cursor: response.cursor))
            let more = !next.batch.isEmpty || response.hasMore
            if more { fetch = send(next) }
            // More pages follow: projections may keep this one in memory (see `projectionLag`).
            let deferring = configuration.projectionLag > .zero && response.hasMore
            if !folding, configuration.foldOnArrival, let threshold = configuration.autoCompactAfter,
                (response.remaining ?? 0) + response.events.count >= threshold
            {
                folding = true
            }
            let applyStart = ContinuousClock.now
            let applied = try await apply(
                response, pushed: plan.batch, markEvery: marked ? plan.markEvery : nil, chunk: &chunk,
                deferProjections: deferring, foldThrough: folding ? Self.points(response.othersStable) : [:],
                follows: plan.cursor ?? "")
            let outcome = applied.outcome
            if outcome.rewound {
                await updateStatus { $0.traffic += exchange.traffic }
                return .rewound
            }
            lastApply = applied.longest
            var flushed = Duration.zero
            if store.hasDeferredWrites() {
                let since = bufferedSince ?? applyStart
                bufferedSince = since
                if !deferring || ContinuousClock.now - since >= configuration.projectionLag {
                    let flushStart = ContinuousClock.now
                    try await flushProjections(limit: &flushLimit)
                    flushed = ContinuousClock.now - flushStart
                    bufferedSince = nil
                }
            }
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
        try await flushProjections(limit: &flushLimit)
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

    /// Records a flush transaction writes first; then adapted so that each fits `applyBudget`.
    static let firstFlushLimit = 256

    /// Writes every projection record buffered during a pull, in transactions of `limit` records, doubled
    /// while one takes less than half of `applyBudget` and halved while one takes more, so local writes
    /// wait for no more than one of them.
    private func flushProjections(limit: inout Int) async throws(SyncFailure) {
        while store.hasBufferedProjections() {
            let count = limit
            let start = ContinuousClock.now
            let done = try await local { try await self.store.flushProjections(limit: count) }
            adapt(&limit, took: ContinuousClock.now - start)
            if done { break }
        }
        // Then the streams' versions the pages deferred with them, in transactions sized on their own: they
        // cost another amount each, and sized by `limit` they made the next records' flush too long.
        while store.hasDeferredVersions {
            let count = versionFlushLimit.withLock { $0 }
            let start = ContinuousClock.now
            _ = try await local { try await self.store.flushDeferredVersions(limit: count) }
            let took = ContinuousClock.now - start
            versionFlushLimit.withLock { adapt(&$0, took: took) }
        }
    }

    /// A flush's limit after a transaction that took `took`: halved past `applyBudget`, doubled under half of it.
    private func adapt(_ limit: inout Int, took: Duration) {
        if took > configuration.applyBudget {
            limit = max(16, limit / 2)
        } else if took * 2 < configuration.applyBudget {
            limit = min(1 << 16, limit * 2)
        }
    }

    /// The page size of the next request: doubled while pages come back full and the last apply took less
    /// than half the budget, halved when it took more than the budget.
    private func nextPageSize(after limit: Int, full: Bool, lastApply: Duration?) -> Int {
        // Nothing applied yet in this cycle: no measure to decide on.
        guard let lastApply else { return limit }
        return resized(limit, full: full, took: lastApply)
    }

    /// `size` doubled (up to `maxPageSize`) when it was `full` and took less than half of `applyBudget`,
    /// halved (down to `minPageSize`) when it took more than the budget.
    private func resized(_ size: Int, full: Bool, took: Duration) -> Int {
        let floor = max(1, min(configuration.minPageSize, configuration.pageSize))
        let ceiling = max(configuration.pageSize, configuration.maxPageSize)
        if took > configuration.applyBudget { return max(floor, size / 2) }
        if full && took * 2 < configuration.applyBudget { return min(ceiling, size * 2) }
        return size
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

    /// The `markEvery` a request for pages of `limit` events from `cursor` asks for: `configured`, or more
    /// when the cursor is long, and none when a page fits between two marks (or `configured` is 0).
    ///
    /// Each mark is a cursor as long as the request's (a position for every scope it has read), so marks are
    /// spaced at least `cursor.count / 20` events apart: with events of about 200 bytes on the wire, they then
    /// add a tenth of a page at most. A replica that reads 16 scopes gets a mark every 100 events; one that
    /// reads 1,000 scopes (a cursor of about 20 KB) one every 1,000.
    static func markSpacing(_ configured: Int, limit: Int, cursor: String?) -> Int? {
        guard configured > 0 else { return nil }
        let every = max(configured, (cursor?.utf8.count ?? 0) / 20)
        return limit > every ? every : nil
    }

    /// What a request takes from the store: the next batch of the outbox, the stored cursor and the
    /// acknowledged position, read in one snapshot.
    struct OutboxRead: Sendable {
        var batch: [StoredEvent]
        var storedCursor: String?
        var acknowledged: String?

        func plan(after: Int64, cursor: String?, limit: Int, excludeOwn: Bool, markEvery: Int?) -> Plan {
            Plan(
                batch: batch, after: after, cursor: cursor, limit: limit, acknowledged: acknowledged,
                excludeOwn: excludeOwn, markEvery: markEvery)
        }
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

    /// What applying one answer did, in one transaction or several.
    struct Applied: Sendable {
        var outcome: EventStore.SyncResponseOutcome
        var transactions: Int
        /// The longest of its transactions: what a local write waited for at most.
        var longest: Duration
    }

    /// Applies one answer. Unmarked (`markEvery` nil), in one transaction. Marked, in transactions of about
    /// `chunk` events each, each ending at one of the answer's marks and storing it as the cursor (the last
    /// one the answer's own cursor): the acknowledgements and rejections go with the first, and a crash
    /// between two leaves the store at the end of one, which is where the next cycle pulls from. `chunk`
    /// adapts to `applyBudget` as it goes.
    ///
    /// `foldThrough` as in `EventStore.applySyncResponse`; `follows`, the cursor the answer was asked from:
    /// each transaction checks that the store still holds the cursor it follows (the first the request's,
    /// each next the mark before it), and the outcome says `rewound` when it does not.
    func apply(
        _ response: SyncResponse, pushed batch: [StoredEvent], markEvery: Int?, chunk: inout Int,
        deferProjections: Bool, foldThrough: [Scope: Int64] = [:], follows: String? = nil
    ) async throws(SyncFailure) -> Applied {
        var acknowledged: [EventID: Int64] = [:]
        var rejections: [EventID: StoredEvent.Rejection] = [:]
        for result in response.results {
            switch result.status {
            case .accepted, .duplicate:
                if let seq = result.seq { acknowledged[result.id] = seq }
            case .rejected:
                rejections[result.id] = StoredEvent.Rejection(
                    code: result.code?.rawValue ?? "rejected", message: result.message ?? "")
            }
        }
        let events = response.events
        let marks = response.marks ?? []
        // The pushed events' positions: their acknowledgements are found by the table's key.
        let positions = Dictionary(batch.map { ($0.event.id, $0.position) }, uniquingKeysWith: { first, _ in first })
        var applied = Applied(outcome: .init(), transactions: 0, longest: .zero)
        var start = 0
        var follows = follows
        repeat {
            // The first mark at or past `chunk` more events, or the page's end.
            var end = events.count
            var cursor = response.cursor
            if let markEvery, markEvery > 0, start + max(1, chunk) < events.count {
                let index = (start + max(1, chunk) + markEvery - 1) / markEvery
                if index <= marks.count {
                    end = index * markEvery
                    cursor = marks[index - 1]
                }
            }
            let first = start == 0
            let last = end == events.count
            // Its journal entries in the same transaction: what was pushed with the first, the pull with the
            // last (counted over the whole answer).
            let journal = journal
            let pushed = first && !batch.isEmpty
            let before = applied.outcome.pulled
            let pulledAny = last && !events.isEmpty
            let part = Array(events[start..<end])
            // The payloads' bytes as they came, where canonical: stored as they are.
            let payloads = (start..<end).map { response.canonicalPayloads[$0] }
            let started = ContinuousClock.now
            let outcome = try await local {
                [acknowledged = first ? acknowledged : [:], rejections = first ? rejections : [:], cursor, follows] in
                try await self.store.applySyncResponse(
                    acknowledged: acknowledged, rejected: rejections, pulled: part, payloads: payloads, cursor: cursor,
                    deferProjections: last ? deferProjections : self.configuration.projectionLag > .zero,
                    positions: positions, foldThrough: foldThrough, follows: follows
                ) { outcome, db in
                    var total = outcome
                    total.pulled.inserted += before.inserted
                    total.pulled.confirmedLocal += before.confirmedLocal
                    total.pulled.alreadyKnown += before.alreadyKnown
                    total.pulled.folded += before.folded
                    journal.write(Self.journalEntries(total, pushed: pushed, pulled: pulledAny), in: db)
                }
            }
            let took = ContinuousClock.now - started
            if markEvery != nil { chunk = resized(chunk, full: end - start >= chunk, took: took) }
            applied.transactions += 1
            applied.longest = max(applied.longest, took)
            applied.outcome.acknowledged += outcome.acknowledged
            applied.outcome.rolledBack += outcome.rolledBack
            applied.outcome.pulled.inserted += outcome.pulled.inserted
            applied.outcome.pulled.confirmedLocal += outcome.pulled.confirmedLocal
            applied.outcome.pulled.alreadyKnown += outcome.pulled.alreadyKnown
            applied.outcome.pulled.folded += outcome.pulled.folded
            if outcome.rewound {
                applied.outcome.rewound = true
                break
            }
            if follows != nil { follows = cursor }
            start = end
        } while start < events.count
        return applied
    }

    /// The journal's entries for one applied answer.
    private static func journalEntries(_ outcome: EventStore.SyncResponseOutcome, pushed: Bool, pulled: Bool)
        -> [(kind: String, detail: String)]
    {
        var entries: [(kind: String, detail: String)] = []
        if pushed {
            entries.append(("push.ok", "\(outcome.acknowledged) acknowledged, \(outcome.rolledBack.count) rejected"))
        }
        for event in outcome.rolledBack {
            entries.append(
                (
                    "rejection",
                    "\(event.event.id) \(event.event.type): \(event.rejection?.code ?? "") \(event.rejection?.message ?? "")"
                ))
        }
        if pulled {
            let result = outcome.pulled
            let folded = result.folded > 0 ? " (\(result.folded) folded on arrival)" : ""
            entries.append(
                (
                    "pull.ok",
                    "\(result.inserted + result.folded) new\(folded), \(result.confirmedLocal + result.alreadyKnown) known"
                ))
        }
        return entries
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
            throw .permanent(code: "store.error", message: String(describing: error))
        }
    }

    func recordFailure(_ failure: SyncFailure) async {
        switch failure {
        case .retryable: await journal.record("retry", failure.description)
        case .authentication: await journal.record("pause", failure.description)
        case .resetRequired:
            // The server purged history this replica had not seen: what it holds could resurrect what others
            // deleted. Drop the server's part, pull the folded history from the start, re-base the rest.
            let report = try? await store.resetForBootstrap()
            await journal.record(
                "reset",
                "dropped \(report?.confirmedDropped ?? 0) events from the server, pulling its history again from the start; \(report?.pendingKept ?? 0) pending events kept for re-basing"
            )
        case .permanent: await journal.record("error", failure.description)
        }
        await updateStatus { status in
            status.lastError = failure.description
            status.inFlight = 0
            if case .authentication = failure { status.pausedForAuthentication = true }
        }
    }

    func updateStatus(_ change: @Sendable (inout EngineStatus) -> Void) async {
        let counts = try? await store.counts()
        let snapshot = state.withLock { status -> EngineStatus in
            change(&status)
            if let counts {
                status.pending = counts[.pending] ?? 0
                status.rejected = counts[.rejected] ?? 0
            }
            return status
        }
        for continuation in statusBroadcast.withLock({ Array($0.values) }) { continuation.yield(snapshot) }
    }
}
