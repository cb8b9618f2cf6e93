import SyncModels
import Synchronization

/// Request collapsing for pulls: identical reads that run at the same time share one database read. When a
/// push wakes the long-polls of every device of a scope, those at the same cursor (all that were caught up)
/// re-read the same page; with this, PostgreSQL serves it once.
///
/// A read may be shared only with callers it cannot leave behind: one that started at or after the
/// caller's epoch (`LongPollHub.epoch`, taken before the caller reads). Every commit signalled by then is
/// visible to it, so a caller woken by a signal never joins a read that began before that signal.
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
        var epoch: Int
        var id: Int
        var task: Task<PullService.Page, any Error>
    }

    private struct State {
        var flights: [Key: Flight] = [:]
        var nextID = 0
        var shared = 0
    }
    private let state = Mutex(State())

    /// Reads that joined another's read instead of their own.
    var sharedReads: Int { state.withLock { $0.shared } }

    /// The result of `read`, or of an identical read in flight that started at or after `epoch`.
    func read(
        _ key: Key, epoch: Int, _ read: @escaping @Sendable () async throws -> PullService.Page
    ) async throws -> PullService.Page {
        let (flight, owner) = state.withLock { state -> (Flight, Bool) in
            if let flight = state.flights[key], flight.epoch >= epoch {
                state.shared += 1
                return (flight, false)
            }
            state.nextID += 1
            let flight = Flight(epoch: epoch, id: state.nextID, task: Task { try await read() })
            state.flights[key] = flight
            return (flight, true)
        }
        defer {
            if owner {
                state.withLock { state in
                    if state.flights[key]?.id == flight.id { state.flights[key] = nil }
                }
            }
        }
        return try await flight.task.value
    }
}
