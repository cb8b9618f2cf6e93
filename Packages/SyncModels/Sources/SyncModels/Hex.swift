/// Hexadecimal digits of the text forms (replica ids, HLCs, event ids), read from and written to UTF-8 bytes.
enum Hex {
    /// Parses exactly `count` hexadecimal digits (either case) at `start`; nil for anything else.
    static func decode(_ bytes: UnsafeRawBufferPointer, from start: Int, count: Int) -> UInt64? {
        guard count <= 16, start >= 0, start + count <= bytes.count else { return nil }
        var value: UInt64 = 0
        for index in start..<start + count {
            guard let nibble = nibble(bytes[index]) else { return nil }
            value = value << 4 | UInt64(nibble)
        }
        return value
    }

    @inline(__always)
    static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte &- UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte &- UInt8(ascii: "a") &+ 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte &- UInt8(ascii: "A") &+ 10
        default: nil
        }
    }

    static let lowercaseDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Writes `value` as `count` lowercase hexadecimal digits at `start`.
    static func write(_ value: UInt64, count: Int, to buffer: UnsafeMutableBufferPointer<UInt8>, at start: Int) {
        var value = value
        for index in stride(from: start + count - 1, through: start, by: -1) {
            buffer[index] = lowercaseDigits[Int(value & 0xF)]
            value >>= 4
        }
    }
}
