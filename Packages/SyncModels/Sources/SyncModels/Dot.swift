/// A dot: the `counter`-th event made by `replica` (counters start at 1 and grow by one per event).
///
/// Version vectors summarize sets of dots; CRDTs use dots to tell which adds a remove has seen.
public struct Dot: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public let replica: ReplicaID
    public let counter: UInt64

    public init(replica: ReplicaID, counter: UInt64) {
        self.replica = replica
        self.counter = counter
    }

    public var description: String { "\(replica)@\(counter)" }

    public static func < (lhs: Dot, rhs: Dot) -> Bool {
        (lhs.replica, lhs.counter) < (rhs.replica, rhs.counter)
    }
}
