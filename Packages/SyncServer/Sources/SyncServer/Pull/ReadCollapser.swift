import NIOCore
import SyncModels
import SyncProtocol
import Synchronization

/// Request collapsing for pulls: identical reads share one database read. When a push wakes the
/// long-polls of every device of a scope, those at the same cursor (all that were caught up) re-read the same
/// page; with this, PostgreSQL serves it once, and the answer is encoded and compressed once (`SharedBody`).
///
/// A read may be shared only with callers it cannot leave behind: one that started at an epoch covering the
/// caller's (`LongPollHub.epoch`, taken before the caller reads). Every commit signalled by then is visible
/// to it, so a caller woken by a signal never joins a read that began before that signal. That holds after
/// the read finished too, so a finished read of woken long-polls is kept (unless it failed): waiters resumed
/// one after another by a signal all find it, however long resuming them takes.
///
/// How long it is kept (`retention`) is not what makes sharing it correct (the epochs are). It bounds how
/// stale an answer can be should the LISTEN connection die without telling, as `LongPollHub.headMaxAge` does
/// for the heads a read found, and it is as long by default. It was once a few seconds, and a thousand
/// waiters resumed on a busy machine (a whole test suite on two cores) outlasted it: the last ones read
/// again. Memory is bounded by `capacity`, not by time.
final class ReadCollapser: Sendable {
    /// Everything a read's result depends on.
    struct Key: Hashable, Sendable {
        var scopes: [Scope]
        var cursor: ScopeCursor
        var limit: Int
        var replica: ReplicaID?
        var record: Bool
        var acknowledged: ScopeCursor?
        var exclude: ReplicaID?
    }

    private struct Flight {
        var epoch: ScopeEpoch
        var id: Int
        var task: Task<PullService.Page, any Error>
        /// When it finished; nil while in flight.
        var finished: ContinuousClock.Instant?
    }

    private struct State {
        var flights: [Key: Flight] = [:]
        var nextID = 0
        var shared = 0
        /// The count of flights at which the next prune runs: what the last prune left plus `capacity`. A
        /// prune walks every flight, so with hundreds of reads in flight (a saturated database) pruning
        /// whenever `capacity` is reached would cost a walk per read, under the lock.
        var pruneAt = 0
        var prunes = 0
    }
    private let state = Mutex(State())
    let retention: Duration
    /// Finished reads are pruned, down to the newest half of this many, once this many more reads are kept
    /// than the last prune left.
    let capacity: Int

    init(retention: Duration = .seconds(600), capacity: Int = 512) {
        self.retention = retention
        self.capacity = capacity
    }

    /// Reads that joined another's read instead of their own.
    var sharedReads: Int { state.withLock { $0.shared } }

    /// Reads in flight or finished and kept.
    var keptReads: Int { state.withLock { $0.flights.count } }

    /// How many times finished reads were pruned.
    var prunes: Int { state.withLock { $0.prunes } }

    /// The result of `read`, or of an identical read in flight or just finished that started at an epoch
    /// covering `epoch`. `shared` tells whether this caller joined another's read.
    ///
    /// - Parameter reuseFinished: whether a finished read may serve; not while commits may go unsignalled
    ///   (the hub's LISTEN connection is down), since epochs then stop telling what a read may have missed.
    func read(
        _ key: Key, epoch: ScopeEpoch, reuseFinished: Bool = true,
        _ read: @escaping @Sendable () async throws -> PullService.Page
    ) async throws -> (page: PullService.Page, shared: Bool) {
        let now = ContinuousClock.now
        let (flight, owner) = state.withLock { state -> (Flight, Bool) in
            if let flight = state.flights[key], flight.epoch.covers(epoch),
                flight.finished.map({ reuseFinished && now - $0 < retention }) ?? true
            {
                state.shared += 1
                return (flight, false)
            }
            state.nextID += 1
            if state.flights.count >= max(capacity, state.pruneAt) {
                Self.prune(&state.flights, now: now, retention: retention, keep: capacity / 2)
                state.pruneAt = state.flights.count + capacity
                state.prunes += 1
            }
            let flight = Flight(
                epoch: epoch, id: state.nextID,
                task: Task(executorPreference: LoopExecutors.singleton.current) { try await read() },
                finished: nil)
            state.flights[key] = flight
            return (flight, true)
        }
        // Only the reads of woken long-polls (no replica, nothing recorded) are kept: a plain pull reads
        // what is in the database when it arrives, even what changed there without a commit signalled
        // (compaction, an operator's repair).
        let keep = key.replica == nil && !key.record
        do {
            let page = try await flight.task.value
            if owner {
                let finished = ContinuousClock.now
                state.withLock { state in
                    guard state.flights[key]?.id == flight.id else { return }
                    if keep { state.flights[key]?.finished = finished } else { state.flights[key] = nil }
                }
            }
            return (page, !owner)
        } catch {
            if owner {
                state.withLock { state in
                    if state.flights[key]?.id == flight.id { state.flights[key] = nil }
                }
            }
            throw error
        }
    }

    /// Drops finished reads past their retention, and the oldest of the others but the newest `keep`.
    private static func prune(
        _ flights: inout [Key: Flight], now: ContinuousClock.Instant, retention: Duration, keep: Int
    ) {
        var finished: [(key: Key, at: ContinuousClock.Instant)] = []
        var expired: [Key] = []
        for (key, flight) in flights {
            guard let at = flight.finished else { continue }
            if now - at < retention { finished.append((key, at)) } else { expired.append(key) }
        }
        for key in expired { flights[key] = nil }
        guard finished.count > keep else { return }
        finished.sort { $0.at < $1.at }
        for (key, _) in finished.prefix(finished.count - keep) { flights[key] = nil }
    }
}

/// A page's answer bodies, built once for everyone the page goes to unchanged: one per `Accept-Encoding`
/// value asked with (the body is gzip-compressed or not accordingly).
final class SharedBody: Sendable {
    /// The bytes as sent, their coding, and their size before it.
    typealias Encoded = (bytes: ByteBuffer, coding: ContentCoding, raw: Int)
    private let bodies = Mutex<[String: Task<Encoded, Never>]>([:])

    /// The body for `acceptEncoding`, built by `build` by the first caller that asks.
    func body(acceptEncoding: String, build: @escaping @Sendable () -> Encoded) async -> Encoded {
        let task = bodies.withLock { bodies in
            if let task = bodies[acceptEncoding] { return task }
            let task = Task { build() }
            bodies[acceptEncoding] = task
            return task
        }
        return await task.value
    }
}
