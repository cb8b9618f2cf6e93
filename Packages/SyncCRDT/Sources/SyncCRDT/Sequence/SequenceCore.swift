import SyncModels

/// Everything a sequence CRDT keeps that does not depend on its element type: the document-order tree of
/// runs, the replica table, the dots seen, and the history. `FugueList` adds the elements' content.
///
/// Keeping this part non-generic lets the compiler optimize it once, whatever module uses the list.
@usableFromInline
struct SequenceCore: Sendable {
    var tree = RunTree()
    var replicas: [ReplicaID] = []
    var agents: [ReplicaID: Int] = [:]
    /// Counters seen per agent: inserted and deleted elements alike.
    var seen: [DotRanges] = []
    /// Operations in the order they were applied here (a causal order), run-length encoded.
    var log: [LogEntry] = []
    /// The stable version of the last compaction: operations up to it are folded into the tree, not the log.
    var compactedVersion = VersionVector()
    /// Where the last local edit happened, so the next one nearby can skip the descent from the root.
    var cursorCache = CursorCache()
    /// The agent of the last replica looked up (local typing repeats it).
    var lastReplica: ReplicaID?
    var lastAgent = 0
    /// Received operations refused as invalid (counters out of range).
    var rejectedCount = 0

    /// How far past the highest counter seen from a replica an operation may start: counters index dense
    /// per-replica tables, so a far-off counter is refused rather than allowed to allocate without bound.
    static let maximumCounterGap: UInt64 = 1 << 24

    @usableFromInline
    init() {}

    /// Up to this many replicas, `knownAgent` scans the replica table: comparing a few 16-byte ids costs
    /// less than hashing one, and a list rarely has more editors than this.
    static let scannedReplicaCount = 8

    /// The agent of a replica already in the table, nil for a new one. `replicas` and `agents` always change
    /// together (`agent(for:)`), so the scan and the dictionary agree.
    @inline(__always)
    func knownAgent(_ replica: ReplicaID) -> Int? {
        guard replicas.count <= Self.scannedReplicaCount else { return agents[replica] }
        for agent in replicas.indices where replicas[agent] == replica { return agent }
        return nil
    }

    @usableFromInline
    mutating func agent(for replica: ReplicaID) -> Int {
        if replica == lastReplica { return lastAgent }
        let agent: Int
        if let known = knownAgent(replica) {
            agent = known
        } else {
            agent = replicas.count
            replicas.append(replica)
            agents[replica] = agent
            seen.append(DotRanges())
        }
        lastReplica = replica
        lastAgent = agent
        return agent
    }

    func dot(_ item: ItemID) -> Dot { Dot(replica: replicas[item.agent], counter: item.counter) }

    func optionalDot(_ item: ItemID) -> Dot? { item.isNone ? nil : dot(item) }

    /// The internal id of `dot` if its replica is known.
    func item(_ dot: Dot) -> ItemID? {
        knownAgent(dot.replica).map { ItemID(agent: $0, counter: dot.counter) }
    }

    /// Whether `count` counters from `dot` are valid and not absurdly far ahead of what was seen from its
    /// replica.
    func isPlausible(_ dot: Dot, count: UInt64) -> Bool {
        let last = knownAgent(dot.replica).map { seen[$0].last } ?? 0
        return dot.counter >= 1 && dot.counter <= ItemID.maxCounter && count <= ItemID.maxCounter - dot.counter
            && dot.counter <= last + Self.maximumCounterGap
    }

    /// The counter a new local edit of `agent` takes (its own edits are contiguous).
    func nextCounter(_ agent: Int) -> UInt64 { seen[agent].last + 1 }

    /// Every dot seen, as a causal context.
    var version: CausalContext {
        var dots: [Dot] = []
        var vector = VersionVector()
        for (agent, ranges) in seen.enumerated() {
            let replica = replicas[agent]
            vector[replica] = ranges.contiguous
            for range in ranges.ranges where range.lowerBound > ranges.contiguous + 1 {
                for counter in range { dots.append(Dot(replica: replica, counter: counter)) }
            }
        }
        return CausalContext(versionVector: vector, dots: dots)
    }

    /// Bytes held by the arrays of this core (capacities times strides).
    var memoryFootprint: Int {
        tree.memoryFootprint + log.capacity * MemoryLayout<LogEntry>.stride
            + seen.reduce(seen.capacity * MemoryLayout<DotRanges>.stride) {
                $0 + $1.ranges.capacity * MemoryLayout<Range<UInt64>>.stride
            } + replicas.capacity * MemoryLayout<ReplicaID>.stride
    }

    /// The visible position of element `item`, or nil if it is deleted or not in the tree.
    func visiblePosition(of item: ItemID) -> Int? {
        guard tree.contains(item) else { return nil }
        let cursor = tree.find(item)
        guard !tree[cursor.leaf, cursor.run].isDeleted else { return nil }
        var position = tree.visibleStart(ofLeaf: cursor.leaf) + cursor.offset
        for index in 0..<cursor.run { position += tree[cursor.leaf, index].visibleCount }
        return position
    }
}

/// Where the last local edit happened, so the next one nearby can skip the descent from the root.
struct CursorCache: Sendable {
    var leaf = -1
    var leafStart = 0
}

/// One entry of a list's history: a run of inserts or deletes with consecutive counters.
struct LogEntry: Sendable {
    enum Kind: UInt8, Sendable {
        case insert
        case delete
    }

    var kind: Kind
    /// Made here with a position (encoded positionally) rather than received.
    var isLocal: Bool
    /// For deletes: the k-th counter deleted `target - k` rather than `target + k`.
    var isReversed: Bool
    var id: ItemID
    var length: Int32
    /// Insert: the left origin of the first element. Delete: the first target.
    var target: ItemID
    /// Insert: the right parent of the first element.
    var rightParent: ItemID
    /// Local edits: the visible position they were made at.
    var position: Int

    var count: Int { Int(length) }
}
