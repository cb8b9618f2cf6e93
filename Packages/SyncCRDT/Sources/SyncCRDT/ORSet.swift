import SyncModels

/// How an observed-remove set resolves an add and a remove of the same element made concurrently.
public protocol ORSetBias: Sendable {
    /// `true` when a concurrent remove beats an add.
    static var removeWins: Bool { get }
}

/// Concurrent add and remove: the element stays (the usual choice for tags).
public enum AddWins: ORSetBias {
    public static var removeWins: Bool { false }
}

/// Concurrent add and remove: the element goes.
public enum RemoveWins: ORSetBias {
    public static var removeWins: Bool { true }
}

/// An add-wins observed-remove set.
public typealias AddWinsSet<Element: Sendable & Hashable & Codable> = ORSet<Element, AddWins>
/// A remove-wins observed-remove set.
public typealias RemoveWinsSet<Element: Sendable & Hashable & Codable> = ORSet<Element, RemoveWins>

/// An observed-remove set over dots and a causal context (not ever-growing tag sets).
///
/// Each element holds the dots of the operations that touched it and are still current; an operation replaces
/// the dots it observed. In the add-wins variant every dot is an add and an element is present while it holds
/// one. In the remove-wins variant a remove also leaves a dot, and an element is present only if all its
/// current dots are adds, so a remove concurrent with an add wins. Removed dots are not kept: the causal
/// context remembers them.
public struct ORSet<Element: Sendable & Hashable & Codable, Bias: ORSetBias>: OperationCRDT, Compactable,
    EmptyInitializable
{
    /// Current dots of each element, each marked add (`true`) or remove (`false`).
    public internal(set) var entries: [Element: [Dot: Bool]]
    /// Every dot this set has seen.
    public internal(set) var context: CausalContext
    /// The stable version this replica (or one it merged) compacted at: its operations observe every token up
    /// to it, including the tombstones compaction dropped.
    public internal(set) var compactedVersion: VersionVector
    /// In a delta only: per element, every token up to the version was observed by the operation.
    var floors: [Element: VersionVector]

    /// The empty set.
    public init() {
        // `Dictionary()`, not `[:]`: in generic code the empty literal looks up tuple metadata at run time,
        // and a rebuild makes a set for every note.
        entries = Dictionary()
        context = CausalContext()
        compactedVersion = VersionVector()
        floors = Dictionary()
    }

    /// Whether `element` is in the set.
    public func contains(_ element: Element) -> Bool {
        guard let tokens = entries[element], !tokens.isEmpty else { return false }
        return !Bias.removeWins || tokens.values.allSatisfy { $0 }
    }

    /// The elements in the set.
    public var elements: Set<Element> {
        @_specialize(exported:true,where Element == String, Bias == AddWins)
        get {
            var result = Set<Element>(minimumCapacity: entries.count)
            for (element, tokens) in entries
            where !tokens.isEmpty && (!Bias.removeWins || tokens.values.allSatisfy { $0 }) {
                result.insert(element)
            }
            return result
        }
    }

    /// One add or remove: the element, the operation's dot, the dots of the element it observed, and the
    /// version up to which its author had compacted (every token of the element up to it counts as observed).
    public struct Operation: Hashable, Sendable, Codable {
        public var element: Element
        public var dot: Dot
        public var isAdd: Bool
        public var observed: [Dot]
        public var observedUpTo: VersionVector

        public init(
            element: Element, dot: Dot, isAdd: Bool, observed: [Dot], observedUpTo: VersionVector = VersionVector()
        ) {
            self.element = element
            self.dot = dot
            self.isAdd = isAdd
            self.observed = observed
            self.observedUpTo = observedUpTo
        }

        private enum CodingKeys: String, CodingKey { case element, dot, isAdd, observed, observedUpTo }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            element = try container.decode(Element.self, forKey: .element)
            dot = try container.decode(Dot.self, forKey: .dot)
            isAdd = try container.decode(Bool.self, forKey: .isAdd)
            observed = try container.decode([Dot].self, forKey: .observed)
            observedUpTo = try container.decodeIfPresent(VersionVector.self, forKey: .observedUpTo) ?? VersionVector()
        }
    }

    /// Adds `element` on behalf of `replica`, with the next dot of this set's own context; returns the operation
    /// to ship.
    @discardableResult
    public mutating func add(_ element: Element, replica: ReplicaID) -> Operation {
        add(element, dot: context.nextDot(for: replica))
    }

    /// Adds `element` with `dot`, a dot never used before (an event's dot, or one from an enclosing map);
    /// returns the operation to ship.
    @discardableResult
    public mutating func add(_ element: Element, dot: Dot) -> Operation {
        let operation = Operation(
            element: element, dot: dot, isAdd: true, observed: observed(element), observedUpTo: compactedVersion)
        apply(operation)
        return operation
    }

    /// Removes `element` on behalf of `replica` (removing an absent element still records the intent in the
    /// remove-wins variant); returns the operation to ship.
    @discardableResult
    public mutating func remove(_ element: Element, replica: ReplicaID) -> Operation {
        remove(element, dot: context.nextDot(for: replica))
    }

    /// Removes `element` with `dot`, a dot never used before; returns the operation to ship.
    @discardableResult
    public mutating func remove(_ element: Element, dot: Dot) -> Operation {
        let operation = Operation(
            element: element, dot: dot, isAdd: false, observed: observed(element), observedUpTo: compactedVersion)
        apply(operation)
        return operation
    }

    private func observed(_ element: Element) -> [Dot] {
        (entries[element]?.keys).map { $0.sorted() } ?? []
    }

    /// The delta that `operation` stands for.
    public static func delta(of operation: Operation) -> ORSet {
        var delta = ORSet()
        if operation.isAdd || Bias.removeWins {
            delta.entries[operation.element] = [operation.dot: operation.isAdd]
        }
        delta.context = CausalContext(dots: operation.observed + [operation.dot])
        if !operation.observedUpTo.isEmpty { delta.floors[operation.element] = operation.observedUpTo }
        return delta
    }

    /// Applies one operation: exactly `merge(Self.delta(of: operation))`, without building the delta or
    /// rebuilding every element's entry (a replay applies thousands of operations to one set).
    @_specialize(exported:true,where Element == String, Bias == AddWins)
    public mutating func apply(_ operation: Operation) {
        let element = operation.element
        // The delta holds the operation's own dot (for adds, and for removes in the remove-wins variant), and
        // its context is the observed dots plus the operation's dot.
        let keepsDot = operation.isAdd || Bias.removeWins
        func inDelta(_ key: Element, _ dot: Dot) -> Bool { keepsDot && dot == operation.dot && key == element }
        func inDeltaContext(_ dot: Dot) -> Bool { dot == operation.dot || operation.observed.contains(dot) }

        // The floor: every token of the element up to the author's compacted version was observed.
        if !operation.observedUpTo.isEmpty, let tokens = entries[element] {
            let kept = tokens.filter { !operation.observedUpTo.contains($0.key) || inDelta(element, $0.key) }
            entries[element] = kept.isEmpty ? nil : kept
        }
        // The join: a stored dot the delta's context covers goes unless the delta holds it too; an empty entry
        // goes.
        var changes: [(Element, [Dot: Bool]?)] = []
        for (key, tokens) in entries
        where tokens.isEmpty || tokens.keys.contains(where: { inDeltaContext($0) && !inDelta(key, $0) }) {
            let kept = tokens.filter { !inDeltaContext($0.key) || inDelta(key, $0.key) }
            changes.append((key, kept.isEmpty ? nil : kept))
        }
        for (key, tokens) in changes { entries[key] = tokens }
        // The delta's dot joins unless this set holds or has seen it.
        if keepsDot && entries[element]?[operation.dot] == nil && !context.contains(operation.dot) {
            entries[element, default: [:]][operation.dot] = operation.isAdd
        }
        for dot in operation.observed { context.insert(dot) }
        context.insert(operation.dot)
    }

    public mutating func merge(_ other: ORSet) {
        for (element, floor) in other.floors {
            guard let tokens = entries[element] else { continue }
            let kept = tokens.filter { !floor.contains($0.key) || other.entries[element]?[$0.key] != nil }
            entries[element] = kept.isEmpty ? nil : kept
        }
        compactedVersion.merge(other.compactedVersion)
        var result: [Element: [Dot: Bool]] = [:]
        for element in Set(entries.keys).union(other.entries.keys) {
            let joined = DotStore.join(entries[element] ?? [:], context, other.entries[element] ?? [:], other.context)
            if !joined.isEmpty { result[element] = joined }
        }
        entries = result
        context.merge(other.context)
    }

    /// Drops the tombstones no later operation can need. An add-wins set has none (a removed element leaves
    /// only its dots in the context, folded here); in a remove-wins set, an absent element whose tokens are all
    /// stable is dropped with them. Operations made after compaction say they observed everything up to
    /// `stable`, so replicas that still hold those tokens drop them too.
    public mutating func compact(stableAt stable: VersionVector) {
        if Bias.removeWins {
            for (element, tokens) in entries where !contains(element) && tokens.keys.allSatisfy(stable.contains) {
                entries[element] = nil
            }
            compactedVersion.merge(stable)
        }
        context.compact(stableAt: stable)
    }
}

extension ORSet: Equatable {
    /// Equal when they hold the same tokens and have seen the same dots (compaction points and a delta's
    /// floors are bookkeeping).
    public static func == (lhs: ORSet, rhs: ORSet) -> Bool {
        lhs.entries == rhs.entries && lhs.context == rhs.context
    }
}

extension ORSet: Codable {
    private enum CodingKeys: String, CodingKey { case version, removeWins, entries, context, compactedVersion, floors }
    private struct Floor: Codable {
        var element: Element
        var upTo: VersionVector
    }
    private struct Token: Codable {
        var dot: Dot
        var isAdd: Bool
    }
    private struct Entry: Codable {
        var element: Element
        var tokens: [Token]
    }

    /// `{"version": 1, "removeWins": Bool, "entries": [{"element": …, "tokens": [{"dot", "isAdd"}]}], "context"}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(CodableVersion.current, forKey: .version)
        try container.encode(Bias.removeWins, forKey: .removeWins)
        let list = entries.map { element, tokens in
            Entry(
                element: element, tokens: tokens.sorted { $0.key < $1.key }.map { Token(dot: $0.key, isAdd: $0.value) })
        }.sorted {
            ($0.tokens.first?.dot.counter ?? 0, $0.tokens.first?.dot.replica ?? ReplicaID(high: 0, low: 0)) < (
                $1.tokens.first?.dot.counter ?? 0, $1.tokens.first?.dot.replica ?? ReplicaID(high: 0, low: 0)
            )
        }
        try container.encode(list, forKey: .entries)
        try container.encode(context, forKey: .context)
        try container.encode(compactedVersion, forKey: .compactedVersion)
        if !floors.isEmpty {
            try container.encode(floors.map { Floor(element: $0.key, upTo: $0.value) }, forKey: .floors)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try CodableVersion.check(container, key: .version)
        guard try container.decode(Bool.self, forKey: .removeWins) == Bias.removeWins else {
            throw DecodingError.dataCorruptedError(
                forKey: .removeWins, in: container, debugDescription: "set bias does not match the type")
        }
        entries = Dictionary()
        for entry in try container.decode([Entry].self, forKey: .entries) {
            entries[entry.element] = Dictionary(
                entry.tokens.map { ($0.dot, $0.isAdd) }, uniquingKeysWith: { first, _ in first })
        }
        context = try container.decode(CausalContext.self, forKey: .context)
        compactedVersion =
            try container.decodeIfPresent(VersionVector.self, forKey: .compactedVersion) ?? VersionVector()
        floors = Dictionary()
        for floor in try container.decodeIfPresent([Floor].self, forKey: .floors) ?? [] {
            floors[floor.element] = floor.upTo
        }
    }
}
