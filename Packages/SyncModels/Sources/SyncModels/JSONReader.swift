/// A byte-level pull reader of JSON, for hot paths: the server decoding pushed events, a projection replaying
/// payloads from the log. Nothing is allocated but the strings it returns.
///
/// It reads only the JSON it is sure to read exactly as `JSONDecoder` would (objects without repeated
/// keys, strings of valid UTF-8, integers that fit in 64 bits, `true`, `false`, `null`) and gives up with
/// `Bail` on anything else — a fraction or exponent, invalid input, nesting deeper than 256 — in which case
/// the caller decodes the same bytes with `JSONDecoder`, which gives the precise value or error. So it
/// changes speed, never results.
public struct JSONReader: ~Copyable {
    /// The input is not one this reader is sure of: decode it another way.
    public struct Bail: Error {
        public init() {}
    }

    private let bytes: UnsafeRawBufferPointer
    private var index = 0
    private var depth = 0

    public init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// Whether only whitespace is left.
    public mutating func atEnd() -> Bool {
        skipWhitespace()
        return index == bytes.count
    }

    public mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    public mutating func peek() throws(Bail) -> UInt8 {
        skipWhitespace()
        guard index < bytes.count else { throw Bail() }
        return bytes[index]
    }

    public mutating func expect(_ byte: UInt8) throws(Bail) {
        guard try peek() == byte else { throw Bail() }
        index += 1
    }

    /// Reads an object, calling `member` with each key; `member` must read the value.
    public mutating func readObject(_ member: (inout JSONReader, String) throws(Bail) -> Void) throws(Bail) {
        try expect(UInt8(ascii: "{"))
        depth += 1
        guard depth <= 256 else { throw Bail() }
        if try peek() == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return
        }
        while true {
            let key = try readString()
            try expect(UInt8(ascii: ":"))
            try member(&self, key)
            switch try peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                depth -= 1
                return
            default: throw Bail()
            }
        }
    }

    /// Reads an array, calling `element` for each element; `element` must read it.
    public mutating func readArray(_ element: (inout JSONReader) throws(Bail) -> Void) throws(Bail) {
        try expect(UInt8(ascii: "["))
        depth += 1
        guard depth <= 256 else { throw Bail() }
        if try peek() == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return
        }
        while true {
            try element(&self)
            switch try peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                depth -= 1
                return
            default: throw Bail()
            }
        }
    }

    /// Reads a string; escapes are decoded, anything doubtful bails.
    public mutating func readString() throws(Bail) -> String {
        try expect(UInt8(ascii: "\""))
        let start = index
        var ascii = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                index += 1
                // ASCII is valid UTF-8 as is; anything else is validated (never repaired).
                if ascii { return String(decoding: slice, as: UTF8.self) }
                guard let text = String(validating: slice, as: UTF8.self) else { throw Bail() }
                return text
            }
            if byte >= 0x80 { ascii = false }
            if byte == UInt8(ascii: "\\") {
                index = start
                return try readEscapedString()
            }
            guard byte >= 0x20 else { throw Bail() }
            index += 1
        }
        throw Bail()
    }

    private mutating func readEscapedString() throws(Bail) -> String {
        var scalars: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: scalars, as: UTF8.self) else { throw Bail() }
                return text
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { throw Bail() }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalars.append(escape)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try readHex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        else { throw Bail() }
                        index += 2
                        let low = try readHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw Bail() }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(code) {
                        throw Bail()
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw Bail() }
                    scalars.append(contentsOf: Array(String(Character(scalar)).utf8))
                default:
                    throw Bail()
                }
            default:
                guard byte >= 0x20 else { throw Bail() }
                scalars.append(byte)
            }
        }
        throw Bail()
    }

    private mutating func readHex4() throws(Bail) -> UInt32 {
        guard let value = Hex.decode(bytes, from: index, count: 4) else { throw Bail() }
        index += 4
        return UInt32(value)
    }

    /// Reads a string of plain ASCII without escapes and gives its bytes to `parse`; bails on anything else.
    /// For fixed-format fields (ids, clocks) that are then parsed without making a `String`.
    public mutating func readASCIIString<Result>(_ parse: (UnsafeRawBufferPointer) -> Result?) throws(Bail) -> Result {
        try expect(UInt8(ascii: "\""))
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                index += 1
                guard let result = parse(slice) else { throw Bail() }
                return result
            }
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { throw Bail() }
            index += 1
        }
        throw Bail()
    }

    /// Reads a replica id: a string of 32 hexadecimal digits.
    public mutating func readReplica() throws(Bail) -> ReplicaID {
        try readASCIIString { try? ReplicaID(utf8: $0) }
    }

    /// Reads an integer written without fraction or exponent that fits in `Int64`.
    public mutating func readInt64() throws(Bail) -> Int64 {
        skipWhitespace()
        var negative = false
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        let start = index
        var magnitude: UInt64 = 0
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
            let (times, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (plus, overflow2) = times.addingReportingOverflow(UInt64(bytes[index] - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { throw Bail() }
            magnitude = plus
            index += 1
        }
        let digits = index - start
        guard digits > 0, !(digits > 1 && bytes[start] == UInt8(ascii: "0")) else { throw Bail() }
        if index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): throw Bail()
            default: break
            }
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { throw Bail() }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { throw Bail() }
        return Int64(magnitude)
    }

    /// Reads `null`; false (and nothing consumed) when the next value is something else.
    public mutating func readNull() throws(Bail) -> Bool {
        guard try peek() == UInt8(ascii: "n") else { return false }
        try literal("null")
        return true
    }

    private mutating func literal(_ text: StaticString) throws(Bail) {
        let count = text.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw Bail() }
        for offset in 0..<count where bytes[index + offset] != text.utf8Start[offset] { throw Bail() }
        index += count
    }

    /// Reads any value as a `JSONValue`.
    public mutating func readValue() throws(Bail) -> JSONValue {
        switch try peek() {
        case UInt8(ascii: "{"):
            var object: [String: JSONValue] = [:]
            try readObject { reader, key throws(Bail) in
                let value = try reader.readValue()
                guard object.updateValue(value, forKey: key) == nil else { throw Bail() }
            }
            return .object(object)
        case UInt8(ascii: "["):
            var array: [JSONValue] = []
            try readArray { reader throws(Bail) in array.append(try reader.readValue()) }
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
        default:
            return .int(try readInt64())
        }
    }

    /// Reads `true` or `false`.
    public mutating func readBool() throws(Bail) -> Bool {
        switch try peek() {
        case UInt8(ascii: "t"):
            try literal("true")
            return true
        case UInt8(ascii: "f"):
            try literal("false")
            return false
        default: throw Bail()
        }
    }

    /// Reads a non-negative integer up to `Int64.max` (larger ones bail).
    public mutating func readUInt64() throws(Bail) -> UInt64 {
        let value = try readInt64()
        guard value >= 0 else { throw Bail() }
        return UInt64(value)
    }

    /// Reads (and checks) any value without building it, and returns its bytes.
    public mutating func readRawValue() throws(Bail) -> UnsafeRawBufferPointer {
        let start: Int
        skipWhitespace()
        start = index
        try skipValue()
        return UnsafeRawBufferPointer(rebasing: bytes[start..<index])
    }

    /// Reads (and checks) any value without building it. Repeated keys are not looked for: whoever reads the
    /// members of an object checks its own.
    public mutating func skipValue() throws(Bail) {
        switch try peek() {
        case UInt8(ascii: "{"):
            try readObject { reader, _ throws(Bail) in try reader.skipValue() }
        case UInt8(ascii: "["):
            try readArray { reader throws(Bail) in try reader.skipValue() }
        case UInt8(ascii: "\""):
            _ = try readString()
        case UInt8(ascii: "t"), UInt8(ascii: "f"):
            _ = try readBool()
        case UInt8(ascii: "n"):
            try literal("null")
        default:
            _ = try readInt64()
        }
    }
}
