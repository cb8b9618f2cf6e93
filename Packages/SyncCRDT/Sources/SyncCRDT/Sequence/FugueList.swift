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
    @usableFromInline var core = SequenceCore()
    /// The elements' content, in the order it arrived; runs point into it.
    @usableFromInline var contents: ContiguousArray<Element> = []
    /// Operations waiting for an element they refer to.
    var pending: [Operation] = []

    /// The empty list.
    public init() {}

    /// The number of visible elements.
    public var count: Int { core.tree.visibleCount }

    /// Whether there are no visible elements.
    public var isEmpty: Bool { core.tree.visibleCount == 0 }

    /// The visible elements in order.
    public var elements: [Element] {
        @_specialize(exported:true,where Element == String)
        get { visibleElements() }
    }

    private func visibleElements() -> [Element] {
        var result: [Element] = []
        result.reserveCapacity(count)
        core.tree.forEachRun { run in
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
        let (cursor, _) = core.tree.findVisible(position)
        return contents[Int(core.tree[cursor.leaf, cursor.run].contentOffset) + cursor.offset]
    }

    /// The id of the visible element at `position`: a stable reference that survives concurrent edits.
    public func id(at position: Int) -> Dot {
        precondition(position >= 0 && position < count, "position out of range")
        let (cursor, _) = core.tree.findVisible(position)
        return core.dot(core.tree[cursor.leaf, cursor.run].id.advanced(by: cursor.offset))
    }

    /// The visible position of the element `id`, or nil if it is deleted or unknown.
    public func position(of id: Dot) -> Int? {
        core.item(id).flatMap { core.visiblePosition(of: $0) }
    }

    /// Whether the list holds the element `id`, visible or as a tombstone: whether an operation anchored on it
    /// (an insertion's origin, a deletion's target) can be placed here. False for unknown ids and for
    /// tombstones compaction dropped.
    public func holds(_ id: Dot) -> Bool {
        core.item(id).map { core.tree.contains($0) } ?? false
    }

    /// Every dot this list has seen (inserted and deleted elements).
    public var version: CausalContext { core.version }

    /// The number of remote operations waiting for an element they refer to.
    public var pendingCount: Int { pending.count }

    /// Elements in the document, tombstones included.
    public var totalCount: Int { core.tree.totalCount }

    /// Runs in the document, tombstones included: the size of the in-memory layout.
    public var runCount: Int { core.tree.runCount }

    /// Received operations refused as invalid (a counter out of range, or more than 2²⁴ past the highest
    /// counter seen from its replica); they are dropped, not applied.
    public var rejectedCount: Int { core.rejectedCount }

    /// Approximate bytes this list holds in memory: its arrays' capacities times their strides (elements
    /// stored inline; heap storage an element owns itself, such as a long `String`'s, is not counted).
    public var memoryFootprint: Int {
        core.memoryFootprint + contents.capacity * MemoryLayout<Element>.stride
            + pending.capacity * MemoryLayout<Operation>.stride
    }

    /// Entries in the history (runs of consecutive operations).
    public var historyCount: Int { core.log.count }
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
