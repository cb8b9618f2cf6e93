import SyncModels

/// A value with a compact binary form: varints, no keys, no version per value (a container that stores it
/// versions the whole). Decoding restores a value equal to the one encoded.
///
/// Used to store CRDT state (a projection keeps one per row and reloads it on every write), where the JSON
/// form of `Codable` costs many times more to write and read.
public protocol BinaryCodable {
    func encode(to writer: inout BinaryWriter)
    init(from reader: inout BinaryReader) throws
}

extension BinaryCodable {
    /// The binary form alone.
    public var binaryEncoded: [UInt8] {
        var writer = BinaryWriter()
        encode(to: &writer)
        return writer.bytes
    }

    /// Decodes a value that `binaryEncoded` produced.
    /// - Throws: `SyncCRDTError` `encoding.invalid` for anything else, trailing bytes included.
    public init(binaryEncoded bytes: [UInt8]) throws {
        var reader = BinaryReader(bytes)
        self = try Self(from: &reader)
        guard reader.isAtEnd else { throw SyncCRDTError.invalidEncoding("trailing bytes") }
    }
}

extension String: BinaryCodable {
    public func encode(to writer: inout BinaryWriter) { writer.writeBytes(utf8) }
    public init(from reader: inout BinaryReader) throws {
        let bytes = try reader.readBytes()
        guard let string = String(validating: bytes, as: UTF8.self) else {
            throw SyncCRDTError.invalidEncoding("a string is not UTF-8")
        }
        self = string
    }
}

extension Bool: BinaryCodable {
    public func encode(to writer: inout BinaryWriter) { writer.writeByte(self ? 1 : 0) }
    public init(from reader: inout BinaryReader) throws {
        switch try reader.readByte() {
        case 0: self = false
        case 1: self = true
        default: throw SyncCRDTError.invalidEncoding("a boolean is neither 0 nor 1")
        }
    }
}

extension UInt64: BinaryCodable {
    public func encode(to writer: inout BinaryWriter) { writer.writeVarint(self) }
    public init(from reader: inout BinaryReader) throws { self = try reader.readVarint() }
}

extension Int64: BinaryCodable {
    public func encode(to writer: inout BinaryWriter) { writer.writeSigned(self) }
    public init(from reader: inout BinaryReader) throws { self = try reader.readSigned() }
}

extension Int: BinaryCodable {
    public func encode(to writer: inout BinaryWriter) { writer.writeSigned(Int64(self)) }
    public init(from reader: inout BinaryReader) throws {
        guard let value = Int(exactly: try reader.readSigned()) else {
            throw SyncCRDTError.invalidEncoding("an integer is out of range")
        }
        self = value
    }
}

extension ReplicaID: BinaryCodable {
    public func encode(to writer: inout BinaryWriter) {
        writer.writeVarint(high)
        writer.writeVarint(low)
    }
    public init(from reader: inout BinaryReader) throws {
        self.init(high: try reader.readVarint(), low: try reader.readVarint())
    }
}

extension Dot: BinaryCodable {
    public func encode(to writer: inout BinaryWriter) {
        replica.encode(to: &writer)
        writer.writeVarint(counter)
    }
    public init(from reader: inout BinaryReader) throws {
        self.init(replica: try ReplicaID(from: &reader), counter: try reader.readVarint())
    }
}

extension HLCTimestamp: BinaryCodable {
    public func encode(to writer: inout BinaryWriter) {
        writer.writeVarint(physical)
        writer.writeVarint(UInt64(counter))
        writer.writeVarint(node)
    }
    public init(from reader: inout BinaryReader) throws {
        let physical = try reader.readVarint()
        guard let counter = UInt16(exactly: try reader.readVarint()) else {
            throw SyncCRDTError.invalidEncoding("an HLC counter is out of range")
        }
        self.init(physical: physical, counter: counter, node: try reader.readVarint())
    }
}

extension Optional: BinaryCodable where Wrapped: BinaryCodable {
    public func encode(to writer: inout BinaryWriter) {
        switch self {
        case .none: writer.writeByte(0)
        case .some(let value):
            writer.writeByte(1)
            value.encode(to: &writer)
        }
    }
    public init(from reader: inout BinaryReader) throws {
        switch try reader.readByte() {
        case 0: self = .none
        case 1: self = .some(try Wrapped(from: &reader))
        default: throw SyncCRDTError.invalidEncoding("an optional's tag is neither 0 nor 1")
        }
    }
}

extension Array: BinaryCodable where Element: BinaryCodable {
    public func encode(to writer: inout BinaryWriter) {
        writer.writeVarint(count)
        for element in self { element.encode(to: &writer) }
    }
    public init(from reader: inout BinaryReader) throws {
        let count = try reader.readCount(limit: reader.remaining)
        self.init()
        reserveCapacity(count)
        for _ in 0..<count { append(try Element(from: &reader)) }
    }
}

extension Dictionary: BinaryCodable where Key: BinaryCodable & Comparable, Value: BinaryCodable {
    /// Entries sorted by key, so equal dictionaries encode to equal bytes.
    @_specialize(exported:true,where Key == String, Value == LWWRegister<String>)
    @_specialize(exported:true,where Key == String, Value == LWWRegister<Bool>)
    public func encode(to writer: inout BinaryWriter) {
        writer.writeVarint(count)
        for key in keys.sorted() {
            key.encode(to: &writer)
            self[key]!.encode(to: &writer)
        }
    }
    public init(from reader: inout BinaryReader) throws {
        let count = try reader.readCount(limit: reader.remaining)
        self.init(minimumCapacity: count)
        for _ in 0..<count {
            let key = try Key(from: &reader)
            guard updateValue(try Value(from: &reader), forKey: key) == nil else {
                throw SyncCRDTError.invalidEncoding("a key appears twice")
            }
        }
    }
}

extension VersionVector: BinaryCodable {
    public func encode(to writer: inout BinaryWriter) { counters.encode(to: &writer) }
    public init(from reader: inout BinaryReader) throws { self.init(try [ReplicaID: UInt64](from: &reader)) }
}

extension CausalContext: BinaryCodable {
    public func encode(to writer: inout BinaryWriter) {
        versionVector.encode(to: &writer)
        dotCloud.sorted().encode(to: &writer)
    }
    public init(from reader: inout BinaryReader) throws {
        self.init(versionVector: try VersionVector(from: &reader), dots: try [Dot](from: &reader))
    }
}

extension LWWRegister: BinaryCodable where Value: BinaryCodable {
    // Inlinable (every saved note encodes several registers): callers in other modules otherwise run the
    // generic code, with runtime metadata lookups. (An exported prespecialization of this function was not
    // emitted by the compiler.)
    @inlinable
    public func encode(to writer: inout BinaryWriter) {
        guard let winner else { return writer.writeByte(0) }
        writer.writeByte(1)
        winner.value.encode(to: &writer)
        winner.timestamp.encode(to: &writer)
        winner.dot.encode(to: &writer)
    }
    // Prespecialized for the registers a domain stores, as `apply` is.
    @_specialize(exported:true,where Value == String)
    @_specialize(exported:true,where Value == Bool)
    public init(from reader: inout BinaryReader) throws {
        switch try reader.readByte() {
        case 0: self.init()
        case 1:
            self.init(
                Assignment(
                    value: try Value(from: &reader), timestamp: try HLCTimestamp(from: &reader),
                    dot: try Dot(from: &reader)))
        default: throw SyncCRDTError.invalidEncoding("a register's tag is neither 0 nor 1")
        }
    }
}

extension GCounter: BinaryCodable {
    public func encode(to writer: inout BinaryWriter) { components.encode(to: &writer) }
    public init(from reader: inout BinaryReader) throws {
        self.init()
        components = try [ReplicaID: UInt64](from: &reader)
    }
}

extension PNCounter: BinaryCodable {
    public func encode(to writer: inout BinaryWriter) {
        increments.encode(to: &writer)
        decrements.encode(to: &writer)
    }
    public init(from reader: inout BinaryReader) throws {
        self.init()
        increments = try GCounter(from: &reader)
        decrements = try GCounter(from: &reader)
    }
}

extension ORSet: BinaryCodable where Element: BinaryCodable & Comparable {
    /// Entries by element, each with its dots (sorted) and their add flags; the context; the compacted
    /// version; the floors (deltas only).
    @_specialize(exported:true,where Element == String, Bias == AddWins)
    public func encode(to writer: inout BinaryWriter) {
        writer.writeVarint(entries.count)
        for element in entries.keys.sorted() {
            element.encode(to: &writer)
            let tokens = entries[element]!
            writer.writeVarint(tokens.count)
            for dot in tokens.keys.sorted() {
                dot.encode(to: &writer)
                tokens[dot]!.encode(to: &writer)
            }
        }
        context.encode(to: &writer)
        compactedVersion.encode(to: &writer)
        floors.encode(to: &writer)
    }

    public init(from reader: inout BinaryReader) throws {
        self.init()
        let count = try reader.readCount(limit: reader.remaining)
        for _ in 0..<count {
            let element = try Element(from: &reader)
            let tokenCount = try reader.readCount(limit: reader.remaining)
            var tokens: [Dot: Bool] = [:]
            for _ in 0..<tokenCount { tokens[try Dot(from: &reader)] = try Bool(from: &reader) }
            guard entries.updateValue(tokens, forKey: element) == nil else {
                throw SyncCRDTError.invalidEncoding("an element appears twice")
            }
        }
        context = try CausalContext(from: &reader)
        compactedVersion = try VersionVector(from: &reader)
        floors = try [Element: VersionVector](from: &reader)
    }
}

extension FugueList: BinaryCodable where Element: SequenceElement {
    /// `encoded(includingDeletedContent: true)`, length-prefixed: the whole list, deleted text included, so
    /// the decoded list equals this one.
    /// An empty list (nothing seen, nothing waiting) is zero bytes.
    // Prespecialized for text and for lists of strings, as `apply` is: callers in other modules otherwise run
    // the generic code, with runtime metadata lookups.
    @_specialize(exported:true,where Element == Unicode.Scalar)
    @_specialize(exported:true,where Element == String)
    public func encode(to writer: inout BinaryWriter) {
        if core.tree.totalCount == 0 && pending.isEmpty && version.isEmpty {
            writer.writeBytes([])
        } else {
            writer.writeBytes(encoded(includingDeletedContent: true))
        }
    }
    public init(from reader: inout BinaryReader) throws {
        let bytes = try reader.readBytes()
        if bytes.isEmpty { self.init() } else { try self.init(encoded: bytes) }
    }
}
