import Foundation
import SyncEngine
import SyncModels
import SyncProtocol

/// A logic-only stand-in for `sync-server`, for deterministic tests of clients. Pushes are decided by the
/// same pure `PushPlan` the real server runs inside its PostgreSQL transaction (envelope and scope checks,
/// duplicates within a batch and of stored events with their original `seq`, stream-version checks for
/// non-commutative types, rules, gap-free per-scope `seq`), so the two cannot disagree; pulls page by
/// cursor as the server does. It has no persistence, authentication or HTTP.
public actor InMemorySyncServer {
    private var log: [Scope: [Event]] = [:]
    private var seqByID: [EventID: Int64] = [:]
    private var streamVersions: [PushPlan.StreamKey: Int64] = [:]
    private let isCommutative: @Sendable (String) -> Bool
    private let rule: @Sendable (Event) -> EventRejection?
    public private(set) var requestCount = 0
    /// The live stream's subscribers: the scopes they read (nil: every scope) and where their frames go.
    private var subscribers: [Int: (scopes: Set<Scope>?, continuation: AsyncStream<LiveFrame>.Continuation)] = [:]
    private var nextSubscriber = 0

    /// - Parameters:
    ///   - isCommutative: whether events of a type skip the stream-version check, as `SyncDomain` says on the
    ///     real server; by default every type does (a CRDT domain).
    ///   - rule: decides per event whether to reject it (nil accepts), as a domain's `EventRule` would.
    public init(
        isCommutative: @escaping @Sendable (String) -> Bool = { _ in true },
        rule: @escaping @Sendable (Event) -> EventRejection? = { _ in nil }
    ) {
        self.isCommutative = isCommutative
        self.rule = rule
    }

    /// Handles one `/v1/sync` request: push first, then pull.
    public func handle(_ request: SyncRequest, pageSize: Int = 500) throws(SyncFailure) -> SyncResponse {
        requestCount += 1
        let results = push(request.events)
        let cursor: ScopeCursor
        do {
            cursor = try ScopeCursor(encoded: request.cursor)
        } catch {
            throw .permanent(code: "request.invalid", message: "cursor is not one this server issued")
        }
        let page = read(
            after: cursor, scopes: request.scopes, limit: request.limit ?? pageSize,
            exclude: request.excludeOwn == true ? request.replica : nil)
        return SyncResponse(
            results: results, events: page.events, cursor: page.cursor, hasMore: page.hasMore,
            remaining: page.remaining,
            marks: request.markEvery.map { Self.marks(page.events, after: cursor, every: $0) })
    }

    /// Handles one `GET /v1/pull` read. It never waits: `InMemoryTransport.pull` waits by reading again.
    public func pull(_ request: PullRequest, pageSize: Int = 500) -> PullResponse {
        requestCount += 1
        var page = read(
            after: request.cursor, scopes: request.scopes, limit: request.limit ?? pageSize, exclude: request.exclude)
        page.marks = request.markEvery.map { Self.marks(page.events, after: request.cursor, every: $0) }
        return page
    }

    /// Subscribes to the live stream (`GET /v1/live`) as the real server does: for each scope read (`scopes`,
    /// or every scope) that has events after `request.cursor`, a frame of them first; then, for every push
    /// that commits events, one frame per scope with them, the same for every subscriber. Ending the
    /// iteration unsubscribes.
    public func subscribe(_ request: PullRequest) -> AsyncStream<LiveFrame> {
        let (stream, continuation) = AsyncStream<LiveFrame>.makeStream()
        let scopes = request.scopes.map(Set.init)
        for scope in (scopes.map(Array.init) ?? Array(log.keys)).sorted() {
            let after = request.cursor[scope]
            let events = Array(log[scope, default: []].dropFirst(Int(after)))
            if let head = events.last?.seq {
                continuation.yield(LiveFrame(scope: scope, after: after, head: head, events: events))
            }
        }
        nextSubscriber += 1
        let id = nextSubscriber
        subscribers[id] = (scopes, continuation)
        continuation.onTermination = { _ in Task { await self.unsubscribe(id) } }
        return stream
    }

    private func unsubscribe(_ id: Int) {
        subscribers[id] = nil
    }

    /// Subscribers of the live stream now.
    public var liveSubscribers: Int { subscribers.count }

    /// Sends the frames of a commit: per scope, its new events.
    private func publish(_ committed: [Event]) {
        guard !subscribers.isEmpty else { return }
        for (scope, events) in Dictionary(grouping: committed, by: \.scope).sorted(by: { $0.key < $1.key }) {
            let sorted = events.sorted { ($0.seq ?? 0) < ($1.seq ?? 0) }
            let frame = LiveFrame(
                scope: scope, after: (sorted[0].seq ?? 1) - 1, head: sorted[sorted.count - 1].seq ?? 0, events: sorted)
            for (scopes, continuation) in subscribers.values where scopes?.contains(scope) ?? true {
                continuation.yield(frame)
            }
        }
    }

    /// The cursors partway through a page, as the server answers them (`PullResponse.marks`).
    private static func marks(_ events: [Event], after cursor: ScopeCursor, every: Int) -> [String] {
        cursor.marks(through: events.map { (scope: $0.scope, seq: $0.seq ?? 0) }, every: every)
    }

    /// The page after `cursor`, as the server pages.
    private func read(after start: ScopeCursor, scopes requested: [Scope]?, limit: Int, exclude: ReplicaID? = nil)
        -> PullResponse
    {
        var cursor = start
        let scopes = requested ?? log.keys.sorted()
        var events: [Event] = []
        var hasMore = false
        for scope in scopes.sorted() {
            // Events `exclude` made are left out; the cursor still moves past them.
            for event in log[scope, default: []].dropFirst(Int(cursor[scope])) {
                if event.dot.replica == exclude {
                    cursor.advance(scope, to: event.seq ?? 0)
                    continue
                }
                guard events.count < limit else {
                    hasMore = true
                    break
                }
                events.append(event)
                cursor.advance(scope, to: event.seq ?? 0)
            }
        }
        let remaining = scopes.reduce(0) { $0 + max(0, log[$1, default: []].count - Int(cursor[$1])) }
        return PullResponse(events: events, cursor: cursor.encoded, hasMore: hasMore, remaining: remaining)
    }

    /// The push step of the real server, on memory instead of PostgreSQL.
    private func push(_ events: [Event]) -> [PushResult] {
        // No tokens here: every scope of the batch is allowed.
        var plan = PushPlan(events: events, allowedScopes: Set(events.map(\.scope)))
        plan.markStored(
            Dictionary(uniqueKeysWithValues: plan.pendingIDs.compactMap { id in seqByID[id].map { (id, $0) } }))
        _ = plan.checkVersions(current: streamVersions, isCommutative: isCommutative)
        for index in plan.pendingIndexes {
            if let rejection = rule(plan.events[index]) { plan.reject(index, rejection) }
        }
        let heads = Dictionary(uniqueKeysWithValues: plan.pendingScopes.map { ($0, Int64(log[$0]?.count ?? 0)) })
        _ = plan.assignSeqs(heads: heads)
        let receivedAt = Date(timeIntervalSince1970: 1_700_000_000 + Double(requestCount))
        var committed: [Event] = []
        for index in plan.acceptedIndexes {
            guard case .accepted(let seq) = plan.outcomes[index] else { continue }
            var stored = plan.events[index]
            stored.seq = seq
            stored.receivedAt = receivedAt
            log[stored.scope, default: []].append(stored)
            committed.append(stored)
            seqByID[stored.id] = seq
            if !isCommutative(stored.type) {
                let key = PushPlan.StreamKey(scope: stored.scope, stream: stored.stream)
                streamVersions[key] = max(streamVersions[key] ?? 0, stored.streamVersion)
            }
        }
        publish(committed)
        return plan.results
    }

    /// Every event of `scope` in `seq` order.
    public func events(in scope: Scope) -> [Event] { log[scope, default: []] }
}
