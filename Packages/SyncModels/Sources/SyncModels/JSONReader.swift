/// The one JSON parser of the sync stack: a byte-level pull reader over UTF-8. The server decodes pushed
/// events with it, projections replay payloads from the log with it, and `JSONValue(parsing:)` is
/// `readValue()` followed by `expectEnd()`. Nothing is allocated but the strings and values it returns.
///
/// ## The rule set
///
/// Every path that reads JSON reads it with these rules, so a document means the same thing everywhere:
///
/// - **Grammar**: RFC 8259. Whitespace is space, tab, line feed and carriage return. A document is one
///   value; anything but whitespace after it is refused (`expectEnd()`).
/// - **Nesting**: at most `maxDepth` (512) arrays and objects deep. Deeper documents are refused, so that no
///   input can exhaust the stack of a recursive reader.
/// - **Strings**: valid UTF-8 only. Invalid bytes are refused, never repaired (no U+FFFD). Raw control
///   characters (U+0000–U+001F) are refused; escapes are those of RFC 8259, and a `\u` surrogate must be
///   one half of a pair. `\u0000` is valid JSON and is read (whoever cannot store it refuses it).
/// - **Objects**: a key appears at most once; a repeated key is refused, never "first wins" or "last wins".
///   Keys are compared as Swift `String`s, that is by Unicode canonical equivalence, as the dictionary of
///   `JSONValue.object` compares them: `"é"` and `"e\u0301"` are the same key.
/// - **Numbers**: an integer literal (no fraction, no exponent) that fits in `Int64` is an integer
///   (`JSONValue.int`); every other number is the nearest `Double` (`JSONValue.double`): `2.0`, `1e3` and
///   `9223372036854775808` are doubles. A number beyond the range of `Double` (`1e400`) is refused. Typed
///   reads (`readInt64()`, `readUInt64()`) accept integer literals in range only; `readIntegerValue()`
///   accepts any number whose value is an integer in range, however it is written (`2`, `2.0`, `2e0`,
///   `200e-2`), as JSON Schema's `integer` does.
///
/// `JSONWriter` writes every value so that this reader reads it back as the same value (see there for the
/// one exception, non-finite doubles), and writes the bytes it reads back the same.
///
/// ## Refusals
///
/// Every method throws `Bail`, with a `reason` and the byte `offset` of the problem. `Bail.isMalformed`
/// separates input that breaks the rule set (the document is not JSON here: `json.invalid`, HTTP 400
/// `request.malformed`) from JSON that is not what the caller asked for: a value of another type, a
/// number that is not an integer in range, or a check of the caller's own (`Bail()`). In the second case
/// the rest of the document has not been read; `JSONReader.validate(_:)` tells whether it is JSON at all.
public struct JSONReader: ~Copyable {
    /// The deepest nesting of arrays and objects a document may have.
    public static let maxDepth = 512

    /// Why the reader stopped, and where.
    public struct Bail: Error, Sendable, Hashable, CustomStringConvertible {
        public enum Reason: UInt8, Sendable, Hashable, CustomStringConvertible {
            // The input breaks the rule set: it is not JSON here.
            case unexpectedEnd
            case unexpectedByte
            case invalidLiteral
            case invalidNumber
            case numberOutOfRange
            case controlCharacter
            case invalidEscape
            case unpairedSurrogate
            case invalidUTF8
            case tooDeep
            case repeatedKey
            case trailingData
            // The input is JSON (as far as it was read) but not what the caller asked for.
            case wrongType
            case notAnInteger
            case refused

            public var description: String {
                switch self {
                case .unexpectedEnd: "unexpected end"
                case .unexpectedByte: "unexpected byte"
                case .invalidLiteral: "invalid literal"
                case .invalidNumber: "invalid number"
                case .numberOutOfRange: "number out of range"
                case .controlCharacter: "control character in a string"
                case .invalidEscape: "invalid escape"
                case .unpairedSurrogate: "unpaired surrogate"
                case .invalidUTF8: "invalid UTF-8"
                case .tooDeep: "nesting deeper than \(JSONReader.maxDepth)"
                case .repeatedKey: "repeated key"
                case .trailingData: "unexpected data after the value"
                case .wrongType: "a value of another type"
                case .notAnInteger: "a number that is not an integer in range"
                case .refused: "a value the reader refused"
                }
            }
        }

        public var reason: Reason
        /// The byte offset of the problem; nil when the caller threw `Bail()` itself.
        public var offset: Int?

        /// A refusal by the caller: valid JSON that is not the value it wanted.
        public init() {
            self.reason = .refused
            self.offset = nil
        }

        public init(_ reason: Reason, at offset: Int?) {
            self.reason = reason
            self.offset = offset
        }

        /// Whether the input breaks the rule set (is not JSON here), as opposed to being JSON of another shape.
        public var isMalformed: Bool { reason.rawValue < Reason.wrongType.rawValue }

        public var description: String {
            offset.map { "\(reason) at byte \($0)" } ?? reason.description
        }
    }

    private let bytes: UnsafeRawBufferPointer
    private var index = 0
    private var depth = 0
    /// The members of the objects `readValue` is reading, innermost last: each object's dictionary is made
    /// once its members are known, at its size, instead of growing (and rehashing) member by member.
    private var members: [(key: String, value: JSONValue, offset: Int)] = []

    public init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// The offset of the next byte to read.
    public var offset: Int { index }

    /// Checks that `bytes` are one JSON document under the rule set, without building anything.
    /// - Throws: `Bail`, always one that `isMalformed`.
    public static func validate(_ bytes: UnsafeRawBufferPointer) throws(Bail) {
        var reader = JSONReader(bytes)
        try reader.skipValue()
        try reader.expectEnd()
    }

    // MARK: - Structure

    /// Whether only whitespace is left.
    public mutating func atEnd() -> Bool {
        skipWhitespace()
        return index == bytes.count
    }

    /// Refuses anything but whitespace after the value read.
    /// - Throws: `Bail` `trailingData`.
    public mutating func expectEnd() throws(Bail) {
        guard atEnd() else { throw Bail(.trailingData, at: index) }
    }

    public mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// The next byte that is not whitespace, not consumed.
    /// - Throws: `Bail` `unexpectedEnd` at the end of the input.
    public mutating func peek() throws(Bail) -> UInt8 {
        try next()
    }

    /// `peek()`, inlined in the loops here: canonical JSON has no whitespace, so the first byte is tried
    /// before the whitespace loop.
    @inline(__always)
    private mutating func next() throws(Bail) -> UInt8 {
        if index < bytes.count {
            let byte = bytes[index]
            if byte > 0x20 { return byte }
        }
        skipWhitespace()
        guard index < bytes.count else { throw Bail(.unexpectedEnd, at: index) }
        return bytes[index]
    }

    /// Consumes `byte` (after whitespace).
    /// - Throws: `Bail` `unexpectedByte` when the next byte is another.
    public mutating func expect(_ byte: UInt8) throws(Bail) {
        guard try next() == byte else { throw Bail(.unexpectedByte, at: index) }
        index += 1
    }

    /// Consumes the first byte of a value of the type that starts with `byte`.
    private mutating func begin(_ byte: UInt8) throws(Bail) {
        let next = try next()
        guard next == byte else { throw mismatch(next) }
        index += 1
    }

    /// The refusal of a value that does not start as expected: another type when it starts a value.
    private func mismatch(_ byte: UInt8) -> Bail {
        switch byte {
        case UInt8(ascii: "{"), UInt8(ascii: "["), UInt8(ascii: "\""), UInt8(ascii: "t"), UInt8(ascii: "f"),
            UInt8(ascii: "n"), UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            Bail(.wrongType, at: index)
        default:
            Bail(.unexpectedByte, at: index)
        }
    }

    private mutating func enter() throws(Bail) {
        depth += 1
        guard depth <= Self.maxDepth else { throw Bail(.tooDeep, at: index - 1) }
    }

    /// Reads an object, calling `member` with each key; `member` must read the value.
    /// - Throws: `Bail`, `repeatedKey` for a key seen before in this object.
    public mutating func readObject(_ member: (inout JSONReader, String) throws(Bail) -> Void) throws(Bail) {
        skipWhitespace()
        let start = index
        var keys = ObjectKeys()
        let bytes = self.bytes
        try readMembers { reader, key, fingerprint, keyOffset throws(Bail) in
            try keys.insert(key, fingerprint: fingerprint, at: keyOffset, objectAt: start, in: bytes)
            try member(&reader, key)
        }
    }

    /// The members of an object without looking for repeated keys: `member` gets the key, its fingerprint
    /// (nil unless ASCII) and its offset.
    private mutating func readMembers(
        _ member: (inout JSONReader, String, UInt64?, Int) throws(Bail) -> Void
    ) throws(Bail) {
        try begin(UInt8(ascii: "{"))
        try enter()
        if try next() == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return
        }
        while true {
            guard try next() == UInt8(ascii: "\"") else { throw Bail(.unexpectedByte, at: index) }
            let keyOffset = index
            let (key, fingerprint) = try readKey()
            try expect(UInt8(ascii: ":"))
            try member(&self, key, fingerprint, keyOffset)
            switch try next() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                depth -= 1
                return
            default: throw Bail(.unexpectedByte, at: index)
            }
        }
    }

    /// Reads an array, calling `element` for each element; `element` must read it.
    public mutating func readArray(_ element: (inout JSONReader) throws(Bail) -> Void) throws(Bail) {
        try begin(UInt8(ascii: "["))
        try enter()
        if try next() == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return
        }
        while true {
            try element(&self)
            switch try next() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                depth -= 1
                return
            default: throw Bail(.unexpectedByte, at: index)
            }
        }
    }

    // MARK: - Strings

    /// Reads a string: escapes decoded, UTF-8 validated.
    public mutating func readString() throws(Bail) -> String {
        try begin(UInt8(ascii: "\""))
        let start = index
        var ascii = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                index += 1
                // ASCII is valid UTF-8 as is; anything else is validated (never repaired).
                if ascii { return String(decoding: slice, as: UTF8.self) }
                guard let text = String(validating: slice, as: UTF8.self) else {
                    throw Bail(.invalidUTF8, at: Self.firstInvalidUTF8(in: bytes, start..<index - 1))
                }
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw Bail(.controlCharacter, at: index) }
            if byte >= 0x80 { ascii = false }
            index += 1
        }
        // Escapes (or the end of the input): check the whole string, then decode it.
        index = start
        let end = try scanString().end
        let decoded = decodeEscapes(start..<end)
        // Escapes only ever add valid UTF-8 and the raw bytes were checked: this does not repair.
        return String(decoding: decoded, as: UTF8.self)
    }

    /// Reads a string and gives its UTF-8 bytes (escapes decoded, validated) to `parse`, without making a
    /// `String` unless it has escapes. For fixed-format fields (ids, clocks) parsed straight from bytes.
    /// - Throws: `Bail` `refused` at the string when `parse` gives nil.
    public mutating func readString<Result>(parsing parse: (UnsafeRawBufferPointer) -> Result?) throws(Bail)
        -> Result
    {
        try begin(UInt8(ascii: "\""))
        let start = index
        // Plain ASCII (ids, clocks): nothing to check but the bytes themselves.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                guard let result = parse(UnsafeRawBufferPointer(rebasing: bytes[start..<index - 1])) else {
                    throw Bail(.refused, at: start - 1)
                }
                return result
            }
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { break }
            index += 1
        }
        index = start
        let (end, escaped) = try scanString()
        let result =
            escaped
            ? decodeEscapes(start..<end).withUnsafeBytes { parse($0) }
            : parse(UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
        guard let result else { throw Bail(.refused, at: start - 1) }
        return result
    }

    /// Reads a string of plain ASCII without escapes and gives its bytes to `parse`. Anything else (escapes,
    /// other characters, `parse` giving nil) is refused.
    public mutating func readASCIIString<Result>(_ parse: (UnsafeRawBufferPointer) -> Result?) throws(Bail)
        -> Result
    {
        try begin(UInt8(ascii: "\""))
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                index += 1
                guard let result = parse(slice) else { throw Bail(.refused, at: start - 1) }
                return result
            }
            guard byte >= 0x20 else { throw Bail(.controlCharacter, at: index) }
            guard byte < 0x80, byte != UInt8(ascii: "\\") else { throw Bail(.refused, at: start - 1) }
            index += 1
        }
        throw Bail(.unexpectedEnd, at: index)
    }

    /// Reads a replica id: a string of 32 hexadecimal digits.
    public mutating func readReplica() throws(Bail) -> ReplicaID {
        try readString { try? ReplicaID(utf8: $0) }
    }

    /// A key, with its fingerprint when it is ASCII and `fingerprinting` (`ObjectKeys` compares those as
    /// numbers). The reader is at the opening quote.
    private mutating func readKey(fingerprinting: Bool = true) throws(Bail) -> (String, UInt64?) {
        let quote = index
        index += 1
        var hash = ObjectKeys.seed
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let key = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[quote + 1..<index]), as: UTF8.self)
                index += 1
                return (key, hash)
            }
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { break }
            if fingerprinting { hash = ObjectKeys.mix(hash, byte) }
            index += 1
        }
        index = quote
        let key = try readString()
        guard fingerprinting else { return (key, nil) }
        var fingerprint: UInt64? = ObjectKeys.seed
        for byte in key.utf8 {
            guard byte < 0x80 else {
                fingerprint = nil
                break
            }
            fingerprint = ObjectKeys.mix(fingerprint!, byte)
        }
        return (key, fingerprint)
    }

    /// Checks the string whose content starts at `index` (after the opening quote) and moves past its
    /// closing quote; returns the offset of that quote and whether the string has escapes.
    private mutating func scanString() throws(Bail) -> (end: Int, escaped: Bool) {
        var escaped = false
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return (index - 1, escaped)
            case UInt8(ascii: "\\"):
                escaped = true
                try scanEscape()
            case 0..<0x20:
                throw Bail(.controlCharacter, at: index)
            case 0x80...:
                guard let length = Self.utf8SequenceLength(in: bytes, at: index) else {
                    throw Bail(.invalidUTF8, at: index)
                }
                index += length
            default:
                index += 1
            }
        }
        throw Bail(.unexpectedEnd, at: index)
    }

    /// Checks one escape at `index` (the backslash) and moves past it.
    private mutating func scanEscape() throws(Bail) {
        let start = index
        guard index + 1 < bytes.count else { throw Bail(.unexpectedEnd, at: bytes.count) }
        switch bytes[index + 1] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
            UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            index += 2
        case UInt8(ascii: "u"):
            guard let code = Hex.decode(bytes, from: index + 2, count: 4) else { throw Bail(.invalidEscape, at: start) }
            index += 6
            switch code {
            case 0xD800...0xDBFF:
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                    bytes[index + 1] == UInt8(ascii: "u"),
                    let low = Hex.decode(bytes, from: index + 2, count: 4), (0xDC00...0xDFFF).contains(low)
                else { throw Bail(.unpairedSurrogate, at: start) }
                index += 6
            case 0xDC00...0xDFFF:
                throw Bail(.unpairedSurrogate, at: start)
            default:
                break
            }
        default:
            throw Bail(.invalidEscape, at: start)
        }
    }

    /// The UTF-8 of a checked string's content with its escapes decoded.
    private func decodeEscapes(_ range: Range<Int>) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(range.count)
        var position = range.lowerBound
        var run = position
        while position < range.upperBound {
            guard bytes[position] == UInt8(ascii: "\\") else {
                position += 1
                continue
            }
            output.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[run..<position]))
            let escape = bytes[position + 1]
            position += 2
            switch escape {
            case UInt8(ascii: "b"): output.append(0x08)
            case UInt8(ascii: "f"): output.append(0x0C)
            case UInt8(ascii: "n"): output.append(0x0A)
            case UInt8(ascii: "r"): output.append(0x0D)
            case UInt8(ascii: "t"): output.append(0x09)
            case UInt8(ascii: "u"):
                var code = UInt32(Hex.decode(bytes, from: position, count: 4)!)
                position += 4
                if (0xD800...0xDBFF).contains(code) {
                    let low = UInt32(Hex.decode(bytes, from: position + 2, count: 4)!)
                    position += 6
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                }
                Self.appendUTF8(code, to: &output)
            default: output.append(escape)  // " \ /
            }
            run = position
        }
        output.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[run..<range.upperBound]))
        return output
    }

    private static func appendUTF8(_ code: UInt32, to output: inout [UInt8]) {
        switch code {
        case 0..<0x80:
            output.append(UInt8(code))
        case 0x80..<0x800:
            output.append(0xC0 | UInt8(code >> 6))
            output.append(0x80 | UInt8(code & 0x3F))
        case 0x800..<0x10000:
            output.append(0xE0 | UInt8(code >> 12))
            output.append(0x80 | UInt8(code >> 6 & 0x3F))
            output.append(0x80 | UInt8(code & 0x3F))
        default:
            output.append(0xF0 | UInt8(code >> 18))
            output.append(0x80 | UInt8(code >> 12 & 0x3F))
            output.append(0x80 | UInt8(code >> 6 & 0x3F))
            output.append(0x80 | UInt8(code & 0x3F))
        }
    }

    /// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, nothing past
    /// U+10FFFF) that starts at `start`; nil when there is none.
    static func utf8SequenceLength(in bytes: UnsafeRawBufferPointer, at start: Int) -> Int? {
        let lead = bytes[start]
        let length: Int
        var second: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: length = 2
        case 0xE0:
            length = 3
            second = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED:
            length = 3
            second = 0x80...0x9F
        case 0xF0:
            length = 4
            second = 0x90...0xBF
        case 0xF1...0xF3: length = 4
        case 0xF4:
            length = 4
            second = 0x80...0x8F
        default: return nil
        }
        guard start + length <= bytes.count, second.contains(bytes[start + 1]) else { return nil }
        for offset in 2..<length where bytes[start + offset] & 0xC0 != 0x80 { return nil }
        return length
    }

    /// The offset of the first byte in `range` that does not start a well-formed UTF-8 sequence.
    static func firstInvalidUTF8(in bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Int {
        var position = range.lowerBound
        while position < range.upperBound {
            guard let length = utf8SequenceLength(in: bytes, at: position), position + length <= range.upperBound
            else { return position }
            position += length
        }
        return range.lowerBound
    }

    // MARK: - Numbers and literals

    /// Reads a number: its value when it is an integer literal that fits in `Int64`, else nil with the
    /// reader past it (the caller reads the `Double` when it wants one).
    private mutating func scanNumber() throws(Bail) -> Int64? {
        let start = index
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        guard index < bytes.count, Self.isDigit(bytes[index]) else {
            throw Bail(index < bytes.count || negative ? .invalidNumber : .unexpectedEnd, at: start)
        }
        var magnitude: UInt64 = 0
        var overflow = false
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, Self.isDigit(bytes[index]) { throw Bail(.invalidNumber, at: start) }
        } else {
            while index < bytes.count, Self.isDigit(bytes[index]) {
                let (times, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
                let (plus, overflow2) = times.addingReportingOverflow(UInt64(bytes[index] &- UInt8(ascii: "0")))
                overflow = overflow || overflow1 || overflow2
                magnitude = plus
                index += 1
            }
        }
        var integral = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            integral = false
            index += 1
            try digits(of: start)
        }
        if index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
            integral = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            try digits(of: start)
        }
        guard integral, !overflow else { return nil }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }

    /// One or more digits, of the number that starts at `start`.
    private mutating func digits(of start: Int) throws(Bail) {
        let first = index
        while index < bytes.count, Self.isDigit(bytes[index]) { index += 1 }
        guard index > first else { throw Bail(.invalidNumber, at: start) }
    }

    /// The `Double` of the number scanned from `start` to `index`.
    /// - Throws: `Bail` `numberOutOfRange` when it is beyond the range of `Double`.
    private func double(from start: Int) throws(Bail) -> Double {
        // The text is a checked JSON number, which `Double` parses exactly (correctly rounded).
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw Bail(.numberOutOfRange, at: start) }
        return value
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "0") < 10
    }

    /// Reads a number as a `JSONValue`: `.int` for an integer literal that fits in `Int64`, else `.double`.
    private mutating func readNumber() throws(Bail) -> JSONValue {
        let start = index
        if let value = try scanNumber() { return .int(value) }
        return .double(try double(from: start))
    }

    /// Reads an integer literal (no fraction or exponent) that fits in `Int64`.
    /// - Throws: `Bail` `notAnInteger` for any other number, `wrongType` for another value.
    public mutating func readInt64() throws(Bail) -> Int64 {
        let next = try next()
        guard next == UInt8(ascii: "-") || Self.isDigit(next) else { throw mismatch(next) }
        let start = index
        if let value = try scanNumber() { return value }
        _ = try double(from: start)  // a number out of range is malformed, not merely not an integer
        throw Bail(.notAnInteger, at: start)
    }

    /// Reads a number whose value is an integer that fits in `Int64`, however it is written: `2`, `2.0`,
    /// `2e0`, `200e-2` and `-0.0` are integers, as JSON Schema's `integer` (a number with a zero fractional
    /// part) has them. The value is computed from the digits exactly, never through a `Double`, so
    /// `9223372036854775807.0` is `Int64.max` and `9223372036854775808.0` is out of range.
    /// - Throws: `Bail` `notAnInteger` for a number with a fraction or out of range, `wrongType` for another
    ///   value.
    public mutating func readIntegerValue() throws(Bail) -> Int64 {
        let next = try next()
        guard next == UInt8(ascii: "-") || Self.isDigit(next) else { throw mismatch(next) }
        let start = index
        if let value = try scanNumber() { return value }
        _ = try double(from: start)  // a number out of range is malformed, not merely not an integer
        guard let value = Self.integerValue(of: UnsafeRawBufferPointer(rebasing: bytes[start..<index])) else {
            throw Bail(.notAnInteger, at: start)
        }
        return value
    }

    /// The value of a number already checked against the grammar, when it is an integer that fits in `Int64`.
    private static func integerValue(of number: UnsafeRawBufferPointer) -> Int64? {
        var position = 0
        let negative = number[0] == UInt8(ascii: "-")
        if negative { position += 1 }
        // The digits of the integer and fraction parts, leading zeros left out, and the power of ten they
        // are multiplied by: the number is `significant × 10^exponent`.
        var significant: [UInt8] = []
        var exponent = 0
        var inFraction = false
        while position < number.count {
            let byte = number[position]
            if byte == UInt8(ascii: ".") {
                inFraction = true
            } else if isDigit(byte) {
                if !significant.isEmpty || byte != UInt8(ascii: "0") { significant.append(byte &- UInt8(ascii: "0")) }
                if inFraction { exponent -= 1 }
            } else {
                break
            }
            position += 1
        }
        if position < number.count {
            // `e` or `E`, an optional sign, digits. Saturated far beyond any exponent that can give an `Int64`
            // (the digits of a body are fewer than that).
            position += 1
            var sign = 1
            if number[position] == UInt8(ascii: "+") || number[position] == UInt8(ascii: "-") {
                if number[position] == UInt8(ascii: "-") { sign = -1 }
                position += 1
            }
            var written = 0
            while position < number.count {
                written = min(written * 10 + Int(number[position] &- UInt8(ascii: "0")), 1 << 40)
                position += 1
            }
            exponent += sign * written
        }
        while significant.last == 0 {
            significant.removeLast()
            exponent += 1
        }
        if significant.isEmpty { return 0 }
        guard exponent >= 0, significant.count + exponent <= 19 else { return nil }
        var magnitude: UInt64 = 0
        for digit in significant + repeatElement(0, count: exponent) {
            let (times, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (plus, overflow2) = times.addingReportingOverflow(UInt64(digit))
            guard !overflow1, !overflow2 else { return nil }
            magnitude = plus
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }

    /// Reads a non-negative integer up to `Int64.max`.
    /// - Throws: `Bail` `notAnInteger` for any other number, `wrongType` for another value.
    public mutating func readUInt64() throws(Bail) -> UInt64 {
        _ = try next()
        let start = index
        let value = try readInt64()
        guard value >= 0 else { throw Bail(.notAnInteger, at: start) }
        return UInt64(value)
    }

    /// Reads `null`; false (and nothing consumed) when the next value is something else.
    public mutating func readNull() throws(Bail) -> Bool {
        guard try next() == UInt8(ascii: "n") else { return false }
        try literal("null")
        return true
    }

    /// Reads `true` or `false`.
    /// - Throws: `Bail` `wrongType` for another value.
    public mutating func readBool() throws(Bail) -> Bool {
        switch try next() {
        case UInt8(ascii: "t"):
            try literal("true")
            return true
        case UInt8(ascii: "f"):
            try literal("false")
            return false
        case let next: throw mismatch(next)
        }
    }

    private mutating func literal(_ text: StaticString) throws(Bail) {
        let count = text.utf8CodeUnitCount
        for offset in 0..<count {
            guard index + offset < bytes.count else { throw Bail(.unexpectedEnd, at: bytes.count) }
            guard bytes[index + offset] == text.utf8Start[offset] else { throw Bail(.invalidLiteral, at: index) }
        }
        index += count
    }

    // MARK: - Any value

    /// Reads any value as a `JSONValue`.
    public mutating func readValue() throws(Bail) -> JSONValue {
        switch try next() {
        case UInt8(ascii: "{"):
            // The loops of `readMembers` and `readArray`, without a closure call per member: payloads are
            // parsed here.
            index += 1
            try enter()
            let first = members.count
            // Nothing of an object that failed stays for the next one read.
            defer { members.removeSubrange(first...) }
            if try next() != UInt8(ascii: "}") {
                while true {
                    guard try next() == UInt8(ascii: "\"") else { throw Bail(.unexpectedByte, at: index) }
                    let keyOffset = index
                    let key = try readKey(fingerprinting: false).0
                    try expect(UInt8(ascii: ":"))
                    // After the value: the members of objects inside it come and go above this one's.
                    let value = try readValue()
                    members.append((key, value, keyOffset))
                    guard try next() == UInt8(ascii: ",") else { break }
                    index += 1
                }
                guard try next() == UInt8(ascii: "}") else { throw Bail(.unexpectedByte, at: index) }
            }
            var object = [String: JSONValue](minimumCapacity: members.count - first)
            for member in members[first...] {
                // The dictionary finds repeated keys (by the same `String` equality as `readObject`).
                guard object.updateValue(member.value, forKey: member.key) == nil else {
                    throw Bail(.repeatedKey, at: member.offset)
                }
            }
            index += 1
            depth -= 1
            return .object(object)
        case UInt8(ascii: "["):
            index += 1
            try enter()
            var array: [JSONValue] = []
            if try next() != UInt8(ascii: "]") {
                while true {
                    array.append(try readValue())
                    guard try next() == UInt8(ascii: ",") else { break }
                    index += 1
                }
                guard try next() == UInt8(ascii: "]") else { throw Bail(.unexpectedByte, at: index) }
            }
            index += 1
            depth -= 1
            return .array(array)
        case UInt8(ascii: "\""):
            return .string(try readString())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try readNumber()
        default:
            throw Bail(.unexpectedByte, at: index)
        }
    }

    /// Reads any value as `readValue` does, and returns its bytes too when they are in the canonical form
    /// (`JSONWriter.isCanonical`): a caller that stores canonical bytes keeps them instead of writing the
    /// value again. The bytes are the reader's: copy them before the input goes.
    public mutating func readValueAndCanonicalBytes() throws(Bail) -> (
        value: JSONValue, canonical: UnsafeRawBufferPointer?
    ) {
        _ = try next()
        let start = index
        let value = try readValue()
        let read = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
        return (value, JSONWriter.isCanonical(read) ? read : nil)
    }

    /// Reads (and checks) any value without building it, and returns its bytes.
    public mutating func readRawValue() throws(Bail) -> UnsafeRawBufferPointer {
        skipWhitespace()
        let start = index
        try skipValue()
        return UnsafeRawBufferPointer(rebasing: bytes[start..<index])
    }

    /// Reads and checks any value by the whole rule set (repeated keys included) without building it.
    public mutating func skipValue() throws(Bail) {
        // Loops without a closure call per member, which keeps the stack of a 512-deep document small.
        switch try next() {
        case UInt8(ascii: "{"):
            try skipObject()
        case UInt8(ascii: "["):
            index += 1
            try enter()
            if try next() != UInt8(ascii: "]") {
                while true {
                    try skipValue()
                    guard try next() == UInt8(ascii: ",") else { break }
                    index += 1
                }
                guard try next() == UInt8(ascii: "]") else { throw Bail(.unexpectedByte, at: index) }
            }
            index += 1
            depth -= 1
        case UInt8(ascii: "\""):
            index += 1
            _ = try scanString()
        case UInt8(ascii: "t"):
            try literal("true")
        case UInt8(ascii: "f"):
            try literal("false")
        case UInt8(ascii: "n"):
            try literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let start = index
            if try scanNumber() == nil { _ = try double(from: start) }
        default:
            throw Bail(.unexpectedByte, at: index)
        }
    }

    /// `skipValue()` of an object, apart so that arrays and scalars do not carry its key set on the stack.
    @inline(never)
    private mutating func skipObject() throws(Bail) {
        let start = index
        index += 1
        try enter()
        var keys = ObjectKeys()
        if try next() != UInt8(ascii: "}") {
            while true {
                guard try next() == UInt8(ascii: "\"") else { throw Bail(.unexpectedByte, at: index) }
                let keyOffset = index
                let (key, fingerprint) = try readKey()
                try keys.insert(key, fingerprint: fingerprint, at: keyOffset, objectAt: start, in: bytes)
                try expect(UInt8(ascii: ":"))
                try skipValue()
                guard try next() == UInt8(ascii: ",") else { break }
                index += 1
            }
            guard try next() == UInt8(ascii: "}") else { throw Bail(.unexpectedByte, at: index) }
        }
        index += 1
        depth -= 1
    }

    /// The keys of the object at `start` whose members end before the key at `end`: the members were read
    /// (and checked) once already.
    fileprivate static func keys(in bytes: UnsafeRawBufferPointer, objectAt start: Int, before end: Int) throws(Bail)
        -> Set<String>
    {
        var reader = JSONReader(bytes)
        reader.index = start + 1
        var keys = Set<String>()
        while true {
            reader.skipWhitespace()
            if reader.index < bytes.count, bytes[reader.index] == UInt8(ascii: ",") {
                reader.index += 1
                reader.skipWhitespace()
            }
            guard reader.index < end else { return keys }
            keys.insert(try reader.readKey().0)
            try reader.expect(UInt8(ascii: ":"))
            try reader.skipValue()
        }
    }
}

/// The keys read so far from one object, to refuse a repeated one without allocating for common objects.
///
/// Up to 16 ASCII keys are kept as 64-bit fingerprints (FNV-1a of their bytes); ASCII strings are equal
/// exactly when their bytes are, so distinct fingerprints mean distinct keys. A key that is not ASCII (which
/// may be canonically equivalent to another, even to an ASCII one: U+212A KELVIN SIGN and `K`), a 17th key,
/// or a fingerprint seen before switch to a `Set<String>` of every key, rebuilt once by reading the keys of
/// the object again; the set then decides, by `String` equality.
private struct ObjectKeys {
    static let seed: UInt64 = 0xCBF2_9CE4_8422_2325

    @inline(__always)
    static func mix(_ hash: UInt64, _ byte: UInt8) -> UInt64 {
        (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
    }

    private var fingerprints:
        (
            UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
            UInt64, UInt64, UInt64
        ) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    /// One bit per fingerprint seen (its low six bits): most keys find theirs clear and skip the comparisons.
    private var mask: UInt64 = 0
    private var count = 0
    private var all: Set<String>?

    mutating func insert(
        _ key: String, fingerprint: UInt64?, at keyOffset: Int, objectAt start: Int, in bytes: UnsafeRawBufferPointer
    ) throws(JSONReader.Bail) {
        if all == nil {
            if let fingerprint, count < 16, !seen(fingerprint) {
                record(fingerprint)
                return
            }
            all = try JSONReader.keys(in: bytes, objectAt: start, before: keyOffset)
        }
        guard all!.insert(key).inserted else { throw JSONReader.Bail(.repeatedKey, at: keyOffset) }
    }

    private mutating func seen(_ fingerprint: UInt64) -> Bool {
        guard mask & 1 << (fingerprint & 63) != 0 else { return false }
        let count = count
        return withUnsafeBytes(of: &fingerprints) { slots in
            for slot in 0..<count where slots.load(fromByteOffset: slot * 8, as: UInt64.self) == fingerprint {
                return true
            }
            return false
        }
    }

    private mutating func record(_ fingerprint: UInt64) {
        let slot = count
        withUnsafeMutableBytes(of: &fingerprints) {
            $0.storeBytes(of: fingerprint, toByteOffset: slot * 8, as: UInt64.self)
        }
        mask |= 1 << (fingerprint & 63)
        count = slot + 1
    }
}
