import Foundation

/// The one JSON writer of the sync stack, with the one string escaper: canonical JSON bytes for hashing,
/// storage (the client's log, the server's `events.payload`) and the wire.
///
/// ## The canonical form
///
/// - **Objects**: keys sorted by their UTF-8 bytes, no whitespace anywhere.
/// - **Strings**: `"` `\` and the controls with a short escape (`\n` `\r` `\t` `\b` `\f`) escaped so; other
///   controls (U+0000–U+001F) as `\u00xx` with lowercase hex; everything else, `/` and U+007F included, as
///   its raw UTF-8.
/// - **Integers**: decimal, `-` for negatives.
/// - **Doubles**: an integral value with magnitude up to 2^53 as an integer (`2.0` → `2`, `-0.0` → `0`);
///   any other finite value as Swift's shortest round-tripping form (`0.1`, `1e-07`, `1e+16`). Non-finite
///   values (NaN, ±infinity), which JSON cannot express, are written as `null`.
///
/// These are exactly the bytes `CanonicalJSON.encode` (`JSONEncoder` with `.sortedKeys` and
/// `.withoutEscapingSlashes`) writes for a `JSONValue`, with two exceptions: `-0.0`, which `JSONEncoder`
/// writes as `-0` (read back as the integer 0, so not canonical), and non-finite doubles, for which
/// `JSONEncoder` throws.
///
/// `JSONReader` reads these bytes back as the same value, except that a `.double` written as an integer
/// comes back `.int` (JSON has one number type; `.double(2)` and `.int(2)` are the same number) and a
/// non-finite one as `.null`. Writing what it reads gives the same bytes again.
public struct JSONWriter: Sendable {
    @usableFromInline
    var storage: [UInt8]

    public init(capacity: Int = 256) {
        storage = []
        storage.reserveCapacity(capacity)
    }

    /// The bytes written so far.
    public var bytes: [UInt8] { storage }

    /// The number of bytes written so far.
    public var count: Int { storage.count }

    /// The bytes written so far, as `Data`.
    public var data: Data { Data(storage) }

    /// Appends JSON text as is (punctuation, a member name written by hand, JSON stored earlier).
    @inlinable
    public mutating func raw(_ text: String) {
        storage.append(contentsOf: text.utf8)
    }

    /// Appends JSON bytes as is.
    public mutating func raw(_ bytes: UnsafeRawBufferPointer) {
        storage.append(contentsOf: bytes)
    }

    /// Appends `text` as a JSON string.
    public mutating func string(_ text: String) {
        Self.appendString(text, to: &storage)
    }

    public mutating func int(_ value: Int) {
        int(Int64(value))
    }

    public mutating func int(_ value: Int64) {
        if value < 0 { storage.append(UInt8(ascii: "-")) }
        int(value.magnitude)
    }

    public mutating func int(_ value: UInt64) {
        if value < 10 {
            storage.append(UInt8(ascii: "0") &+ UInt8(value))
            return
        }
        // Twenty digits at most, written backwards into a buffer on the stack.
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { buffer in
            var position = buffer.count
            var rest = value
            while rest > 0 {
                position -= 1
                buffer[position] = UInt8(ascii: "0") &+ UInt8(rest % 10)
                rest /= 10
            }
            storage.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[position...]))
        }
    }

    /// Appends a double in the canonical form (see the type); `null` when it is not finite.
    public mutating func double(_ value: Double) {
        guard value.isFinite else {
            raw("null")
            return
        }
        if value.rounded(.towardZero) == value, value.magnitude <= 9_007_199_254_740_992 {
            int(Int64(value))
        } else {
            // Never ends in ".0" here: Swift writes integral values past 2^53 with an exponent.
            raw(value.description)
        }
    }

    public mutating func bool(_ value: Bool) {
        raw(value ? "true" : "false")
    }

    public mutating func null() {
        raw("null")
    }

    /// Appends `value` in the canonical form.
    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let flag): bool(flag)
        case .int(let number): int(number)
        case .double(let number): double(number)
        case .string(let text): string(text)
        case .array(let elements):
            storage.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { storage.append(UInt8(ascii: ",")) }
                self.value(element)
            }
            storage.append(UInt8(ascii: "]"))
        case .object(let members):
            storage.append(UInt8(ascii: "{"))
            if members.count == 1, let (key, member) = members.first {
                string(key)
                storage.append(UInt8(ascii: ":"))
                self.value(member)
            } else {
                for (index, (key, member)) in members.sorted(by: { Self.precedes($0.key, $1.key) }).enumerated() {
                    if index > 0 { storage.append(UInt8(ascii: ",")) }
                    string(key)
                    storage.append(UInt8(ascii: ":"))
                    self.value(member)
                }
            }
            storage.append(UInt8(ascii: "}"))
        }
    }

    /// The order of keys: by UTF-8 bytes (which is `JSONEncoder`'s `.sortedKeys` order, and not `String`'s
    /// `<` for keys that are not in Unicode normal form C).
    static func precedes(_ left: String, _ right: String) -> Bool {
        var left = left
        var right = right
        return left.withUTF8 { left in right.withUTF8 { right in left.lexicographicallyPrecedes(right) } }
    }

    /// The string escaper: appends `text` as a JSON string to `output`.
    static func appendString(_ text: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var run = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                output.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<index]))
                run = index + 1
                output.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): output.append(byte)
                case 0x0A: output.append(UInt8(ascii: "n"))
                case 0x0D: output.append(UInt8(ascii: "r"))
                case 0x09: output.append(UInt8(ascii: "t"))
                case 0x08: output.append(UInt8(ascii: "b"))
                case 0x0C: output.append(UInt8(ascii: "f"))
                default:
                    output.append(contentsOf: [
                        UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), Hex.lowercaseDigits[Int(byte >> 4)],
                        Hex.lowercaseDigits[Int(byte & 0xF)],
                    ])
                }
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...]))
        }
        output.append(UInt8(ascii: "\""))
    }
}
