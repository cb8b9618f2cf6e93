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
        /// When a suspended wait ends without a signal (`expire`).
        var deadline: ContinuousClock.Instant?
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
    private var nextID = 0
    /// The deadlines of suspended waits, earliest first. One task (`expire`) ends them all, instead of a
    /// timer and a task group per waiter: ten thousand waiters woken by one push then cost ten thousand
    /// resumptions, not thirty thousand task switches and as many timers cancelled. Entries whose waiter
    /// was woken, left or waits again are skipped when they come up.
    private var deadlines = DeadlineHeap()
    /// Whether a task is ending deadlines: one runs while any wait with a deadline is suspended.
    private(set) var expiring = false

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
        return waiter.continuation
    }

    /// Suspends `id` with `continuation` unless a signal is pending or the hub is closed; with a `deadline`,
    /// `expire` resumes it then if nothing else did.
    mutating func wait(_ id: Int, _ continuation: Continuation, deadline: ContinuousClock.Instant? = nil)
        -> WaitAction
    {
        guard !closed, var waiter = waiters[id] else { return .resumeNow }
        if waiter.pending {
            waiter.pending = false
            waiters[id] = waiter
            return .resumeNow
        }
        waiter.continuation = continuation
        waiter.deadline = deadline
        waiters[id] = waiter
        if let deadline { deadlines.push(deadline, id) }
        return .suspended
    }

    /// True once when a task must start ending deadlines (`expire`): some are pending and none runs.
    mutating func claimExpiring() -> Bool {
        guard !expiring, !deadlines.isEmpty else { return false }
        expiring = true
        return true
    }

    /// Ends the suspended waits whose deadline is at or before `now`: returns their continuations, and the
    /// next deadline to look at, or nil when none is left (the expiring task stops; `claimExpiring` starts
    /// another).
    mutating func expire(now: ContinuousClock.Instant) -> (woken: [Continuation], next: ContinuousClock.Instant?) {
        var woken: [Continuation] = []
        while let (deadline, id) = deadlines.first {
            let waiter = waiters[id]
            let current = waiter?.continuation != nil && waiter?.deadline == deadline
            guard !current || deadline <= now else { break }
            deadlines.pop()
            if current, var waiter, let continuation = waiter.continuation {
                waiter.continuation = nil
                waiter.deadline = nil
                waiters[id] = waiter
                woken.append(continuation)
            }
        }
        guard let next = deadlines.first?.deadline else {
            expiring = false
            return (woken, nil)
        }
        return (woken, next)
    }

    /// Takes back a suspended waiter's continuation (it was cancelled). A waiter cancelled before it
    /// suspended finds the signal pending, so that it does not suspend after all.
    mutating func stopWaiting(_ id: Int) -> Continuation? {
        guard var waiter = waiters[id] else { return nil }
        guard let continuation = waiter.continuation else {
            waiter.pending = true
            waiters[id] = waiter
            return nil
        }
        waiter.continuation = nil
        waiters[id] = waiter
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
        return woken
    }

    /// Wakes every waiter (after missing notifications, e.g. when the LISTEN connection was re-established).
    mutating func signalAll() -> [Continuation] {
        signal(Array(byScope.keys))
    }

    /// Shutting down: wakes everyone and refuses new waiters.
    mutating func close() -> [Continuation] {
        closed = true
        deadlines = DeadlineHeap()
        var woken: [Continuation] = []
        for (id, var waiter) in waiters {
            if let continuation = waiter.continuation { woken.append(continuation) }
            waiter.continuation = nil
            waiter.pending = true
            waiters[id] = waiter
        }
        return woken
    }
}

/// A binary min-heap of (deadline, waiter id).
struct DeadlineHeap {
    private var entries: [(deadline: ContinuousClock.Instant, id: Int)] = []

    var isEmpty: Bool { entries.isEmpty }
    var count: Int { entries.count }
    var first: (deadline: ContinuousClock.Instant, id: Int)? { entries.first }

    mutating func push(_ deadline: ContinuousClock.Instant, _ id: Int) {
        entries.append((deadline, id))
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].deadline < entries[parent].deadline else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() {
        guard !entries.isEmpty else { return }
        entries.swapAt(0, entries.count - 1)
        entries.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < entries.count, entries[left].deadline < entries[smallest].deadline { smallest = left }
            if right < entries.count, entries[right].deadline < entries[smallest].deadline { smallest = right }
            guard smallest != parent else { return }
            entries.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
