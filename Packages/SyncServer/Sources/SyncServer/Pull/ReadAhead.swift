import SyncCompression
import SyncModels
import SyncProtocol
import Synchronization

/// Read-ahead for replicas catching up through `POST /v1/sync`: when an answer has more to pull, the page
/// that replica will ask for next (same scopes and options, from the cursor just given, with the limit
/// `predictedLimit` expects) is read, written and compressed while the answer travels and the replica
/// applies it. Its next request is then answered without waiting for the database or the compressor: only
/// the results of what it pushed are written, and joined before the page already compressed
/// (`Gzip.compress(head:then:)`).
///
/// A bootstrapping device alternates between waiting for the server and applying, and the server between
/// reading and waiting for the device: this overlaps the two. A bootstrap of 1,000,000 events spends
/// about a fifth of its time waiting for pages without it.
///
/// **What an answer read ahead may hold.** The same as the request would have read when the answer before it
/// was made: every event up to the heads as read then, nothing past them (the cursor only moves to what was
/// read, so a later commit comes with a later page), a count of what remains and stable points of that
/// moment (both advisory). A compaction in between changes nothing for the replica: it gets the history as
/// it was then, and the request after is checked against retention as always. The request itself still
/// records the replica's progress, from its own cursor and acknowledged position. A request that differs in
/// anything the page depends on (scopes, limit, options, cursor, `Accept-Encoding`) is read as usual, and the
/// page read ahead is dropped; so is one not asked for within `maxAge`. So is a request that pushes events
/// without `excludeOwn` (`SyncAPI.handleSync`): it reads after its push, which may bring its events back.
///
/// **Memory.** Pages read ahead and not yet asked for hold at most `maxEvents` events between them (a page
/// counts its limit while it is read); past that, none is read ahead until some are taken or expire. Each
/// replica has at most one.
final class ReadAhead: Sendable {
    /// Everything a page read ahead depends on besides the log.
    struct Key: Hashable, Sendable {
        var replica: ReplicaID
        var scopes: [Scope]
        var cursor: ScopeCursor
        var limit: Int
        var exclude: ReplicaID?
        var markEvery: Int?
        /// Whether the request accepts gzip (the page is compressed ahead then).
        var gzip: Bool
    }

    /// A page read and written ahead: the answer but the results of the push that comes with the request.
    struct Prepared: Sendable {
        /// The page without its events (what follows the answer: its cursor, `hasMore`, `retainedFrom`).
        var page: PullService.Page
        var eventCount: Int
        /// `EventJSONWriter.pageTail` of the page.
        var tail: [UInt8]
        /// The tail deflated, when the request accepts gzip and the tail is worth compressing.
        var segment: Gzip.Segment?
    }

    private struct Entry {
        var key: Key
        /// The limit of the request whose answer this page follows.
        var askedLimit: Int
        var started: ContinuousClock.Instant
        var task: Task<Prepared?, Never>
    }

    private struct State {
        var entries: [ReplicaID: Entry] = [:]
        /// The limits of the pages held or being read.
        var reserved = 0
    }

    private let state = Mutex(State())
    /// Events the pages read ahead may hold between them; 0 turns read-ahead off.
    let maxEvents: Int
    /// How long a page read ahead waits for its request.
    let maxAge: Duration

    init(maxEvents: Int, maxAge: Duration = .seconds(10)) {
        self.maxEvents = maxEvents
        self.maxAge = maxAge
    }

    var isEnabled: Bool { maxEvents > 0 }

    /// Pages held or being read.
    var count: Int { state.withLock { $0.entries.count } }

    /// The page read ahead for `key` (waiting for it while it is still read), or nil: none was read ahead
    /// for this replica, it was for another request (it is dropped), it expired, or its read failed (the
    /// request reads as usual and meets the same error, if it still holds). Also the limit of the request
    /// before, when a page was read ahead after it (see `predictedLimit`).
    func take(_ key: Key) async -> (prepared: Prepared?, limitBefore: Int?) {
        let entry = state.withLock { state -> Entry? in
            guard let entry = state.entries.removeValue(forKey: key.replica) else { return nil }
            state.reserved -= entry.key.limit
            return entry
        }
        guard let entry else { return (nil, nil) }
        // A page dropped is left to finish: cancelling a read in the middle of a query gains nothing.
        guard entry.key == key, ContinuousClock.now - entry.started <= maxAge else { return (nil, entry.askedLimit) }
        return (await entry.task.value, entry.askedLimit)
    }

    /// The limit to read the next page ahead with, after a request for `asked` events whose answer had more:
    /// twice as many (up to `max`) while the replica's requests grow (`before`, the limit of the request
    /// before, was smaller; the reference engine doubles its pages while they come back full), the same
    /// otherwise. A replica whose pages stopped growing below `max` misses once, then gets its pages again.
    static func predictedLimit(asked: Int, before: Int?, max: Int) -> Int {
        guard let before, asked > before else { return asked }
        return min(asked * 2, max)
    }

    /// Reads `key`'s page ahead with `read`, in a task of its own, in place of the replica's earlier one;
    /// nothing when the budget is spent.
    /// - Returns: whether it started.
    @discardableResult
    func start(_ key: Key, askedLimit: Int? = nil, _ read: @escaping @Sendable () async throws -> Prepared) -> Bool {
        guard isEnabled else { return false }
        return state.withLock { state in
            let now = ContinuousClock.now
            if let earlier = state.entries.removeValue(forKey: key.replica) { state.reserved -= earlier.key.limit }
            if state.reserved + key.limit > maxEvents {
                // Pages whose replicas never came back for them give their room back.
                for (replica, entry) in state.entries where now - entry.started > maxAge {
                    state.entries[replica] = nil
                    state.reserved -= entry.key.limit
                }
                guard state.reserved + key.limit <= maxEvents else { return false }
            }
            state.entries[key.replica] = Entry(
                key: key, askedLimit: askedLimit ?? key.limit, started: now,
                task: Task(executorPreference: LoopExecutors.singleton.current) { try? await read() })
            state.reserved += key.limit
            return true
        }
    }
}
