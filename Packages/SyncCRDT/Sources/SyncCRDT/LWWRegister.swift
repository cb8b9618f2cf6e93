import SyncModels

/// A last-writer-wins register: the assignment with the greatest hybrid logical clock timestamp wins, and the
/// replica id breaks ties, so every replica picks the same winner.
///
/// Use it where losing a concurrent write is acceptable (a title, a flag). An operation is the winning
/// candidate itself, so applying it twice or out of order changes nothing.
public struct LWWRegister<Value: Sendable & Hashable & Codable>: OperationCRDT, Compactable, EmptyInitializable,
    Hashable
{
    /// One assignment: the value, when it was made, and the dot of the event that made it.
    public struct Assignment: Hashable, Sendable, Codable {
        public var value: Value
        public var timestamp: HLCTimestamp
        public var dot: Dot

        public init(value: Value, timestamp: HLCTimestamp, dot: Dot) {
            self.value = value
            self.timestamp = timestamp
            self.dot = dot
        }

        /// Whether this assignment loses to `other`: earlier clock, then lower replica id, then lower counter.
        public func precedes(_ other: Assignment) -> Bool {
            (timestamp, dot.replica, dot.counter) < (other.timestamp, other.dot.replica, other.dot.counter)
        }
    }

    public typealias Operation = Assignment

    /// The winning assignment, if any was made.
    public private(set) var winner: Assignment?

    /// A register that was never assigned.
    public init() { winner = nil }

    /// A register holding `assignment`: the delta of that assignment.
    public init(_ assignment: Assignment) { winner = assignment }

    /// The current value (`nil` before the first assignment).
    public var value: Value? { winner?.value }

    /// Assigns `value` at `timestamp` on behalf of `dot.replica`; returns the operation to ship (also the delta).
    ///
    /// The assignment only wins if its timestamp is later than the current winner's: take `timestamp` from a
    /// hybrid logical clock that has seen the current winner (`HybridLogicalClock.receive`).
    @discardableResult
    public mutating func assign(_ value: Value, timestamp: HLCTimestamp, dot: Dot) -> Assignment {
        let assignment = Assignment(value: value, timestamp: timestamp, dot: dot)
        apply(assignment)
        return assignment
    }

    @_specialize(exported:true,where Value == String)
    @_specialize(exported:true,where Value == Bool)
    public mutating func apply(_ operation: Assignment) {
        if let winner, !winner.precedes(operation) { return }
        winner = operation
    }

    public mutating func merge(_ other: LWWRegister) {
        if let candidate = other.winner { apply(candidate) }
    }

    /// A register keeps only its winner: superseded values are dropped as soon as they lose.
    public mutating func compact(stableAt stable: VersionVector) {}
}

extension LWWRegister: Codable {
    private enum CodingKeys: String, CodingKey { case version, winner }

    /// `{"version": 1, "winner": {"value": …, "timestamp": "…", "dot": …} | null}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(CodableVersion.current, forKey: .version)
        try container.encode(winner, forKey: .winner)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try CodableVersion.check(container, key: .version)
        winner = try container.decodeIfPresent(Assignment.self, forKey: .winner)
    }
}
