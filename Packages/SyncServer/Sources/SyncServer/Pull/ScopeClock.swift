import SyncModels

/// How far a set of scopes had been signalled when a read began: one count per scope (in the order the
/// scopes were asked for) and the count of signals to every scope. A read that began at an epoch covering
/// a caller's saw every commit signalled up to the caller's epoch (signals follow commits).
struct ScopeEpoch: Sendable, Hashable {
    var generation: Int
    var versions: [Int]

    /// Whether a read at `self` saw everything a read at `other` (of the same scopes) would.
    func covers(_ other: ScopeEpoch) -> Bool {
        guard generation >= other.generation, versions.count == other.versions.count else { return false }
        return zip(versions, other.versions).allSatisfy { $0 >= $1 }
    }
}

/// Per scope, the signals so far and the head the last read found, while no signal has come since.
///
/// This is what lets a long-poll that is already at the head wait without reading the database: when the
/// head a read found is still the newest the server knows of (no commit signalled in the scope since that
/// read began) and the poll's cursor is at it, there is nothing to read. A commit signalled later wakes the
/// poll, because the poll registers with the hub before it looks here. Pure state, tested without tasks.
struct ScopeClock {
    private var generation = 0
    private var versions: [Scope: Int] = [:]
    /// The highest head signalled per scope (`noteSignalled`).
    private var signalledHeads: [Scope: Int64] = [:]
    /// Cleared whole by `signalAll`, so an entry is always of the current generation.
    private var heads: [Scope: (head: Int64, version: Int, at: ContinuousClock.Instant)] = [:]

    /// The epoch of `scopes`, in their order.
    func epoch(_ scopes: [Scope]) -> ScopeEpoch {
        ScopeEpoch(generation: generation, versions: scopes.map { versions[$0] ?? 0 })
    }

    /// A commit in `scopes` was signalled: heads known for them are stale.
    mutating func signal(_ scopes: some Sequence<Scope>) {
        for scope in scopes {
            versions[scope, default: 0] += 1
            heads[scope] = nil
        }
    }

    /// Records that a commit reaching `head` in `scope` is being signalled; false when one reaching it or a
    /// later head was already (every commit up to a head is visible once a commit reaching it is: a scope's
    /// seqs commit in order).
    @discardableResult
    mutating func noteSignalled(_ scope: Scope, head: Int64) -> Bool {
        guard head > (signalledHeads[scope] ?? 0) else { return false }
        signalledHeads[scope] = head
        return true
    }

    /// Commits may have been missed (the LISTEN connection dropped): nothing known holds.
    mutating func signalAll() {
        generation += 1
        heads.removeAll(keepingCapacity: true)
    }

    /// A read that began at `epoch` found `found` as the heads of `scopes` (a scope without a row has head
    /// 0). Kept for the scopes that no signal reached since the read began.
    mutating func learn(_ found: [Scope: Int64], of scopes: [Scope], at epoch: ScopeEpoch, now: ContinuousClock.Instant)
    {
        guard epoch.generation == generation, epoch.versions.count == scopes.count else { return }
        for (scope, version) in zip(scopes, epoch.versions) where (versions[scope] ?? 0) == version {
            let head = found[scope] ?? 0
            // Reads that overlap may finish out of order; the higher head of one epoch is the newer read.
            if let known = heads[scope], known.version == version, known.head >= head { continue }
            heads[scope] = (head, version, now)
        }
    }

    /// The heads of `scopes` when every one is known and was read less than `maxAge` before `now`.
    func knownHeads(_ scopes: [Scope], maxAge: Duration, now: ContinuousClock.Instant) -> [Scope: Int64]? {
        var found: [Scope: Int64] = [:]
        for scope in scopes {
            guard let known = heads[scope], now - known.at < maxAge else { return nil }
            found[scope] = known.head
        }
        return found
    }

    /// How many scopes have a known head (for tests and metrics).
    var knownCount: Int { heads.count }
}
