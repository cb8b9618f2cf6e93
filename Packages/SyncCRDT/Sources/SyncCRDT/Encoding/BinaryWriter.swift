/// Compact binary output: LEB128 varints, zigzag signed varints, raw bytes and UTF-8 scalars.
public struct BinaryWriter: Sendable {
    /// The bytes written so far.
    public private(set) var bytes: [UInt8] = []

    public init() {}

    /// A writer that appends to `bytes` (pass it with `consume` to append without a copy).
    public init(appendingTo bytes: [UInt8]) { self.bytes = bytes }

    /// Appends an unsigned LEB128 varint.
    public mutating func writeVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// Appends a non-negative `Int` as a varint.
    public mutating func writeVarint(_ value: Int) {
        precondition(value >= 0, "varints are unsigned")
        writeVarint(UInt64(value))
    }

    /// Appends a signed value, zigzag-encoded.
    public mutating func writeSigned(_ value: Int64) {
        writeVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    /// Appends one byte.
    public mutating func writeByte(_ byte: UInt8) { bytes.append(byte) }

    /// Appends bytes as they are.
    public mutating func writeRaw(_ data: some Sequence<UInt8>) { bytes.append(contentsOf: data) }

    /// Appends a varint length then the bytes.
    public mutating func writeBytes(_ data: some Collection<UInt8>) {
        writeVarint(data.count)
        bytes.append(contentsOf: data)
    }

    /// Appends a scalar's UTF-8 bytes.
    public mutating func writeUTF8(_ scalar: Unicode.Scalar) {
        let value = scalar.value
        switch value {
        case 0..<0x80:
            bytes.append(UInt8(value))
        case 0x80..<0x800:
            bytes.append(UInt8(0xC0 | (value >> 6)))
            bytes.append(UInt8(0x80 | (value & 0x3F)))
        case 0x800..<0x10000:
            bytes.append(UInt8(0xE0 | (value >> 12)))
            bytes.append(UInt8(0x80 | ((value >> 6) & 0x3F)))
            bytes.append(UInt8(0x80 | (value & 0x3F)))
        default:
            bytes.append(UInt8(0xF0 | (value >> 18)))
            bytes.append(UInt8(0x80 | ((value >> 12) & 0x3F)))
            bytes.append(UInt8(0x80 | ((value >> 6) & 0x3F)))
            bytes.append(UInt8(0x80 | (value & 0x3F)))
        }
    }
}

/// Reads what `BinaryWriter` wrote; every read throws `SyncCRDTError` (`encoding.invalid`) past the end or
/// on malformed data.
public struct BinaryReader: Sendable {
    private let bytes: [UInt8]
    /// The position of the next byte.
    public private(set) var offset: Int

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        offset = 0
    }

    /// Whether every byte was read.
    public var isAtEnd: Bool { offset == bytes.count }

    /// The number of bytes not read yet.
    public var remaining: Int { bytes.count - offset }

    public mutating func readByte() throws -> UInt8 {
        guard offset < bytes.count else { throw SyncCRDTError.invalidEncoding("unexpected end of data") }
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func readVarint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = try readByte()
            guard shift < 64 else { throw SyncCRDTError.invalidEncoding("varint too long") }
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
        }
    }

    /// Reads a varint that must fit in `Int` and be at most `limit`.
    public mutating func readCount(limit: Int = Int(Int32.max)) throws -> Int {
        let value = try readVarint()
        guard value <= UInt64(limit) else { throw SyncCRDTError.invalidEncoding("count out of range") }
        return Int(value)
    }

    public mutating func readSigned() throws -> Int64 {
        let raw = try readVarint()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    public mutating func readRaw(count: Int) throws -> ArraySlice<UInt8> {
        guard count >= 0, bytes.count - offset >= count else {
            throw SyncCRDTError.invalidEncoding("unexpected end of data")
        }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    /// Reads a varint length then that many bytes.
    public mutating func readBytes() throws -> [UInt8] {
        Array(try readRaw(count: try readCount()))
    }

    public mutating func readUTF8Scalar() throws -> Unicode.Scalar {
        let first = try readByte()
        var value: UInt32
        var extra: Int
        switch first {
        case 0..<0x80: return Unicode.Scalar(first)
        case 0xC0..<0xE0:
            value = UInt32(first & 0x1F)
            extra = 1
        case 0xE0..<0xF0:
            value = UInt32(first & 0x0F)
            extra = 2
        case 0xF0..<0xF8:
            value = UInt32(first & 0x07)
            extra = 3
        default: throw SyncCRDTError.invalidEncoding("invalid UTF-8")
        }
        for _ in 0..<extra {
            let byte = try readByte()
            guard byte & 0xC0 == 0x80 else { throw SyncCRDTError.invalidEncoding("invalid UTF-8") }
            value = value << 6 | UInt32(byte & 0x3F)
        }
        guard let scalar = Unicode.Scalar(value) else { throw SyncCRDTError.invalidEncoding("invalid UTF-8") }
        return scalar
    }
}
