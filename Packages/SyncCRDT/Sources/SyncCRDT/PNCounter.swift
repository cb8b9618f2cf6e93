import SyncModels

/// A counter that goes up and down: two grow-only counters, one of increments and one of decrements.
///
/// `value` is their difference; merge and operations work per component, as in `GCounter`.
public struct PNCounter: OperationCRDT, Compactable, EmptyInitializable, Hashable {
    /// The increments of each replica.
    public internal(set) var increments: GCounter
    /// The decrements of each replica.
    public internal(set) var decrements: GCounter

    /// A counter at zero.
    public init() {
        increments = GCounter()
        decrements = GCounter()
    }

    /// Increments minus decrements (wrapping, as two's complement, past `Int64` range).
    public var value: Int64 { Int64(bitPattern: increments.value &- decrements.value) }

    /// One change: the replica's two components after the event identified by `dot`.
    public struct Operation: Hashable, Sendable, Codable {
        public var dot: Dot
        public var increments: UInt64
        public var decrements: UInt64

        public init(dot: Dot, increments: UInt64, decrements: UInt64) {
            self.dot = dot
            self.increments = increments
            self.decrements = decrements
        }
    }

    /// Adds `amount` (negative to subtract) on behalf of `dot.replica` and returns the operation to ship.
    @discardableResult
    public mutating func add(_ amount: Int64, at dot: Dot) -> Operation {
        if amount >= 0 {
            increments.increment(by: UInt64(amount), at: dot)
        } else {
            decrements.increment(by: amount.magnitude, at: dot)
        }
        return Operation(dot: dot, increments: increments[dot.replica], decrements: decrements[dot.replica])
    }

    /// Adds `amount` (negative to subtract) on behalf of `replica` and returns the delta to ship.
    @discardableResult
    public mutating func add(_ amount: Int64, replica: ReplicaID) -> PNCounter {
        var delta = PNCounter()
        if amount >= 0 {
            delta.increments = increments.increment(by: UInt64(amount), replica: replica)
        } else {
            delta.decrements = decrements.increment(by: amount.magnitude, replica: replica)
        }
        return delta
    }

    public mutating func apply(_ operation: Operation) {
        increments.apply(GCounter.Operation(dot: operation.dot, component: operation.increments))
        decrements.apply(GCounter.Operation(dot: operation.dot, component: operation.decrements))
    }

    public mutating func merge(_ other: PNCounter) {
        increments.merge(other.increments)
        decrements.merge(other.decrements)
    }

    /// Nothing to drop (see `GCounter`).
    public mutating func compact(stableAt stable: VersionVector) {}
}

extension PNCounter: Codable {
    private enum CodingKeys: String, CodingKey { case version, increments, decrements }

    /// `{"version": 1, "increments": GCounter, "decrements": GCounter}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(CodableVersion.current, forKey: .version)
        try container.encode(increments, forKey: .increments)
        try container.encode(decrements, forKey: .decrements)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try CodableVersion.check(container, key: .version)
        increments = try container.decode(GCounter.self, forKey: .increments)
        decrements = try container.decode(GCounter.self, forKey: .decrements)
    }
}
