import Foundation
import Synchronization

/// What changed in the store, published after each commit.
public struct StoreChange: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case appended, confirmed, rejected, rebuilt, pruned, imported
        /// Buffered projection records were written (`EventStore.flushProjections`): the streams' rows in the
        /// projections' tables changed, with no new event.
        case projected
    }
    public var kind: Kind
    /// The streams whose events changed (empty for a rebuild: everything may have).
    public var streams: Set<String>
    /// The projections whose state may differ now.
    public var projections: Set<String>
}

/// Fans store changes out to any number of async-sequence subscribers.
final class ChangeBroadcaster: Sendable {
    private let subscribers = Mutex<[UUID: AsyncStream<StoreChange>.Continuation]>([:])

    func subscribe() -> AsyncStream<StoreChange> {
        let (stream, continuation) = AsyncStream<StoreChange>.makeStream(bufferingPolicy: .bufferingNewest(256))
        let id = UUID()
        subscribers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ change: StoreChange) {
        for continuation in subscribers.withLock({ Array($0.values) }) {
            continuation.yield(change)
        }
    }
}
