/// The identity of one element of a sequence inside one document: an agent (an index into the document's
/// replica table) and that agent's counter, packed in 64 bits.
///
/// Counters of a replica are contiguous per document: each inserted element and each deleted element takes one.
struct ItemID: Hashable, Comparable, Sendable {
    static let counterBits: UInt64 = 40
    static let counterMask: UInt64 = (1 << counterBits) - 1
    /// The largest counter an element can have.
    static let maxCounter: UInt64 = counterMask - 1
    /// No element: the start of the document as a left origin, or "no right parent".
    static let none = ItemID(raw: .max)

    var raw: UInt64

    init(raw: UInt64) { self.raw = raw }

    init(agent: Int, counter: UInt64) {
        raw = UInt64(agent) << Self.counterBits | counter
    }

    var agent: Int { Int(truncatingIfNeeded: raw >> Self.counterBits) }
    var counter: UInt64 { raw & Self.counterMask }
    var isNone: Bool { raw == .max }

    /// The element `offset` places after this one in the same agent's run.
    func advanced(by offset: Int) -> ItemID { ItemID(raw: raw &+ UInt64(truncatingIfNeeded: offset)) }

    static func < (lhs: ItemID, rhs: ItemID) -> Bool { lhs.raw < rhs.raw }
}

/// A run of elements inserted one after the other by one agent: consecutive counters, each element's left
/// origin the element before it, and no right parent after the first. Only the first element's origins are
/// stored. Runs are the unit of the tree; they split when an edit lands inside them.
struct Run: Sendable {
    /// The first element.
    var id: ItemID
    /// Its left origin (`.none`: the start of the document).
    var originLeft: ItemID
    /// Its right parent (`.none`: the end of the document, i.e. a right child of its left origin).
    var rightParent: ItemID
    /// The number of elements.
    var length: Int32
    /// Where the elements' content starts in the document's content store; -1 once dropped (tombstones only).
    var contentOffset: Int32
    /// Whether the elements are deleted (tombstones).
    var isDeleted: Bool

    var count: Int { Int(length) }
    var visibleCount: Int { isDeleted ? 0 : Int(length) }
    var lastID: ItemID { id.advanced(by: count - 1) }

    /// Whether `item` is one of this run's elements.
    func contains(_ item: ItemID) -> Bool {
        item.raw >= id.raw && item.raw < id.raw &+ UInt64(length)
    }

    /// Left origin of the element at `offset`.
    func originLeft(at offset: Int) -> ItemID { offset == 0 ? originLeft : id.advanced(by: offset - 1) }

    /// Right parent of the element at `offset`.
    func rightParent(at offset: Int) -> ItemID { offset == 0 ? rightParent : .none }

    /// The elements from `offset` on, as a run of their own.
    func suffix(from offset: Int) -> Run {
        Run(
            id: id.advanced(by: offset), originLeft: id.advanced(by: offset - 1), rightParent: .none,
            length: length - Int32(offset), contentOffset: contentOffset < 0 ? -1 : contentOffset + Int32(offset),
            isDeleted: isDeleted)
    }

    /// Whether `next` continues this run: same agent, next counter, chained origin, same state and content.
    func canAppend(_ next: Run) -> Bool {
        next.id == id.advanced(by: count) && next.id.agent == id.agent && next.originLeft == lastID
            && next.rightParent.isNone && next.isDeleted == isDeleted
            && (contentOffset < 0 ? next.contentOffset < 0 : next.contentOffset == contentOffset + length)
    }
}
