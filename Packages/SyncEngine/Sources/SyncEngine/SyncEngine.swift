import Foundation
import SyncEventStore
import SyncModels
import SyncProtocol
import Synchronization

/// The background sync client (DESIGN §7): pushes the outbox in batches and pulls pages into the local
/// event store through `/v1/sync`, each answer (acknowledgements, rejections with their rollback, the page
/// and its cursor) applied in one transaction, until nothing is left. It never loses a write: events leave
/// the outbox only when the server acknowledges them, a retried push is deduplicated by event id, rejected
/// events are rolled back and surfaced, and authentication failures pause sync without touching local data.
///
/// `syncNow()` runs one cycle; `run()` keeps syncing on local writes (debounced), an interval,
/// connectivity changes and explicit requests, with backoff between failures (`SyncScheduler`).
public final class SyncEngine: Sendable {
    public struct Configuration: Sendable {
        /// Scopes to pull; nil pulls every scope in the token.
        public var scopes: [Scope]?
        /// Events per pulled page.
        public var pageSize = 500
        public var batch = PushBatchPolicy()
        public var debounce: Duration = .milliseconds(250)
        public var backoff = BackoffPolicy()
        /// How often `run()` syncs without any other trigger; nil never.
        public var interval: Duration? = .seconds(30)
        /// A bound on round trips per cycle, so a cycle always ends.
        public var maxRoundsPerCycle = 10_000

        public init(scopes: [Scope]? = nil) {
            self.scopes = scopes
        }
    }

    public let store: EventStore
    public let transport: any SyncTransport
    public let configuration: Configuration
    public let journal: SyncJournal
    private let state = Mutex(EngineStatus())
    private let inbox = TriggerInbox()
    private let statusBroadcast = Mutex<[UUID: AsyncStream<EngineStatus>.Continuation]>([:])

    public init(store: EventStore, transport: any SyncTransport, configuration: Configuration = Configuration()) throws
    {
        self.store = store
        self.transport = transport
        self.configuration = configuration
        self.journal = try SyncJournal(database: store.database)
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

    private func post(_ trigger: SyncTrigger) {
        let inbox = inbox
        Task { await inbox.post(trigger) }
    }

    // MARK: - One cycle

    /// Pushes and pulls until the outbox is empty and the server has nothing more, then returns.
    /// - Throws: the `SyncFailure` that ended the cycle; what was committed before it stays committed.
    public func syncNow() async throws(SyncFailure) {
        await journal.record("start")
        do {
            try await cycle()
        } catch {
            await recordFailure(error)
            throw error
        }
        await updateStatus { status in
            status.lastSuccess = Date()
            status.lastError = nil
            status.pausedForAuthentication = false
            status.cycles += 1
            status.inFlight = 0
        }
    }

    private func cycle() async throws(SyncFailure) {
        for _ in 0..<configuration.maxRoundsPerCycle {
            let (batch, cursor) = try await local { () async throws -> ([StoredEvent], String?) in
                let pending = try await self.store.pendingEvents(limit: self.configuration.batch.maxEvents)
                // Payload bytes plus the envelope's fixed fields (ids, clocks, dot: about 300 bytes): close enough
                // to bound a batch, without encoding every event a second time.
                let sizes = pending.map { $0.event.payload.canonicalData().count + 300 }
                let first = self.configuration.batch.batches(sizes: sizes).first ?? 0
                return (Array(pending.prefix(first)), try await self.store.cursor())
            }
            await updateStatus { $0.inFlight = batch.count }
            let request = SyncRequest(
                replica: store.replica, events: batch.map(\.event), cursor: cursor, scopes: configuration.scopes,
                limit: configuration.pageSize)
            let exchange = try await transport.sync(request)
            let response = exchange.response
            guard response.results.count == batch.count else {
                throw .retryable(
                    reason: "the server answered \(response.results.count) results for \(batch.count) events",
                    retryAfter: nil)
            }
            try await apply(response, pushed: batch)
            await updateStatus {
                $0.traffic += exchange.traffic
                $0.inFlight = 0
            }
            if batch.isEmpty && !response.hasMore { return }
        }
    }

    private func apply(_ response: SyncResponse, pushed batch: [StoredEvent]) async throws(SyncFailure) {
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
        // One transaction for the whole answer: a crash leaves the store as it was before it or with all of it.
        let outcome = try await local { [acknowledged, rejections] in
            try await self.store.applySyncResponse(
                acknowledged: acknowledged, rejected: rejections, pulled: response.events, cursor: response.cursor)
        }
        let pulled = outcome.pulled
        if !batch.isEmpty {
            await journal.record(
                "push.ok", "\(outcome.acknowledged) acknowledged, \(outcome.rolledBack.count) rejected")
        }
        for event in outcome.rolledBack {
            await journal.record(
                "rejection",
                "\(event.event.id) \(event.event.type): \(event.rejection?.code ?? "") \(event.rejection?.message ?? "")"
            )
        }
        if !response.events.isEmpty {
            await journal.record(
                "pull.ok", "\(pulled.inserted) new, \(pulled.confirmedLocal + pulled.alreadyKnown) known")
        }
    }

    /// Runs store work, turning a local database failure into a permanent sync failure.
    private func local<T: Sendable>(_ body: @Sendable () async throws -> T) async throws(SyncFailure) -> T {
        do {
            return try await body()
        } catch {
            throw .permanent(code: "store.error", message: String(describing: error))
        }
    }

    private func recordFailure(_ failure: SyncFailure) async {
        switch failure {
        case .retryable: await journal.record("retry", failure.description)
        case .authentication: await journal.record("pause", failure.description)
        case .resetRequired:
            await journal.record("reset", "pulling again from the start of retained history; pending events kept")
            try? await store.resetCursor()
        case .permanent: await journal.record("error", failure.description)
        }
        await updateStatus { status in
            status.lastError = failure.description
            status.inFlight = 0
            if case .authentication = failure { status.pausedForAuthentication = true }
        }
    }

    private func updateStatus(_ change: @Sendable (inout EngineStatus) -> Void) async {
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

    // MARK: - Running

    /// Syncs continuously until the task is cancelled: on local writes (debounced), every `interval`, on
    /// connectivity changes, explicit requests and new tokens; with backoff after failures.
    public func run() async {
        let clock = ContinuousClock()
        var scheduler = SyncScheduler<ContinuousClock.Instant>(
            debounce: min(configuration.debounce, configuration.batch.maxAge), backoff: configuration.backoff)
        var random = SystemRandomNumberGenerator()
        let inbox = inbox
        let changes = store.changes()
        let watcher = Task {
            for await change in changes where change.kind == .appended { await inbox.post(.localWrite) }
        }
        defer { watcher.cancel() }
        var wakeAt: ContinuousClock.Instant? = nil
        var nextInterval = configuration.interval.map { clock.now.advanced(by: $0) }
        await inbox.post(.explicit)
        while !Task.isCancelled {
            let deadline = [wakeAt, nextInterval].compactMap { $0 }.min()
            let trigger = await inbox.next(deadline: deadline)
            if Task.isCancelled { break }
            var action: SyncScheduler<ContinuousClock.Instant>.Action
            if let trigger {
                action = scheduler.trigger(trigger, now: clock.now)
            } else if let interval = configuration.interval, let due = nextInterval, due <= clock.now {
                nextInterval = clock.now.advanced(by: interval)
                action = scheduler.trigger(.interval, now: clock.now)
            } else {
                action = scheduler.tick(now: clock.now)
            }
            while action == .startCycle {
                var failure: SyncFailure?
                do {
                    try await syncNow()
                } catch {
                    failure = error
                }
                action = scheduler.cycleFinished(failure: failure, now: clock.now, random: &random)
            }
            if case .wake(let at) = action { wakeAt = at } else { wakeAt = nil }
        }
    }
}
