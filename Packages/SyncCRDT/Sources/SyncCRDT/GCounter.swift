import SyncModels

/// A grow-only counter: one component per replica, each only ever increased by its own replica.
///
/// `value` is the sum of the components; `merge` takes the per-component maximum. An operation carries the dot
/// of the event that made it and the replica's component after it, so applying it is a maximum too: duplicates
/// and reorderings change nothing.
public struct GCounter: OperationCRDT, Compactable, EmptyInitializable, Hashable {
    /// The count of each replica (replicas that never counted are absent).
    public internal(set) var components: [ReplicaID: UInt64]

    /// A counter at zero.
    public init() { components = [:] }

    /// The total: the sum of all components.
    public var value: UInt64 { components.values.reduce(0, &+) }

    /// One increment: the replica's component after the event identified by `dot`.
    public struct Operation: Hashable, Sendable, Codable {
        public var dot: Dot
        public var component: UInt64

        public init(dot: Dot, component: UInt64) {
            self.dot = dot
            self.component = component
        }
    }

    /// Adds `amount` on behalf of `dot.replica` and returns the operation to ship.
    @discardableResult
    public mutating func increment(by amount: UInt64 = 1, at dot: Dot) -> Operation {
        let component = self[dot.replica] &+ amount
        if component > 0 { components[dot.replica] = component }
        return Operation(dot: dot, component: component)
    }

    /// Adds `amount` on behalf of `replica` and returns the delta to ship (that replica's component only).
    @discardableResult
    public mutating func increment(by amount: UInt64 = 1, replica: ReplicaID) -> GCounter {
        let component = self[replica] &+ amount
        var delta = GCounter()
        if component > 0 {
            components[replica] = component
            delta.components[replica] = component
        }
        return delta
    }

    /// The component of `replica`.
    public subscript(replica: ReplicaID) -> UInt64 { components[replica] ?? 0 }

    public mutating func apply(_ operation: Operation) {
        if operation.component > self[operation.dot.replica] {
            components[operation.dot.replica] = operation.component
        }
    }

    public mutating func merge(_ other: GCounter) {
        for (replica, component) in other.components where component > self[replica] {
            components[replica] = component
        }
    }

    /// A counter keeps one number per replica and no history: there is nothing to drop.
    public mutating func compact(stableAt stable: VersionVector) {}
}

extension GCounter: Codable {
    private enum CodingKeys: String, CodingKey { case version, components }

    /// `{"version": 1, "components": {"<replica>": n}}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(CodableVersion.current, forKey: .version)
        try container.encode(VersionVector(components), forKey: .components)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try CodableVersion.check(container, key: .version)
        components = try container.decode(VersionVector.self, forKey: .components).counters
    }
}
