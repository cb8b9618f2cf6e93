import SyncModels

/// A state-based CRDT: replicas converge by merging states (or deltas, which are small states of the same type).
///
/// `merge` is a join: commutative, associative and idempotent, so states can be merged in any order, any number
/// of times. Equality is logical: two states are equal when they hold the same information, whatever their
/// internal layout.
public protocol CRDT: Sendable, Equatable {
    /// Joins `other` into this state.
    mutating func merge(_ other: Self)
}

extension CRDT {
    /// The join of this state and `other`.
    public func merging(_ other: Self) -> Self {
        var copy = self
        copy.merge(other)
        return copy
    }
}

/// A CRDT that can also be driven by operations.
///
/// Operations carry the dots that identify them, so applying one twice, or applying a set of operations in any
/// order, gives the same state as applying each once in causal order.
public protocol OperationCRDT: CRDT {
    associatedtype Operation: Sendable
    /// Applies `operation`; duplicates and reorderings are harmless.
    mutating func apply(_ operation: Operation)
}

/// A CRDT that can drop metadata once it can no longer matter.
///
/// `stable` must be causally stable at this replica: every replica has seen every dot it covers, and every
/// operation this replica has not applied yet is causally after it (it was made by a replica that had seen
/// `stable`). Compaction never changes the value a replica shows, and a compacted replica keeps converging with
/// uncompacted ones and with later operations.
public protocol Compactable {
    /// Drops the metadata that no operation after `stable` can need.
    mutating func compact(stableAt stable: VersionVector)
}

/// A CRDT that has an empty state, the neutral element of `merge`.
public protocol EmptyInitializable {
    init()
}
