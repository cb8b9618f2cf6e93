enum Hex {
    /// Lowercase hexadecimal of `value`, left-padded with zeros to `width` digits.
    static func encode(_ value: UInt64, width: Int) -> String {
        let digits = String(value, radix: 16)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    /// Parses exactly `width` hexadecimal digits (either case); nil for anything else.
    static func decode<S: StringProtocol>(_ text: S, width: Int) -> UInt64? {
        guard text.utf8.count == width, width <= 16 else { return nil }
        var value: UInt64 = 0
        for byte in text.utf8 {
            let nibble: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt64(nibble)
        }
        return value
    }
}
