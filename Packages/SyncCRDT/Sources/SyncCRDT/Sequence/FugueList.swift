import SyncModels

/// A list CRDT with FugueMax ordering (Weidner & Kleppmann, "The Art of the Fugue"): runs of elements inserted
/// concurrently at the same place never interleave, and ties between concurrent siblings are broken by replica
/// id. Use it for checklists (elements are item ids) and, as `FugueText`, for text (elements are Unicode
/// scalars).
///
/// Every element has an id (replica, counter), a left origin (the visible element to its left when it was
/// inserted) and a right parent (the next element if that one shares its left origin). Deletes leave
/// tombstones, which keep anchoring concurrent inserts until `compact(stableAt:)` proves them useless.
///
/// Elements are stored as runs (consecutive inserts by one replica merge into one run) in a counted B+ tree, so
/// a local edit costs O(log n) and replaying a long editing history takes milliseconds. Each replica takes one
/// counter per inserted element and one per deleted element; counters must stay below 2⁴⁰.
///
/// Local edits return operations to ship; `apply(_:)` takes remote ones in any order, any number of times
/// (operations whose anchors have not arrived yet wait in `pendingCount`). `merge(_:)` joins whole states and
/// `operations(since:)` gives the delta another replica is missing.
public struct FugueList<Element: Sendable & Hashable>: Sendable {
    var tree = RunTree()
    var contents: ContiguousArray<Element> = []
    var replicas: [ReplicaID] = []
    var agents: [ReplicaID: Int] = [:]
    /// Counters seen per agent: inserted and deleted elements alike.
    var seen: [DotRanges] = []
    /// Operations in the order they were applied here (a causal order), run-length encoded.
    var log: [LogEntry] = []
    /// Operations waiting for an element they refer to.
    var pending: [Operation] = []
    /// The stable version of the last compaction: operations up to it are folded into the tree, not the log.
    var compactedVersion = VersionVector()
    /// The last local edit's leaf and its visible start, to skip the tree descent for nearby edits.
    var cursorCache = CursorCache()

    /// The empty list.
    public init() {}

    /// The number of visible elements.
    public var count: Int { tree.visibleCount }

    /// Whether there are no visible elements.
    public var isEmpty: Bool { tree.visibleCount == 0 }

    /// The visible elements in order.
    public var elements: [Element] {
        var result: [Element] = []
        result.reserveCapacity(count)
        tree.forEachRun { run in
            if !run.isDeleted {
                let start = Int(run.contentOffset)
                result.append(contentsOf: contents[start..<start + run.count])
            }
        }
        return result
    }

    /// The visible element at `position`.
    public subscript(position: Int) -> Element {
        precondition(position >= 0 && position < count, "position out of range")
        let (cursor, _) = tree.findVisible(position)
        return contents[Int(tree[cursor.leaf, cursor.run].contentOffset) + cursor.offset]
    }

    /// The id of the visible element at `position`: a stable reference that survives concurrent edits.
    public func id(at position: Int) -> Dot {
        precondition(position >= 0 && position < count, "position out of range")
        let (cursor, _) = tree.findVisible(position)
        return dot(tree[cursor.leaf, cursor.run].id.advanced(by: cursor.offset))
    }

    /// The visible position of the element `id`, or nil if it is deleted or unknown.
    public func position(of id: Dot) -> Int? {
        guard let agent = agents[id.replica] else { return nil }
        let item = ItemID(agent: agent, counter: id.counter)
        guard tree.contains(item) else { return nil }
        let cursor = tree.find(item)
        let run = tree[cursor.leaf, cursor.run]
        guard !run.isDeleted else { return nil }
        var position = tree.visibleStart(ofLeaf: cursor.leaf) + cursor.offset
        for index in 0..<cursor.run { position += tree[cursor.leaf, index].visibleCount }
        return position
    }

    /// Every dot this list has seen (inserted and deleted elements).
    public var version: CausalContext {
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

    /// The number of remote operations waiting for an element they refer to.
    public var pendingCount: Int { pending.count }

    /// Elements in the document, tombstones included.
    public var totalCount: Int { tree.totalCount }

    /// Runs in the document, tombstones included: the size of the in-memory layout.
    public var runCount: Int { tree.runCount }

    // MARK: Internal helpers

    func dot(_ item: ItemID) -> Dot { Dot(replica: replicas[item.agent], counter: item.counter) }

    func optionalDot(_ item: ItemID) -> Dot? { item.isNone ? nil : dot(item) }

    mutating func agent(for replica: ReplicaID) -> Int {
        if let agent = agents[replica] { return agent }
        let agent = replicas.count
        replicas.append(replica)
        agents[replica] = agent
        seen.append(DotRanges())
        return agent
    }

    /// The internal id of `dot` if its replica is known.
    func item(_ dot: Dot) -> ItemID? {
        agents[dot.replica].map { ItemID(agent: $0, counter: dot.counter) }
    }

    func isSeen(_ item: ItemID) -> Bool {
        item.agent < seen.count && seen[item.agent].contains(item.counter)
    }
}

/// Where the last local edit happened, so the next one nearby can skip the descent from the root.
struct CursorCache {
    var leaf = -1
    var leafStart = 0
}

/// A range of consecutive dots of one replica.
public struct DotRange: Hashable, Sendable, Codable, CustomStringConvertible {
    public var replica: ReplicaID
    /// The first counter.
    public var first: UInt64
    public var count: UInt64

    public init(replica: ReplicaID, first: UInt64, count: UInt64) {
        self.replica = replica
        self.first = first
        self.count = count
    }

    public var description: String { "\(replica)@\(first)+\(count)" }
}

extension FugueList {
    /// Inserts a run of elements: the first has id `id` and the given origins, each next one the next counter
    /// and the previous element as left origin.
    public struct Insertion: Hashable, Sendable {
        public var id: Dot
        public var count: Int
        /// The elements, or nil when their content was dropped by compaction (they are all deleted).
        public var elements: [Element]?
        public var originLeft: Dot?
        public var rightParent: Dot?

        public init(id: Dot, elements: [Element], originLeft: Dot?, rightParent: Dot?) {
            self.id = id
            self.count = elements.count
            self.elements = elements
            self.originLeft = originLeft
            self.rightParent = rightParent
        }

        init(id: Dot, count: Int, elements: [Element]?, originLeft: Dot?, rightParent: Dot?) {
            self.id = id
            self.count = count
            self.elements = elements
            self.originLeft = originLeft
            self.rightParent = rightParent
        }
    }

    /// Deletes elements; the deletion itself takes one counter per target, from `id` on.
    public struct Deletion: Hashable, Sendable {
        public var id: Dot
        public var targets: [DotRange]

        public init(id: Dot, targets: [DotRange]) {
            self.id = id
            self.targets = targets
        }

        /// The number of elements deleted (and of counters taken).
        public var count: Int { targets.reduce(0) { $0 + Int($1.count) } }
    }

    /// An operation on a list: what local edits return and `apply(_:)` takes.
    public enum Operation: Hashable, Sendable {
        case insert(Insertion)
        case delete(Deletion)
    }
}

/// One entry of a list's history: a run of inserts or deletes with consecutive counters.
struct LogEntry {
    enum Kind: UInt8 {
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
