/// A hybrid logical clock timestamp: 48-bit physical milliseconds, a 16-bit logical counter, and the
/// 64-bit node id of the replica that issued it (the upper half of its `ReplicaID`).
///
/// Timestamps order by `(physical, counter, node)`, so two different replicas never issue equal timestamps
/// and last-writer-wins always has a winner. The string form,
/// `"0000018f4e3a5b7c:0003:6d2c1f0e9a8b4c7d"`, has fixed width, so comparing strings gives the same order as
/// comparing timestamps (SQLite and PostgreSQL can sort by it as text).
public struct HLCTimestamp: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The largest physical time that fits in 48 bits.
    public static let maxPhysical: UInt64 = (1 << 48) - 1

    /// Milliseconds since the Unix epoch, at most `maxPhysical`.
    public let physical: UInt64
    public let counter: UInt16
    public let node: UInt64

    /// - Precondition: `physical <= HLCTimestamp.maxPhysical`.
    public init(physical: UInt64, counter: UInt16, node: UInt64) {
        precondition(physical <= Self.maxPhysical, "HLC physical time is 48 bits")
        self.physical = physical
        self.counter = counter
        self.node = node
    }

    /// The smallest timestamp; every issued timestamp is greater.
    public static let zero = HLCTimestamp(physical: 0, counter: 0, node: 0)

    /// Parses the fixed-width string form.
    /// - Throws: `SyncModelsError` with code `hlc.invalid` for anything else.
    public init(_ text: String) throws {
        var text = text
        self = try text.withUTF8 { try HLCTimestamp(utf8: UnsafeRawBufferPointer($0)) }
    }

    public var description: String {
        String(unsafeUninitializedCapacity: 38) { buffer in
            Hex.write(physical, count: 16, to: buffer, at: 0)
            buffer[16] = UInt8(ascii: ":")
            Hex.write(UInt64(counter), count: 4, to: buffer, at: 17)
            buffer[21] = UInt8(ascii: ":")
            Hex.write(node, count: 16, to: buffer, at: 22)
            return 38
        }
    }

    public static func < (lhs: HLCTimestamp, rhs: HLCTimestamp) -> Bool {
        (lhs.physical, lhs.counter, lhs.node) < (rhs.physical, rhs.counter, rhs.node)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        do {
            try self.init(try container.decode(String.self))
        } catch let error as SyncModelsError {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.message)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
