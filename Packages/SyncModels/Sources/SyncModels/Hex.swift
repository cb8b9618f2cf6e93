/// Hexadecimal digits of the text forms (replica ids, HLCs, event ids), read from and written to UTF-8 bytes.
enum Hex {
    /// Parses exactly `count` hexadecimal digits (either case) at `start`; nil for anything else.
    /// Without a branch per digit: each byte's value comes from a table where anything but a hexadecimal
    /// digit has its high bits set, and those bits are checked once at the end (ids, clocks and replicas of
    /// every replayed event go through here).
    static func decode(_ bytes: UnsafeRawBufferPointer, from start: Int, count: Int) -> UInt64? {
        guard count <= 16, start >= 0, start + count <= bytes.count else { return nil }
        return nibbles.withUnsafeBufferPointer { table in
            var value: UInt64 = 0
            var invalid: UInt8 = 0
            for index in start..<start + count {
                let nibble = table[Int(bytes[index])]
                invalid |= nibble
                value = value << 4 | UInt64(nibble & 0x0F)
            }
            return invalid & 0xF0 == 0 ? value : nil
        }
    }

    /// The value of each byte as a hexadecimal digit, 0xFF for any other byte.
    private static let nibbles: [UInt8] = (0...255).map { nibble(UInt8($0)) ?? 0xFF }

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
