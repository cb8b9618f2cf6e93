import SyncModels

/// The pure state of the long-poll waiters: who waits for which scopes, and who must be woken.
///
/// A waiter registers before it re-reads the database and only then waits, so a signal that arrives in
/// between is remembered (`pending`) and the wait returns at once: no commit can slip between the last
/// read and the wait unnoticed. Signals are hints; a woken waiter always re-reads.
/// Generic over the continuation type so that it is tested without tasks.
struct LongPollState<Continuation> {
    struct Waiter {
        var scopes: Set<Scope>
        var pending = false
        var continuation: Continuation?
    }

    enum WaitAction {
        /// A signal already arrived (or the hub is closed): do not suspend.
        case resumeNow
        /// Suspended until a signal, a timeout or cancellation resumes the continuation.
        case suspended
    }

    private(set) var waiters: [Int: Waiter] = [:]
    /// The waiters of each scope, so that a signal costs the waiters of its scopes, not all of them.
    private var byScope: [Scope: Set<Int>] = [:]
    private(set) var closed = false
    /// Waiters suspended now (holding a continuation).
    private(set) var parked = 0
    private var nextID = 0

    /// Registers a waiter for `scopes`; nil once the hub is closed (shutting down).
    mutating func register(_ scopes: Set<Scope>) -> Int? {
        guard !closed else { return nil }
        nextID += 1
        waiters[nextID] = Waiter(scopes: scopes)
        for scope in scopes { byScope[scope, default: []].insert(nextID) }
        return nextID
    }

    /// Removes a waiter; returns its continuation if it was suspended (to resume).
    mutating func unregister(_ id: Int) -> Continuation? {
        guard let waiter = waiters.removeValue(forKey: id) else { return nil }
        for scope in waiter.scopes {
            byScope[scope]?.remove(id)
            if byScope[scope]?.isEmpty == true { byScope[scope] = nil }
        }
        if waiter.continuation != nil { parked -= 1 }
        return waiter.continuation
    }

    /// Suspends `id` with `continuation` unless a signal is pending or the hub is closed.
    mutating func wait(_ id: Int, _ continuation: Continuation) -> WaitAction {
        guard !closed, var waiter = waiters[id] else { return .resumeNow }
        if waiter.pending {
            waiter.pending = false
            waiters[id] = waiter
            return .resumeNow
        }
        waiter.continuation = continuation
        waiters[id] = waiter
        parked += 1
        return .suspended
    }

    /// Takes back a suspended waiter's continuation (its timeout passed or it was cancelled). A waiter that
    /// has not suspended yet is marked so that its `wait` returns at once: the timeout or the cancellation
    /// came first, and nothing would resume it afterwards (the long-poll would hang with no deadline left).
    mutating func stopWaiting(_ id: Int) -> Continuation? {
        guard var waiter = waiters[id] else { return nil }
        guard let continuation = waiter.continuation else {
            waiter.pending = true
            waiters[id] = waiter
            return nil
        }
        waiter.continuation = nil
        waiters[id] = waiter
        parked -= 1
        return continuation
    }

    /// Events were committed in `scopes`: returns the continuations to resume; waiters of those scopes
    /// that are not suspended yet remember the signal.
    mutating func signal(_ scopes: some Sequence<Scope>) -> [Continuation] {
        var ids = Set<Int>()
        for scope in Set(scopes) { ids.formUnion(byScope[scope] ?? []) }
        var woken: [Continuation] = []
        for id in ids {
            guard var waiter = waiters[id] else { continue }
            if let continuation = waiter.continuation {
                woken.append(continuation)
                waiter.continuation = nil
            } else {
                waiter.pending = true
            }
            waiters[id] = waiter
        }
        parked -= woken.count
        return woken
    }

    /// Wakes every waiter (after missing notifications, e.g. when the LISTEN connection was re-established).
    mutating func signalAll() -> [Continuation] {
        signal(Array(byScope.keys))
    }

    /// Shutting down: wakes everyone and refuses new waiters.
    mutating func close() -> [Continuation] {
        closed = true
        var woken: [Continuation] = []
        for (id, var waiter) in waiters {
            if let continuation = waiter.continuation { woken.append(continuation) }
            waiter.continuation = nil
            waiter.pending = true
            waiters[id] = waiter
        }
        parked -= woken.count
        return woken
    }
}
