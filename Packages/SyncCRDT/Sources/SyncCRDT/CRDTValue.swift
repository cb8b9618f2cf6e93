import SyncModels

/// Any of the package's CRDTs as one type, so that an `ORMap<String, CRDTValue>` holds a whole record (a note:
/// a title register, a body text, a tag set, a view counter, a checklist…) as a single CRDT.
///
/// Values of the same kind merge as that kind. `.empty` is the neutral element. Two different kinds at one
/// key (a modelling error) still merge deterministically: the kind later in declaration order wins.
public indirect enum CRDTValue: CRDT, Compactable, EmptyInitializable, Codable {
    case empty
    case counter(PNCounter)
    case register(LWWRegister<JSONValue>)
    case values(MVRegister<JSONValue>)
    case set(AddWinsSet<JSONValue>)
    case text(FugueText)
    case list(FugueList<String>)
    case map(ORMap<String, CRDTValue>)

    public init() { self = .empty }

    private var rank: Int {
        switch self {
        case .empty: 0
        case .counter: 1
        case .register: 2
        case .values: 3
        case .set: 4
        case .text: 5
        case .list: 6
        case .map: 7
        }
    }

    /// An empty value of the same kind.
    private var emptied: CRDTValue {
        switch self {
        case .empty: .empty
        case .counter: .counter(PNCounter())
        case .register: .register(LWWRegister())
        case .values: .values(MVRegister())
        case .set: .set(AddWinsSet())
        case .text: .text(FugueText())
        case .list: .list(FugueList())
        case .map: .map(ORMap())
        }
    }

    public mutating func merge(_ other: CRDTValue) {
        // A value of a later kind replaces this one: start from an empty value of that kind, so that a delta
        // (whose operations may still wait for their anchors) is applied, not adopted as it is.
        if other.rank > rank { self = other.emptied }
        switch (self, other) {
        case (.counter(var mine), .counter(let theirs)):
            mine.merge(theirs)
            self = .counter(mine)
        case (.register(var mine), .register(let theirs)):
            mine.merge(theirs)
            self = .register(mine)
        case (.values(var mine), .values(let theirs)):
            mine.merge(theirs)
            self = .values(mine)
        case (.set(var mine), .set(let theirs)):
            mine.merge(theirs)
            self = .set(mine)
        case (.text(var mine), .text(let theirs)):
            mine.merge(theirs)
            self = .text(mine)
        case (.list(var mine), .list(let theirs)):
            mine.merge(theirs)
            self = .list(mine)
        case (.map(var mine), .map(let theirs)):
            mine.merge(theirs)
            self = .map(mine)
        default:
            break
        }
    }

    public mutating func compact(stableAt stable: VersionVector) {
        switch self {
        case .empty, .counter, .register: break
        case .values(var value):
            value.compact(stableAt: stable)
            self = .values(value)
        case .set(var value):
            value.compact(stableAt: stable)
            self = .set(value)
        case .text(var value):
            value.compact(stableAt: stable)
            self = .text(value)
        case .list(var value):
            value.compact(stableAt: stable)
            self = .list(value)
        case .map(var value):
            value.compact(stableAt: stable)
            self = .map(value)
        }
    }

    /// The counter (empty if this is not one).
    public var counter: PNCounter { if case .counter(let value) = self { value } else { PNCounter() } }
    /// The last-writer-wins register (empty if this is not one).
    public var register: LWWRegister<JSONValue> {
        if case .register(let value) = self { value } else { LWWRegister() }
    }
    /// The multi-value register (empty if this is not one).
    public var values: MVRegister<JSONValue> { if case .values(let value) = self { value } else { MVRegister() } }
    /// The add-wins set (empty if this is not one).
    public var set: AddWinsSet<JSONValue> { if case .set(let value) = self { value } else { AddWinsSet() } }
    /// The text (empty if this is not one).
    public var text: FugueText { if case .text(let value) = self { value } else { FugueText() } }
    /// The list (empty if this is not one).
    public var list: FugueList<String> { if case .list(let value) = self { value } else { FugueList() } }
    /// The map (empty if this is not one).
    public var map: ORMap<String, CRDTValue> { if case .map(let value) = self { value } else { ORMap() } }

    private enum CodingKeys: String, CodingKey { case version, kind, value }

    /// `{"version": 1, "kind": "text", "value": …}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(CodableVersion.current, forKey: .version)
        switch self {
        case .empty: try container.encode("empty", forKey: .kind)
        case .counter(let value):
            try container.encode("counter", forKey: .kind)
            try container.encode(value, forKey: .value)
        case .register(let value):
            try container.encode("register", forKey: .kind)
            try container.encode(value, forKey: .value)
        case .values(let value):
            try container.encode("values", forKey: .kind)
            try container.encode(value, forKey: .value)
        case .set(let value):
            try container.encode("set", forKey: .kind)
            try container.encode(value, forKey: .value)
        case .text(let value):
            try container.encode("text", forKey: .kind)
            try container.encode(value, forKey: .value)
        case .list(let value):
            try container.encode("list", forKey: .kind)
            try container.encode(value, forKey: .value)
        case .map(let value):
            try container.encode("map", forKey: .kind)
            try container.encode(value, forKey: .value)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try CodableVersion.check(container, key: .version)
        switch try container.decode(String.self, forKey: .kind) {
        case "empty": self = .empty
        case "counter": self = .counter(try container.decode(PNCounter.self, forKey: .value))
        case "register": self = .register(try container.decode(LWWRegister<JSONValue>.self, forKey: .value))
        case "values": self = .values(try container.decode(MVRegister<JSONValue>.self, forKey: .value))
        case "set": self = .set(try container.decode(AddWinsSet<JSONValue>.self, forKey: .value))
        case "text": self = .text(try container.decode(FugueText.self, forKey: .value))
        case "list": self = .list(try container.decode(FugueList<String>.self, forKey: .value))
        case "map": self = .map(try container.decode(ORMap<String, CRDTValue>.self, forKey: .value))
        default:
            throw DecodingError.dataCorruptedError(forKey: .kind, in: container, debugDescription: "unknown kind")
        }
    }
}
