import Foundation
import SyncModels

/// Decoding straight from a parsed `JSONValue`, reading exactly the format the type's `Codable` conformance
/// reads (same keys, same checks, unknown keys ignored), without the `JSONDecoder` round trip. Replays decode
/// millions of operations: this is the path they take.
public protocol JSONValueDecodable {
    /// Decodes `json`.
    /// - Throws: `SyncCRDTError` `encoding.invalid` when it has another shape or fails a check.
    init(json: JSONValue) throws
}

/// The small readers the decoders share.
enum JSONField {
    static func object(_ json: JSONValue, _ what: String) throws -> [String: JSONValue] {
        guard case .object(let object) = json else { throw SyncCRDTError.invalidEncoding("\(what) is not an object") }
        return object
    }

    static func array(_ json: JSONValue?, _ what: String) throws -> [JSONValue] {
        guard case .array(let array)? = json else { throw SyncCRDTError.invalidEncoding("\(what) is not an array") }
        return array
    }

    static func unsigned(_ json: JSONValue?, _ what: String) throws -> UInt64 {
        guard case .int(let value)? = json, value >= 0 else {
            throw SyncCRDTError.invalidEncoding("\(what) is not an unsigned integer")
        }
        return UInt64(value)
    }

    static func int(_ json: JSONValue?, _ what: String) throws -> Int {
        guard case .int(let value)? = json, let int = Int(exactly: value) else {
            throw SyncCRDTError.invalidEncoding("\(what) is not an integer")
        }
        return int
    }

    static func bool(_ json: JSONValue?, _ what: String) throws -> Bool {
        guard case .bool(let value)? = json else { throw SyncCRDTError.invalidEncoding("\(what) is not a boolean") }
        return value
    }

    static func string(_ json: JSONValue?, _ what: String) throws -> String {
        guard case .string(let value)? = json else { throw SyncCRDTError.invalidEncoding("\(what) is not a string") }
        return value
    }

    static func replica(_ json: JSONValue?) throws -> ReplicaID {
        do {
            return try ReplicaID(string(json, "replica"))
        } catch let error as SyncModelsError {
            throw SyncCRDTError.invalidEncoding(error.message)
        }
    }

    static func dot(_ json: JSONValue?) throws -> Dot {
        guard let json else { throw SyncCRDTError.invalidEncoding("a dot is missing") }
        return try Dot(json: json)
    }

    /// A key that `decodeIfPresent` reads: absent and null are both nil.
    static func optionalDot(_ json: JSONValue?) throws -> Dot? {
        guard let json, json != .null else { return nil }
        return try Dot(json: json)
    }

    /// Any `Decodable` value through Foundation: the general fallback for element types without a fast path.
    static func decode<T: Decodable>(_ type: T.Type, _ json: JSONValue) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: json.canonicalData())
        } catch {
            throw SyncCRDTError.invalidEncoding("\(T.self) does not decode")
        }
    }
}

extension Dot: JSONValueDecodable {
    /// `{"replica": "<32 hex digits>", "counter": n}`.
    public init(json: JSONValue) throws {
        let object = try JSONField.object(json, "a dot")
        self.init(
            replica: try JSONField.replica(object["replica"]),
            counter: try JSONField.unsigned(object["counter"], "counter"))
    }
}

extension VersionVector: JSONValueDecodable {
    /// `{"version": 1, "counters": {"<replica hex>": n, ...}}`.
    public init(json: JSONValue) throws {
        let object = try JSONField.object(json, "a version vector")
        let version = try JSONField.int(object["version"], "version")
        guard version == CodableVersion.current else { throw SyncCRDTError.unsupportedVersion(version) }
        let byText = try JSONField.object(object["counters"] ?? .null, "counters")
        var counters: [ReplicaID: UInt64] = [:]
        for (text, counter) in byText {
            counters[try JSONField.replica(.string(text))] = try JSONField.unsigned(counter, "a counter")
        }
        self.init(counters)
    }
}

extension DotRange: JSONValueDecodable {
    /// `{"replica", "first", "count"}`.
    public init(json: JSONValue) throws {
        let object = try JSONField.object(json, "a dot range")
        self.init(
            replica: try JSONField.replica(object["replica"]), first: try JSONField.unsigned(object["first"], "first"),
            count: try JSONField.unsigned(object["count"], "count"))
    }
}

extension SequenceElement {
    /// The default: through `decodeRun(from:)` (`Unicode.Scalar` and `String` read the value directly).
    public static func decodeRun(json: JSONValue) throws -> [Self] {
        try JSONField.decode(RunBox<Self>.self, json).elements
    }
}

/// Lets the `Decoder`-based `decodeRun(from:)` serve as the fallback of `decodeRun(json:)`.
private struct RunBox<Element: SequenceElement>: Decodable {
    var elements: [Element]
    init(from decoder: any Decoder) throws { elements = try Element.decodeRun(from: decoder) }
}

extension Unicode.Scalar {
    public static func decodeRun(json: JSONValue) throws -> [Unicode.Scalar] {
        Array(try JSONField.string(json, "a run of text").unicodeScalars)
    }
}

extension String {
    public static func decodeRun(json: JSONValue) throws -> [String] {
        try JSONField.array(json, "a run").map { try JSONField.string($0, "an element") }
    }
}

extension FugueList.Insertion: JSONValueDecodable where Element: SequenceElement {
    /// `{"id": Dot, "count": n, "elements": run | absent, "originLeft": Dot?, "rightParent": Dot?}`.
    public init(json: JSONValue) throws {
        let object = try JSONField.object(json, "an insertion")
        let id = try JSONField.dot(object["id"])
        let count = try JSONField.int(object["count"], "count")
        let elements = try object["elements"].map { try Element.decodeRun(json: $0) }
        guard count > 0, elements.map({ $0.count == count }) ?? true, id.counter >= 1,
            id.counter + UInt64(count) <= ItemID.maxCounter
        else { throw SyncCRDTError.invalidEncoding("count does not match the elements") }
        self.init(
            id: id, count: count, elements: elements, originLeft: try JSONField.optionalDot(object["originLeft"]),
            rightParent: try JSONField.optionalDot(object["rightParent"]))
    }
}

extension FugueList.Deletion: JSONValueDecodable {
    /// `{"id": Dot, "targets": [DotRange]}`.
    public init(json: JSONValue) throws {
        let object = try JSONField.object(json, "a deletion")
        let id = try JSONField.dot(object["id"])
        let targets = try JSONField.array(object["targets"], "targets").map(DotRange.init(json:))
        let total = targets.reduce(UInt64(0)) { $0 &+ $1.count }
        guard id.counter >= 1, total <= ItemID.maxCounter, id.counter + total <= ItemID.maxCounter,
            targets.allSatisfy({
                $0.first >= 1 && $0.count <= ItemID.maxCounter && $0.first + $0.count <= ItemID.maxCounter
            })
        else { throw SyncCRDTError.invalidEncoding("counter out of range") }
        self.init(id: id, targets: targets)
    }
}

extension FugueList.Operation: JSONValueDecodable where Element: SequenceElement {
    /// `{"insert": Insertion}` or `{"delete": Deletion}`.
    public init(json: JSONValue) throws {
        let object = try JSONField.object(json, "a sequence operation")
        if let insertion = object["insert"] {
            self = .insert(try FugueList.Insertion(json: insertion))
        } else {
            self = .delete(try FugueList.Deletion(json: object["delete"] ?? .null))
        }
    }
}

extension ORSet.Operation: JSONValueDecodable {
    /// `{"element", "dot", "isAdd", "observed": [Dot], "observedUpTo": VersionVector?}`.
    public init(json: JSONValue) throws {
        let object = try JSONField.object(json, "a set operation")
        guard let element = object["element"] else { throw SyncCRDTError.invalidEncoding("element is missing") }
        self.init(
            element: try Self.element(element), dot: try JSONField.dot(object["dot"]),
            isAdd: try JSONField.bool(object["isAdd"], "isAdd"),
            observed: try JSONField.array(object["observed"], "observed").map(Dot.init(json:)),
            observedUpTo: try object["observedUpTo"].flatMap { $0 == .null ? nil : try VersionVector(json: $0) }
                ?? VersionVector())
    }

    private static func element(_ json: JSONValue) throws -> Element {
        if Element.self == String.self, case .string(let string) = json { return string as! Element }
        return try JSONField.decode(Element.self, json)
    }
}

extension GCounter.Operation: JSONValueDecodable {
    /// `{"dot": Dot, "component": n}`.
    public init(json: JSONValue) throws {
        let object = try JSONField.object(json, "a counter operation")
        self.init(
            dot: try JSONField.dot(object["dot"]), component: try JSONField.unsigned(object["component"], "component"))
    }
}

extension PNCounter.Operation: JSONValueDecodable {
    /// `{"dot": Dot, "increments": n, "decrements": n}`.
    public init(json: JSONValue) throws {
        let object = try JSONField.object(json, "a counter operation")
        self.init(
            dot: try JSONField.dot(object["dot"]),
            increments: try JSONField.unsigned(object["increments"], "increments"),
            decrements: try JSONField.unsigned(object["decrements"], "decrements"))
    }
}

extension Array: JSONValueDecodable where Element: JSONValueDecodable {
    /// A JSON array of decodable values.
    public init(json: JSONValue) throws {
        self = try JSONField.array(json, "a list").map(Element.init(json:))
    }
}
