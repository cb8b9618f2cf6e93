/// The identity of one replica: one local database on one device, or the server.
///
/// A random 128-bit value created once per database and persisted with it. Its string form is 32 lowercase
/// hexadecimal digits, as on the wire (`dot.replica`). Replica ids order by their bits, which gives a total,
/// arbitrary but stable tie-break wherever two replicas must be ordered.
public struct ReplicaID: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The upper 64 bits; also the node part of this replica's HLC timestamps.
    public let high: UInt64
    /// The lower 64 bits.
    public let low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A new random replica id.
    public static func random() -> ReplicaID {
        var generator = SystemRandomNumberGenerator()
        return random(using: &generator)
    }

    /// A new random replica id from `generator` (seeded generators make tests reproducible).
    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> ReplicaID {
        ReplicaID(high: generator.next(), low: generator.next())
    }

    /// Parses 32 hexadecimal digits.
    /// - Throws: `SyncModelsError` with code `replica.invalid` for anything else.
    public init(_ text: String) throws {
        var text = text
        self = try text.withUTF8 { try ReplicaID(utf8: UnsafeRawBufferPointer($0)) }
    }

    public var description: String {
        String(unsafeUninitializedCapacity: 32) { buffer in
            Hex.write(high, count: 16, to: buffer, at: 0)
            Hex.write(low, count: 16, to: buffer, at: 16)
            return 32
        }
    }

    public static func < (lhs: ReplicaID, rhs: ReplicaID) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
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
