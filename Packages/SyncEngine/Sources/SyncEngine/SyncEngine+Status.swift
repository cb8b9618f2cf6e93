import Foundation
import SyncEventStore

/// The engine's status: read, broadcast to subscribers, and changed.
extension SyncEngine {
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

    /// `updateStatus` without reading the store's counts: for changes made where no `await` may be.
    func updateStatusNow(_ change: (inout EngineStatus) -> Void) {
        let snapshot = state.withLock { status -> EngineStatus in
            change(&status)
            return status
        }
        for continuation in statusBroadcast.withLock({ Array($0.values) }) { continuation.yield(snapshot) }
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
