import SyncModels

/// A register that keeps concurrent values for review: an assignment replaces the values its author saw,
/// assignments that did not see each other are all kept, and every replica shows the same one of them, the
/// value an `LWWRegister` fed the same assignments would show.
///
/// State: the live entries by dot, each a value, the HLC timestamp of its assignment and its author (the
/// dot's replica); the causal context of every dot seen; and a *legacy floor*. An assignment carries the
/// dots it overwrites (what its author saw), so it removes exactly those, however late it arrives; an entry
/// whose dot is in the context and not among the entries was overwritten.
///
/// A *legacy* assignment (`overwrites == nil`: written before writers said what they saw) keeps its
/// last-writer-wins meaning: it removes every entry ordered below it by `(timestamp, dot)`, including
/// entries that arrive later. The greatest legacy `(timestamp, dot)` is kept as the floor, and entries below
/// the floor are dropped. Merging takes the larger floor, so the join stays commutative, associative and
/// idempotent: the state is a dot store whose removed set also holds everything below the floor, and each
/// part (context, removed dots, floor) only grows.
///
/// ```swift
/// var phone = ReviewRegister<String>(), laptop = ReviewRegister<String>()
/// let first = phone.assign("Groceries", timestamp: t1, dot: d1)
/// laptop.apply(first)
/// let a = phone.assign("Groceries (Sat)", timestamp: t2, dot: d2)     // overwrites d1
/// let b = laptop.assign("Party shopping", timestamp: t3, dot: d3)     // overwrites d1, not d2
/// phone.apply(b); laptop.apply(a)
/// phone.hasConflict     // true: both kept, the later one (t3) shown
/// let resolved = phone.assign("Groceries for the party", timestamp: t4, dot: d4)  // overwrites d2, d3
/// ```
public struct ReviewRegister<Value: Sendable & Hashable & Codable>: OperationCRDT, Compactable, EmptyInitializable,
    Hashable
{
    /// Where an assignment stands in the order that picks the shown value: its timestamp, then its dot.
    public struct Stamp: Hashable, Comparable, Sendable, Codable {
        public var timestamp: HLCTimestamp
        public var dot: Dot

        public init(timestamp: HLCTimestamp, dot: Dot) {
            self.timestamp = timestamp
            self.dot = dot
        }

        /// Earlier clock, then lower replica id, then lower counter: `LWWRegister.Assignment.precedes`.
        public static func < (lhs: Stamp, rhs: Stamp) -> Bool {
            (lhs.timestamp, lhs.dot.replica, lhs.dot.counter) < (rhs.timestamp, rhs.dot.replica, rhs.dot.counter)
        }
    }

    /// One live value: what was assigned, when, and by which event (its author is `dot.replica`).
    public struct Entry: Hashable, Sendable, Codable {
        public var value: Value
        public var timestamp: HLCTimestamp
        public var dot: Dot

        public init(value: Value, timestamp: HLCTimestamp, dot: Dot) {
            self.value = value
            self.timestamp = timestamp
            self.dot = dot
        }

        /// The replica that made the assignment.
        public var author: ReplicaID { dot.replica }

        public var stamp: Stamp { Stamp(timestamp: timestamp, dot: dot) }
    }

    /// One assignment, the operation to ship: the value, its timestamp and dot, and the dots it overwrites;
    /// `nil` overwrites mark a legacy (last-writer-wins) assignment.
    public struct Assignment: Hashable, Sendable, Codable {
        public var value: Value
        public var timestamp: HLCTimestamp
        public var dot: Dot
        /// The dots of the values the author saw and replaces; nil for a legacy assignment, which replaces
        /// every value ordered below it.
        public var overwrites: [Dot]?

        public init(value: Value, timestamp: HLCTimestamp, dot: Dot, overwrites: [Dot]?) {
            self.value = value
            self.timestamp = timestamp
            self.dot = dot
            self.overwrites = overwrites
        }

        public var stamp: Stamp { Stamp(timestamp: timestamp, dot: dot) }
    }

    public typealias Operation = Assignment

    /// The live values by the dot of the assignment that made each one.
    public private(set) var entries: [Dot: Entry]
    /// Every dot this register has seen.
    public private(set) var context: CausalContext
    /// The greatest legacy assignment seen: no entry below it is kept.
    public private(set) var floor: Stamp?

    /// A register that was never assigned.
    public init() {
        entries = [:]
        context = CausalContext()
        floor = nil
    }

    /// The register an `LWWRegister` in the same state becomes: its winner as the one entry, at the floor
    /// (it was a last-writer-wins assignment, so it keeps that meaning for what arrives later).
    public init(migrating register: LWWRegister<Value>) {
        self.init()
        if let winner = register.winner {
            apply(Assignment(value: winner.value, timestamp: winner.timestamp, dot: winner.dot, overwrites: nil))
        }
    }

    /// A register holding exactly these parts (decoding); entries below `floor` are dropped and every entry's
    /// dot is added to the context.
    init(entries: [Dot: Entry], context: CausalContext, floor: Stamp?) {
        var context = context
        for dot in entries.keys { context.insert(dot) }
        self.entries = floor.map { floor in entries.filter { $0.value.stamp >= floor } } ?? entries
        self.context = context
        self.floor = floor
    }

    /// The shown value's entry: the greatest `(timestamp, dot)` among the live ones (nil before the first
    /// assignment).
    public var winner: Entry? { entries.values.max { $0.stamp < $1.stamp } }

    /// The shown value (`nil` before the first assignment).
    public var value: Value? { winner?.value }

    /// The live entries, the shown one first, then by decreasing `(timestamp, dot)`.
    public var candidates: [Entry] { entries.values.sorted { $1.stamp < $0.stamp } }

    /// Whether assignments that did not see each other are waiting to be resolved.
    public var hasConflict: Bool { entries.count > 1 }

    /// Assigns `value` at `timestamp` with `dot` (an event's dot, never used before), replacing every live
    /// value; returns the operation to ship. Resolving a conflict is this: the assignment overwrites every
    /// value it saw, so it conflicts again only with assignments that did not see it.
    ///
    /// Take `timestamp` from a hybrid logical clock that has seen the live values, so that the new value is
    /// also the one shown.
    @discardableResult
    public mutating func assign(_ value: Value, timestamp: HLCTimestamp, dot: Dot) -> Assignment {
        let assignment = Assignment(value: value, timestamp: timestamp, dot: dot, overwrites: entries.keys.sorted())
        apply(assignment)
        return assignment
    }

    /// The delta that `operation` stands for: its entry, its dot and overwritten dots as the context, and
    /// its stamp as the floor when it is a legacy assignment.
    public static func delta(of operation: Assignment) -> ReviewRegister {
        var delta = ReviewRegister()
        delta.entries = [
            operation.dot: Entry(value: operation.value, timestamp: operation.timestamp, dot: operation.dot)
        ]
        delta.context = CausalContext(dots: (operation.overwrites ?? []) + [operation.dot])
        delta.floor = operation.overwrites == nil ? operation.stamp : nil
        return delta
    }

    /// `merge(delta(of: operation))`, done in place (a note applies one per title event, replays millions):
    /// the overwritten entries go, the new one stays unless its dot was seen already (kept or removed), the
    /// dots join the context, and a legacy assignment raises the floor.
    @_specialize(exported:true,where Value == String)
    public mutating func apply(_ operation: Assignment) {
        let seen = context.contains(operation.dot)
        for dot in operation.overwrites ?? [] where dot != operation.dot {
            entries.removeValue(forKey: dot)
            context.insert(dot)
        }
        context.insert(operation.dot)
        let stamp = operation.stamp
        if operation.overwrites == nil, floor.map({ $0 < stamp }) ?? true {
            floor = stamp
            entries = entries.filter { $0.value.stamp >= stamp }
        }
        guard !seen, floor.map({ stamp >= $0 }) ?? true else { return }
        entries[operation.dot] = Entry(value: operation.value, timestamp: operation.timestamp, dot: operation.dot)
    }

    @_specialize(exported:true,where Value == String)
    public mutating func merge(_ other: ReviewRegister) {
        entries = DotStore.join(entries, context, other.entries, other.context)
        context.merge(other.context)
        if let theirs = other.floor, floor.map({ $0 < theirs }) ?? true { floor = theirs }
        if let floor { entries = entries.filter { $0.value.stamp >= floor } }
    }

    /// Folds the stable part of the context into its version vector. Live values, concurrent ones included,
    /// are data, not metadata: they stay until an assignment that saw them replaces them. The floor stays
    /// too (one stamp).
    public mutating func compact(stableAt stable: VersionVector) {
        context.compact(stableAt: stable)
    }
}

extension ReviewRegister: Codable {
    private enum CodingKeys: String, CodingKey { case version, entries, context, floor }

    /// `{"version": 1, "entries": [{"value", "timestamp", "dot"}], "context": CausalContext,
    /// "floor": {"timestamp", "dot"} | null}`, entries in dot order.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(CodableVersion.current, forKey: .version)
        try container.encode(entries.values.sorted { $0.dot < $1.dot }, forKey: .entries)
        try container.encode(context, forKey: .context)
        try container.encode(floor, forKey: .floor)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try CodableVersion.check(container, key: .version)
        let list = try container.decode([Entry].self, forKey: .entries)
        self.init(
            entries: Dictionary(list.map { ($0.dot, $0) }, uniquingKeysWith: { first, _ in first }),
            context: try container.decode(CausalContext.self, forKey: .context),
            floor: try container.decodeIfPresent(Stamp.self, forKey: .floor))
    }
}

extension ReviewRegister: BinaryCodable where Value: BinaryCodable {
    /// The entries in dot order (dot, value, timestamp), the context, then the floor (a 0 byte when there is
    /// none, else 1, its timestamp and its dot).
    @_specialize(exported:true,where Value == String)
    public func encode(to writer: inout BinaryWriter) {
        writer.writeVarint(entries.count)
        for dot in entries.keys.sorted() {
            let entry = entries[dot]!
            dot.encode(to: &writer)
            entry.value.encode(to: &writer)
            entry.timestamp.encode(to: &writer)
        }
        context.encode(to: &writer)
        guard let floor else { return writer.writeByte(0) }
        writer.writeByte(1)
        floor.timestamp.encode(to: &writer)
        floor.dot.encode(to: &writer)
    }

    @_specialize(exported:true,where Value == String)
    public init(from reader: inout BinaryReader) throws {
        let count = try reader.readCount(limit: reader.remaining)
        var entries: [Dot: Entry] = [:]
        for _ in 0..<count {
            let dot = try Dot(from: &reader)
            let entry = Entry(value: try Value(from: &reader), timestamp: try HLCTimestamp(from: &reader), dot: dot)
            guard entries.updateValue(entry, forKey: dot) == nil else {
                throw SyncCRDTError.invalidEncoding("a register's dot appears twice")
            }
        }
        let context = try CausalContext(from: &reader)
        let floor: Stamp?
        switch try reader.readByte() {
        case 0: floor = nil
        case 1: floor = Stamp(timestamp: try HLCTimestamp(from: &reader), dot: try Dot(from: &reader))
        default: throw SyncCRDTError.invalidEncoding("a register's floor tag is neither 0 nor 1")
        }
        self.init(entries: entries, context: context, floor: floor)
    }
}
