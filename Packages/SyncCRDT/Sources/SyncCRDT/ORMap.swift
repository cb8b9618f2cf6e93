import SyncModels

/// An observed-remove map whose values are CRDTs: each key holds any CRDT (counters, registers, sets,
/// sequences, other maps), so a whole record such as a note is a single CRDT.
///
/// Presence is add-wins: an update concurrent with a remove keeps the key. A key's value lives in an
/// *incarnation*, identified by the dot of the update that created the key while it was absent. A remove hides
/// the incarnations it observed; an update after a remove starts a new incarnation from an empty value, so a
/// re-created key does not bring its old contents back. When several incarnations are visible (concurrent
/// creations, or an update concurrent with a remove), the key's value is their join. Hidden incarnations are the
/// map's tombstones; `compact(stableAt:)` drops them once their removal is causally stable.
///
/// Updates return deltas: maps of one key holding the change. Nested values that need dots (registers, sets,
/// maps) take the dot the update closure receives, which comes from this map's context and is never reused.
public struct ORMap<Key: Sendable & Hashable & Codable, Value: CRDT & EmptyInitializable & Codable>: OperationCRDT,
    Compactable, EmptyInitializable
{
    /// One incarnation of a key: the dots that keep it visible, the dots of the removes that hid it, its value.
    public struct Slot: Sendable, Equatable {
        public internal(set) var presence: Set<Dot>
        public internal(set) var removals: Set<Dot>
        public internal(set) var value: Value

        /// Whether this incarnation is visible.
        public var isLive: Bool { !presence.isEmpty }
    }

    /// The incarnations of each key, by the dot that created each.
    public private(set) var entries: [Key: [Dot: Slot]]
    /// Every dot this map has seen.
    public private(set) var context: CausalContext

    /// The empty map.
    public init() {
        entries = [:]
        context = CausalContext()
    }

    /// A map's delta is a map; an operation is a delta.
    public typealias Operation = ORMap

    /// The value at `key`: the join of its visible incarnations, or `nil` if the key is absent.
    public subscript(key: Key) -> Value? {
        guard let slots = entries[key] else { return nil }
        var result: Value?
        for (_, slot) in slots where slot.isLive {
            if result == nil { result = slot.value } else { result!.merge(slot.value) }
        }
        return result
    }

    /// Whether `key` is present.
    public func contains(_ key: Key) -> Bool {
        entries[key]?.values.contains { $0.isLive } ?? false
    }

    /// The present keys.
    public var keys: Set<Key> { Set(entries.keys.filter(contains)) }

    /// Changes the value at `key` on behalf of `replica`, with the next dot of this map's context.
    @discardableResult
    public mutating func update(_ key: Key, replica: ReplicaID, _ change: (_ current: Value, _ dot: Dot) -> Value)
        -> ORMap
    {
        update(key, dot: context.nextDot(for: replica), change)
    }

    /// Changes the value at `key` with `dot` (a dot never used before) and returns the delta to ship.
    ///
    /// `change` receives the current value (empty if the key is absent) and the dot to use for nested
    /// operations; it returns the delta of its change (returning the whole new value is also correct, only
    /// larger). The key becomes present.
    @discardableResult
    public mutating func update(_ key: Key, dot: Dot, _ change: (_ current: Value, _ dot: Dot) -> Value) -> ORMap {
        let live = entries[key]?.filter { $0.value.isLive } ?? [:]
        let incarnation = live.keys.max() ?? dot
        let valueDelta = change(self[key] ?? Value(), dot)
        var delta = ORMap()
        delta.entries[key] = [incarnation: Slot(presence: [dot], removals: [], value: valueDelta)]
        delta.context = CausalContext(dots: (live[incarnation]?.presence ?? []).union([dot, incarnation]))
        merge(delta)
        return delta
    }

    /// Removes `key` on behalf of `replica`, with the next dot of this map's context.
    @discardableResult
    public mutating func remove(_ key: Key, replica: ReplicaID) -> ORMap {
        remove(key, dot: context.nextDot(for: replica))
    }

    /// Removes `key` with `dot` (a dot never used before): hides every incarnation this replica sees. Returns
    /// the delta to ship.
    @discardableResult
    public mutating func remove(_ key: Key, dot: Dot) -> ORMap {
        var delta = ORMap()
        var observed: Set<Dot> = [dot]
        for (incarnation, slot) in entries[key] ?? [:] where slot.isLive {
            delta.entries[key, default: [:]][incarnation] = Slot(presence: [], removals: [dot], value: Value())
            observed.formUnion(slot.presence)
        }
        delta.context = CausalContext(dots: observed)
        merge(delta)
        return delta
    }

    public mutating func apply(_ operation: ORMap) {
        merge(operation)
    }

    public mutating func merge(_ other: ORMap) {
        for key in Set(entries.keys).union(other.entries.keys) {
            let mine = entries[key] ?? [:]
            let theirs = other.entries[key] ?? [:]
            var result: [Dot: Slot] = [:]
            for incarnation in Set(mine.keys).union(theirs.keys) {
                if let slot = Self.join(mine[incarnation], context, theirs[incarnation], other.context) {
                    result[incarnation] = slot
                }
            }
            entries[key] = result.isEmpty ? nil : result
        }
        context.merge(other.context)
    }

    private static func join(_ left: Slot?, _ leftContext: CausalContext, _ right: Slot?, _ rightContext: CausalContext)
        -> Slot?
    {
        let presence = DotStore.join(left?.presence ?? [], leftContext, right?.presence ?? [], rightContext)
        let removals = DotStore.join(left?.removals ?? [], leftContext, right?.removals ?? [], rightContext)
        // Every dot of this incarnation was seen and dropped by the other side: it was compacted away there.
        guard !presence.isEmpty || !removals.isEmpty else { return nil }
        var value = left?.value ?? Value()
        if let right { value.merge(right.value) }
        return Slot(presence: presence, removals: removals, value: value)
    }

    /// Drops hidden incarnations (with their values) whose creation and removals are stable: no operation to
    /// come can revive them, since every later update starts a new incarnation. Stable removal dots of visible
    /// incarnations go too, and visible values are compacted in turn.
    public mutating func compact(stableAt stable: VersionVector) {
        for (key, slots) in entries {
            var kept: [Dot: Slot] = [:]
            for (incarnation, var slot) in slots {
                if !slot.isLive {
                    if stable.contains(incarnation) && slot.removals.allSatisfy(stable.contains) { continue }
                } else {
                    slot.removals = slot.removals.filter { !stable.contains($0) }
                    if var value = slot.value as? any Compactable {
                        value.compact(stableAt: stable)
                        slot.value = value as! Value
                    }
                }
                kept[incarnation] = slot
            }
            entries[key] = kept.isEmpty ? nil : kept
        }
        context.compact(stableAt: stable)
    }
}

extension ORMap: Equatable {}

extension ORMap: Codable {
    private enum CodingKeys: String, CodingKey { case version, entries, context }
    private struct Entry: Codable {
        var key: Key
        var incarnation: Dot
        var presence: [Dot]
        var removals: [Dot]
        var value: Value
    }

    /// `{"version": 1, "entries": [{"key", "incarnation", "presence", "removals", "value"}], "context"}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(CodableVersion.current, forKey: .version)
        var list: [Entry] = []
        for (key, slots) in entries {
            for (incarnation, slot) in slots {
                list.append(
                    Entry(
                        key: key, incarnation: incarnation, presence: slot.presence.sorted(),
                        removals: slot.removals.sorted(), value: slot.value))
            }
        }
        list.sort { $0.incarnation < $1.incarnation }
        try container.encode(list, forKey: .entries)
        try container.encode(context, forKey: .context)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try CodableVersion.check(container, key: .version)
        entries = [:]
        for entry in try container.decode([Entry].self, forKey: .entries) {
            entries[entry.key, default: [:]][entry.incarnation] = Slot(
                presence: Set(entry.presence), removals: Set(entry.removals), value: entry.value)
        }
        context = try container.decode(CausalContext.self, forKey: .context)
    }
}
