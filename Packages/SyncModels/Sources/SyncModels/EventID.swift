import Foundation

/// The id of an event: a UUID, version 7 when made by this package (RFC 9562: 48-bit Unix milliseconds,
/// then a 12-bit counter, then 62 random bits).
///
/// Event ids are made by clients with no coordination and are the idempotency key of a push. They order
/// by their bytes, which for version 7 is creation order on one replica. The string form is lowercase.
public struct EventID: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public let uuid: UUID

    public init(uuid: UUID) {
        self.uuid = uuid
    }

    /// Parses a UUID string (either case).
    /// - Throws: `SyncModelsError` with code `eventID.invalid` if `text` is not a UUID.
    public init(_ text: String) throws {
        // Parsed by hand: Foundation's UUID(uuidString:) goes through sscanf, which showed in rebuild profiles.
        var text = text
        self = try text.withUTF8 { try EventID(utf8: UnsafeRawBufferPointer($0)) }
    }

    /// The 16 bytes, most significant first.
    public var bytes: [UInt8] {
        withUnsafeBytes(of: uuid.uuid) { Array($0) }
    }

    /// The RFC 9562 version nibble.
    public var version: Int { Int(uuid.uuid.6 >> 4) }

    /// Whether this is a version-7 UUID with the RFC 9562 variant.
    public var isVersion7: Bool { version == 7 && uuid.uuid.8 & 0xC0 == 0x80 }

    /// For a version-7 id, the Unix milliseconds it carries.
    public var milliseconds: UInt64 {
        halves.0 >> 16
    }

    public var description: String { lowercaseString }

    /// The 16 bytes as two big-endian halves, for allocation-free comparison.
    var halves: (UInt64, UInt64) {
        withUnsafeBytes(of: uuid.uuid) { raw in
            (
                UInt64(bigEndian: raw.loadUnaligned(as: UInt64.self)),
                UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            )
        }
    }

    public static func < (lhs: EventID, rhs: EventID) -> Bool {
        lhs.halves < rhs.halves
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
