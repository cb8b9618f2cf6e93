import Foundation
import SyncModels

/// A value that decodes from JSON bytes with `JSONReader`, reading exactly what its `Codable` conformance
/// reads: the same keys and checks, unknown keys skipped. Replays decode millions of operations; this is
/// the path they take.
///
/// `init(reading:)` throws `Bail` on anything it is not sure of — a missing or repeated key, a value of
/// another type, a failed check — and `decode(jsonBytes:)` then asks `JSONDecoder`, so the result is always
/// what `Codable` gives; the reader only makes the common case fast.
public protocol JSONReadable: Decodable {
    init(reading reader: inout JSONReader) throws(JSONReader.Bail)
}

extension JSONReadable {
    /// Decodes JSON bytes: by the reader, or by `JSONDecoder` where the reader bails. nil when the bytes are
    /// not this type.
    // Prespecialized for the operations of text, string lists, string sets and counters, which callers in
    // other modules otherwise decode through generic code with runtime metadata lookups.
    @_specialize(exported:true,where Self == [FugueList<Unicode.Scalar>.Operation])
    @_specialize(exported:true,where Self == FugueList<String>.Operation)
    @_specialize(exported:true,where Self == ORSet<String, AddWins>.Operation)
    @_specialize(exported:true,where Self == PNCounter.Operation)
    public static func decode(jsonBytes bytes: UnsafeRawBufferPointer) -> Self? {
        var reader = JSONReader(bytes)
        do throws(JSONReader.Bail) {
            let value = try Self(reading: &reader)
            if reader.atEnd() { return value }
        } catch {}
        return try? JSONDecoder().decode(Self.self, from: Data(bytes))
    }

    /// Decodes a parsed value (through its canonical bytes).
    public static func decode(json: JSONValue) -> Self? {
        json.canonicalData().withUnsafeBytes { decode(jsonBytes: $0) }
    }
}

/// Which keys of an object were read: a repeated key bails (`JSONDecoder` decides what it means).
struct SeenKeys {
    private var bits: UInt32 = 0

    mutating func mark(_ bit: Int) throws(JSONReader.Bail) {
        guard bits & 1 << bit == 0 else { throw JSONReader.Bail() }
        bits |= 1 << bit
    }

    func has(_ bit: Int) -> Bool { bits & 1 << bit != 0 }
}

extension JSONReader {
    /// An `Int` count.
    mutating func readInt() throws(Bail) -> Int {
        guard let value = Int(exactly: try readInt64()) else { throw Bail() }
        return value
    }

    /// `null` as nil, else a dot.
    mutating func readOptionalDot() throws(Bail) -> Dot? {
        try readNull() ? nil : try Dot(reading: &self)
    }

    /// `check` must hold, or the reader bails.
    func require(_ check: Bool) throws(Bail) {
        guard check else { throw Bail() }
    }
}

extension Dot: JSONReadable {
    /// `{"replica": "<32 hex digits>", "counter": n}`.
    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var seen = SeenKeys()
        var replica = ReplicaID(high: 0, low: 0)
        var counter: UInt64 = 0
        try reader.readObject { reader, key throws(JSONReader.Bail) in
            switch key {
            case "replica":
                try seen.mark(0)
                replica = try reader.readReplica()
            case "counter":
                try seen.mark(1)
                counter = try reader.readUInt64()
            default: try reader.skipValue()
            }
        }
        try reader.require(seen.has(0) && seen.has(1))
        self.init(replica: replica, counter: counter)
    }
}

extension VersionVector: JSONReadable {
    /// `{"version": 1, "counters": {"<replica hex>": n, ...}}`.
    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var seen = SeenKeys()
        var counters: [ReplicaID: UInt64] = [:]
        try reader.readObject { reader, key throws(JSONReader.Bail) in
            switch key {
            case "version":
                try seen.mark(0)
                try reader.require(try reader.readInt64() == CodableVersion.current)
            case "counters":
                try seen.mark(1)
                try reader.readObject { reader, key throws(JSONReader.Bail) in
                    guard let replica = try? ReplicaID(key) else { throw JSONReader.Bail() }
                    try reader.require(counters.updateValue(try reader.readUInt64(), forKey: replica) == nil)
                }
            default: try reader.skipValue()
            }
        }
        try reader.require(seen.has(0) && seen.has(1))
        self.init(counters)
    }
}

extension DotRange: JSONReadable {
    /// `{"replica", "first", "count"}`.
    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var seen = SeenKeys()
        var replica = ReplicaID(high: 0, low: 0)
        var first: UInt64 = 0
        var count: UInt64 = 0
        try reader.readObject { reader, key throws(JSONReader.Bail) in
            switch key {
            case "replica":
                try seen.mark(0)
                replica = try reader.readReplica()
            case "first":
                try seen.mark(1)
                first = try reader.readUInt64()
            case "count":
                try seen.mark(2)
                count = try reader.readUInt64()
            default: try reader.skipValue()
            }
        }
        try reader.require(seen.has(0) && seen.has(1) && seen.has(2))
        self.init(replica: replica, first: first, count: count)
    }
}

extension Array: JSONReadable where Element: JSONReadable {
    /// A JSON array of readable values.
    @_specialize(exported:true,where Element == FugueList<Unicode.Scalar>.Operation)
    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var elements: [Element] = []
        try reader.readArray { reader throws(JSONReader.Bail) in elements.append(try Element(reading: &reader)) }
        self = elements
    }
}

extension SequenceElement {
    /// The default bails: the whole operation is then decoded by `JSONDecoder` (`Unicode.Scalar` and
    /// `String` runs are read directly).
    public static func readRun(reading reader: inout JSONReader) throws(JSONReader.Bail) -> [Self] {
        throw JSONReader.Bail()
    }
}

extension Unicode.Scalar {
    /// A run of text is a string.
    public static func readRun(reading reader: inout JSONReader) throws(JSONReader.Bail) -> [Unicode.Scalar] {
        Array(try reader.readString().unicodeScalars)
    }
}

extension String {
    /// A run of strings is an array of strings.
    public static func readRun(reading reader: inout JSONReader) throws(JSONReader.Bail) -> [String] {
        var run: [String] = []
        try reader.readArray { reader throws(JSONReader.Bail) in run.append(try reader.readString()) }
        return run
    }
}

extension FugueList.Insertion: JSONReadable where Element: SequenceElement {
    /// `{"id": Dot, "count": n, "elements": run | absent, "originLeft": Dot?, "rightParent": Dot?}`.
    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var seen = SeenKeys()
        var id = Dot(replica: ReplicaID(high: 0, low: 0), counter: 0)
        var count = 0
        var elements: [Element]?
        var originLeft: Dot?
        var rightParent: Dot?
        try reader.readObject { reader, key throws(JSONReader.Bail) in
            switch key {
            case "id":
                try seen.mark(0)
                id = try Dot(reading: &reader)
            case "count":
                try seen.mark(1)
                count = try reader.readInt()
            case "elements":
                try seen.mark(2)
                elements = try Element.readRun(reading: &reader)
            case "originLeft":
                try seen.mark(3)
                originLeft = try reader.readOptionalDot()
            case "rightParent":
                try seen.mark(4)
                rightParent = try reader.readOptionalDot()
            default: try reader.skipValue()
            }
        }
        try reader.require(
            seen.has(0) && seen.has(1) && count > 0 && (elements.map { $0.count == count } ?? true)
                && id.counter >= 1 && id.counter + UInt64(count) <= ItemID.maxCounter)
        self.init(id: id, count: count, elements: elements, originLeft: originLeft, rightParent: rightParent)
    }
}

extension FugueList.Deletion: JSONReadable {
    /// `{"id": Dot, "targets": [DotRange]}`.
    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var seen = SeenKeys()
        var id = Dot(replica: ReplicaID(high: 0, low: 0), counter: 0)
        var targets: [DotRange] = []
        try reader.readObject { reader, key throws(JSONReader.Bail) in
            switch key {
            case "id":
                try seen.mark(0)
                id = try Dot(reading: &reader)
            case "targets":
                try seen.mark(1)
                targets = try [DotRange](reading: &reader)
            default: try reader.skipValue()
            }
        }
        let total = targets.reduce(UInt64(0)) { $0 &+ $1.count }
        try reader.require(
            seen.has(0) && seen.has(1) && id.counter >= 1 && total <= ItemID.maxCounter
                && id.counter + total <= ItemID.maxCounter
                && targets.allSatisfy({
                    $0.first >= 1 && $0.count <= ItemID.maxCounter && $0.first + $0.count <= ItemID.maxCounter
                }))
        self.init(id: id, targets: targets)
    }
}

extension FugueList.Operation: JSONReadable where Element: SequenceElement {
    /// `{"insert": Insertion}` or `{"delete": Deletion}` (an object with both bails).
    @_specialize(exported:true,where Element == Unicode.Scalar)
    @_specialize(exported:true,where Element == String)
    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var operation: FugueList.Operation?
        try reader.readObject { reader, key throws(JSONReader.Bail) in
            switch key {
            case "insert":
                try reader.require(operation == nil)
                operation = .insert(try FugueList.Insertion(reading: &reader))
            case "delete":
                try reader.require(operation == nil)
                operation = .delete(try FugueList.Deletion(reading: &reader))
            default: try reader.skipValue()
            }
        }
        guard let operation else { throw JSONReader.Bail() }
        self = operation
    }
}

extension ORSet.Operation: JSONReadable {
    /// `{"element", "dot", "isAdd", "observed": [Dot], "observedUpTo": VersionVector?}`; elements other than
    /// strings go to `JSONDecoder`.
    @_specialize(exported:true,where Element == String, Bias == AddWins)
    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var seen = SeenKeys()
        var element: Element?
        var dot = Dot(replica: ReplicaID(high: 0, low: 0), counter: 0)
        var isAdd = false
        var observed: [Dot] = []
        var observedUpTo = VersionVector()
        try reader.readObject { reader, key throws(JSONReader.Bail) in
            switch key {
            case "element":
                try seen.mark(0)
                guard Element.self == String.self else { throw JSONReader.Bail() }
                element = try reader.readString() as? Element
            case "dot":
                try seen.mark(1)
                dot = try Dot(reading: &reader)
            case "isAdd":
                try seen.mark(2)
                isAdd = try reader.readBool()
            case "observed":
                try seen.mark(3)
                observed = try [Dot](reading: &reader)
            case "observedUpTo":
                try seen.mark(4)
                if !(try reader.readNull()) { observedUpTo = try VersionVector(reading: &reader) }
            default: try reader.skipValue()
            }
        }
        guard let element, seen.has(1) && seen.has(2) && seen.has(3) else { throw JSONReader.Bail() }
        self.init(element: element, dot: dot, isAdd: isAdd, observed: observed, observedUpTo: observedUpTo)
    }
}

extension GCounter.Operation: JSONReadable {
    /// `{"dot": Dot, "component": n}`.
    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var seen = SeenKeys()
        var dot = Dot(replica: ReplicaID(high: 0, low: 0), counter: 0)
        var component: UInt64 = 0
        try reader.readObject { reader, key throws(JSONReader.Bail) in
            switch key {
            case "dot":
                try seen.mark(0)
                dot = try Dot(reading: &reader)
            case "component":
                try seen.mark(1)
                component = try reader.readUInt64()
            default: try reader.skipValue()
            }
        }
        try reader.require(seen.has(0) && seen.has(1))
        self.init(dot: dot, component: component)
    }
}

extension PNCounter.Operation: JSONReadable {
    /// `{"dot": Dot, "increments": n, "decrements": n}`.
    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var seen = SeenKeys()
        var dot = Dot(replica: ReplicaID(high: 0, low: 0), counter: 0)
        var increments: UInt64 = 0
        var decrements: UInt64 = 0
        try reader.readObject { reader, key throws(JSONReader.Bail) in
            switch key {
            case "dot":
                try seen.mark(0)
                dot = try Dot(reading: &reader)
            case "increments":
                try seen.mark(1)
                increments = try reader.readUInt64()
            case "decrements":
                try seen.mark(2)
                decrements = try reader.readUInt64()
            default: try reader.skipValue()
            }
        }
        try reader.require(seen.has(0) && seen.has(1) && seen.has(2))
        self.init(dot: dot, increments: increments, decrements: decrements)
    }
}
