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
        let invalid = SyncModelsError.invalid("eventID", "an event id is a UUID")
        var text = text
        let parsed: [UInt8]? = text.withUTF8 { utf8 -> [UInt8]? in
            guard utf8.count == 36 else { return nil }
            var bytes = [UInt8](repeating: 0, count: 16)
            var byteIndex = 0
            var index = 0
            while index < 36 {
                if index == 8 || index == 13 || index == 18 || index == 23 {
                    guard utf8[index] == UInt8(ascii: "-") else { return nil }
                    index += 1
                    continue
                }
                guard let high = Self.nibble(utf8[index]), let low = Self.nibble(utf8[index + 1]) else { return nil }
                bytes[byteIndex] = high << 4 | low
                byteIndex += 1
                index += 2
            }
            return bytes
        }
        guard let b = parsed else { throw invalid }
        self.uuid = UUID(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        )
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
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

    public var description: String { uuid.uuidString.lowercased() }

    /// The 16 bytes as two big-endian halves, for allocation-free comparison.
    private var halves: (UInt64, UInt64) {
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
