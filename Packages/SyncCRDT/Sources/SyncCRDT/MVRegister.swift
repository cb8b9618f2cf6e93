import SyncModels

/// A multi-value register: an assignment replaces the values it has seen, and concurrent assignments are all
/// kept, so an app can show "edited on two devices" instead of silently losing one.
///
/// State is a set of (dot, value) pairs over a causal context. An assignment's delta holds the new pair and,
/// in its context, the dots it overwrites, so it removes exactly what its author saw.
public struct MVRegister<Value: Sendable & Hashable & Codable>: OperationCRDT, Compactable, EmptyInitializable {
    /// The current values by the dot of the assignment that made each one.
    public private(set) var entries: [Dot: Value]
    /// Every dot this register has seen.
    public private(set) var context: CausalContext

    /// A register that was never assigned.
    public init() {
        entries = [:]
        context = CausalContext()
    }

    /// The current values: one, or several after concurrent assignments, in dot order.
    public var values: [Value] { entries.sorted { $0.key < $1.key }.map(\.value) }

    /// Whether concurrent assignments are waiting to be resolved.
    public var hasConflict: Bool { entries.count > 1 }

    /// One assignment: its dot, its value, and the dots of the values it replaces.
    public struct Assignment: Hashable, Sendable, Codable {
        public var dot: Dot
        public var value: Value
        public var overwrites: [Dot]

        public init(dot: Dot, value: Value, overwrites: [Dot]) {
            self.dot = dot
            self.value = value
            self.overwrites = overwrites
        }
    }

    public typealias Operation = Assignment

    /// Assigns `value` on behalf of `replica` with the next dot of this register's own context, replacing
    /// every current value; returns the operation to ship.
    @discardableResult
    public mutating func assign(_ value: Value, replica: ReplicaID) -> Assignment {
        assign(value, dot: context.nextDot(for: replica))
    }

    /// Assigns `value` with `dot`, a dot never used before (an event's dot, or one from an enclosing map),
    /// replacing every current value; returns the operation to ship.
    @discardableResult
    public mutating func assign(_ value: Value, dot: Dot) -> Assignment {
        let assignment = Assignment(dot: dot, value: value, overwrites: entries.keys.sorted())
        apply(assignment)
        return assignment
    }

    /// The delta that `operation` stands for.
    public static func delta(of operation: Assignment) -> MVRegister {
        var delta = MVRegister()
        delta.entries = [operation.dot: operation.value]
        delta.context = CausalContext(dots: operation.overwrites + [operation.dot])
        return delta
    }

    public mutating func apply(_ operation: Assignment) {
        merge(Self.delta(of: operation))
    }

    public mutating func merge(_ other: MVRegister) {
        entries = DotStore.join(entries, context, other.entries, other.context)
        context.merge(other.context)
    }

    /// Folds the stable part of the context into its version vector. Concurrent values are live data, not
    /// metadata; superseded values were dropped when they were overwritten.
    public mutating func compact(stableAt stable: VersionVector) {
        context.compact(stableAt: stable)
    }
}

extension MVRegister: Equatable {}
extension MVRegister: Hashable {}

extension MVRegister: Codable {
    private enum CodingKeys: String, CodingKey { case version, entries, context }
    private struct Entry: Codable {
        var dot: Dot
        var value: Value
    }

    /// `{"version": 1, "entries": [{"dot": …, "value": …}], "context": CausalContext}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(CodableVersion.current, forKey: .version)
        try container.encode(
            entries.sorted { $0.key < $1.key }.map { Entry(dot: $0.key, value: $0.value) }, forKey: .entries)
        try container.encode(context, forKey: .context)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try CodableVersion.check(container, key: .version)
        let list = try container.decode([Entry].self, forKey: .entries)
        entries = Dictionary(list.map { ($0.dot, $0.value) }, uniquingKeysWith: { first, _ in first })
        context = try container.decode(CausalContext.self, forKey: .context)
    }
}
