import SyncModels
import Synchronization

/// Remembers when each replica was last recorded as active in each scope, so a busy replica costs one
/// `replica_progress` write a minute per scope rather than one per push.
final class ReplicaSightings: Sendable {
    private struct Key: Hashable {
        var replica: ReplicaID
        var scope: Scope
    }

    private let interval: Duration
    private let seen = Mutex([Key: ContinuousClock.Instant]())

    init(interval: Duration = .seconds(60)) {
        self.interval = interval
    }

    /// The scopes in which `replica` is due to be recorded now; marks them recorded.
    func due(replica: ReplicaID, scopes: [Scope], now: ContinuousClock.Instant = .now) -> [Scope] {
        seen.withLock { seen in
            if seen.count > 100_000 { seen.removeAll(keepingCapacity: true) }
            return scopes.filter { scope in
                let key = Key(replica: replica, scope: scope)
                if let last = seen[key], now - last < interval { return false }
                seen[key] = now
                return true
            }
        }
    }
}
