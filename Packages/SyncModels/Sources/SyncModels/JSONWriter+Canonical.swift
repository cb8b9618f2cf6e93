extension JSONWriter {
    /// Whether `bytes`, one JSON value that `JSONReader` accepts, are already what `value(_:)` writes for the
    /// value they hold (see the canonical form on the type): no whitespace, keys in order, strings escaped
    /// as `string(_:)` escapes them, integers in plain decimal.
    ///
    /// Conservative: false for any number with a fraction or an exponent (a double's shortest form is not
    /// checked here), for an integer of more than 18 digits and for a key with an escape in it. A caller that
    /// stores canonical bytes (the client's log, for payloads read off the wire) keeps `bytes` when this
    /// holds and writes the value again otherwise, so it never stores anything but the canonical form.
    public static func isCanonical(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var scanner = CanonicalScanner(bytes: bytes)
        return scanner.value() && scanner.index == bytes.count
    }
}

/// The check of `JSONWriter.isCanonical`, over bytes a `JSONReader` accepted.
private struct CanonicalScanner {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func value() -> Bool {
        guard let byte = current else { return false }
        switch byte {
        case UInt8(ascii: "{"): return object()
        case UInt8(ascii: "["): return array()
        case UInt8(ascii: "\""): return string() != nil
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
        default: return false
        }
    }

    private mutating func object() -> Bool {
        index += 1
        if current == UInt8(ascii: "}") {
            index += 1
            return true
        }
        var previous: Range<Int>? = nil
        while true {
            guard current == UInt8(ascii: "\""), let key = string(), !key.escaped else { return false }
            // Keys by their UTF-8 bytes, each after the one before (`JSONWriter.precedes`).
            if let previous,
                !bytes[previous].lexicographicallyPrecedes(bytes[key.range])
            {
                return false
            }
            previous = key.range
            guard current == UInt8(ascii: ":") else { return false }
            index += 1
            guard value() else { return false }
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return true
            default: return false
            }
        }
    }

    private mutating func array() -> Bool {
        index += 1
        if current == UInt8(ascii: "]") {
            index += 1
            return true
        }
        while true {
            guard value() else { return false }
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return true
            default: return false
            }
        }
    }

    /// A string at `index`: the range of its content and whether it holds an escape; nil when it is not
    /// escaped as `JSONWriter` escapes.
    private mutating func string() -> (range: Range<Int>, escaped: Bool)? {
        index += 1
        let start = index
        var escaped = false
        while let byte = current {
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return (start..<index - 1, escaped)
            case UInt8(ascii: "\\"):
                escaped = true
                guard index + 1 < bytes.count else { return nil }
                switch bytes[index + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"),
                    UInt8(ascii: "b"), UInt8(ascii: "f"):
                    index += 2
                case UInt8(ascii: "u"):
                    // Only the controls without a short escape, as `\u00xx` in lowercase hex.
                    guard index + 5 < bytes.count, bytes[index + 2] == UInt8(ascii: "0"),
                        bytes[index + 3] == UInt8(ascii: "0"),
                        let high = Self.hex(bytes[index + 4]), high <= 1, let low = Self.hex(bytes[index + 5])
                    else { return nil }
                    switch high << 4 | low {
                    case 0x08, 0x09, 0x0A, 0x0C, 0x0D: return nil
                    default: index += 6
                    }
                default:
                    // `\/` and the rest: `JSONWriter` writes those characters as they are.
                    return nil
                }
            default:
                guard byte >= 0x20 else { return nil }
                index += 1
            }
        }
        return nil
    }

    /// A lowercase hex digit's value.
    private static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    /// An integer in plain decimal (`-?(0|[1-9][0-9]*)`, not `-0`), of 18 digits at most.
    private mutating func number() -> Bool {
        let negative = current == UInt8(ascii: "-")
        if negative { index += 1 }
        let start = index
        while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { index += 1 }
        let digits = index - start
        guard digits >= 1, digits <= 18 else { return false }
        if bytes[start] == UInt8(ascii: "0") && (digits > 1 || negative) { return false }
        switch current {
        case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return false
        default: return true
        }
    }

    private mutating func literal(_ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        for offset in 0..<count where bytes[index + offset] != text.utf8Start[offset] { return false }
        index += count
        return true
    }
}
