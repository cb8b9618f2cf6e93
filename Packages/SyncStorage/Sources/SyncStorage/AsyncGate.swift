import Synchronization

/// At most `permits` bodies at once; the others wait as suspended tasks, in arrival order, holding no thread.
///
/// ```swift
/// let opening = AsyncGate(permits: 1)
/// let database = try await opening.run { try SyncDatabase(path: path) }
/// ```
///
/// `SyncDatabase.read` passes through one sized to the reader pool. GRDB's async `read` takes a reader
/// from its pool by waiting on a semaphore on one of Dispatch's threads: with more reads in flight than
/// readers, that thread blocks until a reader is released, and the read that would release it needs a
/// Dispatch thread of its own to run. A process with hundreds of databases (a load generator, a server
/// holding a file per tenant) can then have every one of Dispatch's threads blocked in those waits, and
/// nothing runs again. Behind the gate, a read reaches GRDB only when a reader is free, so it never waits
/// on a thread.
public final class AsyncGate: Sendable {
    private struct State {
        var available: Int
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextID: UInt64 = 0
    }
    private let state: Mutex<State>

    public init(permits: Int) {
        precondition(permits > 0, "a gate needs at least one permit")
        state = Mutex(State(available: permits))
    }

    /// Runs `body` once a permit is free, and frees it after.
    /// - Throws: `CancellationError` if the task is cancelled while it waits, or what `body` throws.
    public func run<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async throws {
        let id = state.withLock { state -> UInt64? in
            if state.available > 0 {
                state.available -= 1
                return nil
            }
            state.nextID += 1
            return state.nextID
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = state.withLock { state -> Bool in
                    if Task.isCancelled { return true }
                    state.waiters.append((id, continuation))
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Hands the permit to the longest waiter, or makes it available.
    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            if state.waiters.isEmpty {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume()
    }
}
