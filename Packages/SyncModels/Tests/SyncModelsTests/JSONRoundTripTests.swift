import Foundation
import SyncTestSupport
import Testing

@testable import SyncModels

/// Seeded properties of the one parser (`JSONReader`, `JSONValue(parsing:)`) and the one writer
/// (`JSONWriter`, `canonicalData()`). Each test prints its seed; set `JSON_TEST_SEED` to replay one.
@Suite struct JSONRoundTripTests {
    static func seed(_ name: String) -> UInt64 {
        var system = SystemRandomNumberGenerator()
        let seed =
            ProcessInfo.processInfo.environment["JSON_TEST_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 0...UInt64.max, using: &system)
        print("\(name) seed \(seed)")
        return seed
    }

    static func write(_ value: JSONValue) -> Data {
        var writer = JSONWriter()
        writer.value(value)
        return writer.data
    }

    @Test func parsingWhatIsWrittenGivesTheValueBack() throws {
        var random = JSONGenerator(seed: Self.seed("parsingWhatIsWrittenGivesTheValueBack"))
        for round in 0..<2_000 {
            let value = random.value()
            let bytes = Self.write(value)
            let text = String(decoding: bytes, as: UTF8.self)
            let parsed = try JSONValue(parsing: bytes)
            #expect(parsed == JSONGenerator.normalized(value), "round \(round): \(text)")
            if JSONGenerator.normalized(value) == value {
                #expect(parsed == value, "round \(round): \(text)")
            }
        }
    }

    @Test func writingIsCanonical() throws {
        var random = JSONGenerator(seed: Self.seed("writingIsCanonical"))
        random.nonFinite = true
        for round in 0..<2_000 {
            let bytes = Self.write(random.value())
            let again = Self.write(try JSONValue(parsing: bytes))
            #expect(again == bytes, "round \(round): \(String(decoding: bytes, as: UTF8.self))")
        }
    }

    @Test func writerBytesAreCanonicalJSONEncodeBytes() throws {
        var random = JSONGenerator(seed: Self.seed("writerBytesAreCanonicalJSONEncodeBytes"))
        random.negativeZero = false
        for round in 0..<2_000 {
            let value = random.value()
            let bytes = value.canonicalData()
            #expect(
                bytes == (try CanonicalJSON.encode(value)),
                "round \(round): \(String(decoding: bytes, as: UTF8.self))")
        }
    }

    /// The documented exceptions to "the bytes of `CanonicalJSON.encode`".
    @Test func writerDiffersFromJSONEncoderOnlyWhereDocumented() throws {
        #expect(JSONValue.double(-0.0).canonicalData() == Data("0".utf8))
        #expect(try CanonicalJSON.encode(JSONValue.double(-0.0)) == Data("-0".utf8))
        for value in [Double.nan, .infinity, -.infinity] {
            #expect(JSONValue.array([.double(value)]).canonicalData() == Data("[null]".utf8))
            #expect(throws: EncodingError.self) { try CanonicalJSON.encode(JSONValue.double(value)) }
        }
    }

    @Test(arguments: [
        (JSONValue.double(2), "2"), (.double(-3), "-3"), (.double(1e15), "1000000000000000"),
        (.double(9_007_199_254_740_992), "9007199254740992"), (.double(9_007_199_254_740_994), "9.007199254740994e+15"),
        (.double(1e16), "1e+16"), (.double(0.1), "0.1"), (.double(1e-7), "1e-07"), (.double(0.5), "0.5"),
        (.double(.leastNonzeroMagnitude), "5e-324"), (.double(.greatestFiniteMagnitude), "1.7976931348623157e+308"),
        (.int(.min), "-9223372036854775808"), (.int(.max), "9223372036854775807"), (.int(0), "0"),
        (
            .string("\u{8}\u{C}\n\r\t\"\\/\u{0}\u{1F}\u{7F}\u{2028}é🙂"),
            #""\b\f\n\r\t\"\\/\u0000\u001f\#u{7F}\#u{2028}é🙂""#
        ),
        (["b": 1, "a": ["d": nil, "c": true]] as JSONValue, #"{"a":{"c":true,"d":null},"b":1}"#),
        (["é": 1, "o\u{308}": 2, "z": 3, "ss": 4] as JSONValue, #"{"o\#u{308}":2,"ss":4,"z":3,"é":1}"#),
    ])
    func writesTheCanonicalForm(value: JSONValue, text: String) {
        #expect(String(decoding: value.canonicalData(), as: UTF8.self) == text)
        var output: [UInt8] = []
        if case .string(let string) = value {
            JSONValue.writeString(string, to: &output)
            #expect(String(decoding: output, as: UTF8.self) == text, "writeString is the same escaper")
        }
    }

    // MARK: - Refusals

    static func refusal(_ bytes: [UInt8]) -> SyncModelsError? {
        do {
            _ = try JSONValue(parsing: Data(bytes))
            return nil
        } catch {
            return error as? SyncModelsError
        }
    }

    @Test(arguments: [
        (#"{"a":1,"a":2}"#, 7), (#"{"a":1,"\u0061":2}"#, 7), (#"[{"x":{"k":1,"k":1}}]"#, 13),
        (#"{"é":1,"e\u0301":2}"#, 8), ("{\"K\":1,\"\u{212A}\":2}", 7),
    ])
    func refusesRepeatedKeys(text: String, offset: Int) {
        let error = Self.refusal(Array(text.utf8))
        #expect(error?.code == "json.invalid")
        #expect(error?.message == "repeated key at byte \(offset)", "\(text)")
    }

    @Test(
        arguments: [
            [0x22, 0x80, 0x22], [0x22, 0xC0, 0x80, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22],
            [0x22, 0xF5, 0x80, 0x80, 0x80, 0x22],
            [0x22, 0xE2, 0x82, 0x22], [0x22, 0x61, 0x5C, 0x6E, 0xFF, 0x22], [0x7B, 0x22, 0xFE, 0x22, 0x3A, 0x31, 0x7D],
            [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], [0x22, 0xE0, 0x80, 0xAF, 0x22],
        ] as [[UInt8]])
    func refusesInvalidUTF8(bytes: [UInt8]) {
        let error = Self.refusal(bytes)
        #expect(error?.code == "json.invalid")
        #expect(error?.message.hasPrefix("invalid UTF-8 at byte") == true, "\(error?.message ?? "accepted")")
        #expect(throws: JSONReader.Bail.self) { try bytes.withUnsafeBytes { try JSONReader.validate($0) } }
    }

    @Test func refusesNestingPastTheLimitAndOnlyPastIt() throws {
        for (open, close) in [("[", "]"), (#"{"k":"#, "}")] {
            let limit = JSONReader.maxDepth
            let deepest = String(repeating: open, count: limit) + "1" + String(repeating: close, count: limit)
            _ = try JSONValue(parsing: Data(deepest.utf8))
            let deeper = String(repeating: open, count: limit + 1) + "1" + String(repeating: close, count: limit + 1)
            let error = Self.refusal(Array(deeper.utf8))
            #expect(error?.code == "json.invalid")
            #expect(error?.message.hasPrefix("nesting deeper than 512") == true, "\(error?.message ?? "accepted")")
        }
    }

    @Test(arguments: ["1 2", "{} {}", "[]]", "\"a\"x", "null,", "0 0", "true false", "{}\u{0}"])
    func refusesTrailingData(text: String) {
        let error = Self.refusal(Array(text.utf8))
        #expect(error?.code == "json.invalid")
        #expect(error?.message.hasPrefix("unexpected data after the value") == true, "\(error?.message ?? "")")
    }

    /// `readObject` refuses a repeated key itself, in small objects (fingerprints), objects with more than 16
    /// keys and with keys that are not ASCII (a set), and inside values it skips.
    @Test func readObjectRefusesRepeatedKeys() {
        func members(_ text: String) -> [String]? {
            Array(text.utf8).withUnsafeBytes { bytes in
                var reader = JSONReader(bytes)
                var keys: [String] = []
                do throws(JSONReader.Bail) {
                    try reader.readObject { reader, key throws(JSONReader.Bail) in
                        keys.append(key)
                        try reader.skipValue()
                    }
                    try reader.expectEnd()
                    return keys
                } catch {
                    #expect(error.reason == .repeatedKey, "\(text): \(error)")
                    return nil
                }
            }
        }
        let many = (0..<40).map { "\"k\($0)\":\($0)" }
        #expect(members("{" + many.joined(separator: ",") + "}")?.count == 40)
        #expect(members("{" + (many + ["\"k7\":0"]).joined(separator: ",") + "}") == nil)
        #expect(members("{" + (many + ["\"k39\":0"]).joined(separator: ",") + "}") == nil)
        #expect(members(#"{"a":1,"b":2,"a":3}"#) == nil)
        #expect(members(#"{"a":1,"é":2,"b":{"x":[1,{"y":1}]},"e\u0301":3}"#) == nil)
        #expect(members("{\"é\":1,\"K\":2,\"\u{212A}\":3}") == nil)
        #expect(members(#"{"é":1,"ü":2,"a":{"z":1,"z":2}}"#) == nil)
        #expect(members(#"{"é":1,"ü":2,"a":{"z":1,"y":2},"b":"é"}"#) == ["é", "ü", "a", "b"])
        #expect(members(#"{"a\"b":1,"a\\b":2,"\n":3}"#) == ["a\"b", "a\\b", "\n"])
    }

    /// What `JSONReader.validate` accepts is exactly what `JSONValue(parsing:)` accepts, and it never
    /// crashes: random byte edits of written documents.
    @Test func validationAndParsingAgreeOnMutatedDocuments() throws {
        var random = JSONGenerator(seed: Self.seed("validationAndParsingAgreeOnMutatedDocuments"))
        let alphabet = Array(#"{}[]":,\-0123456789.eE+ntfrul"#.utf8) + [0x00, 0x1F, 0x80, 0xC3, 0xED, 0xFF]
        for round in 0..<3_000 {
            var bytes = [UInt8](Self.write(random.value()))
            for _ in 0..<random.int(1...3) {
                let index = random.int(0...max(0, bytes.count - 1))
                switch random.int(0...3) {
                case 0 where !bytes.isEmpty: bytes[index] = alphabet[random.int(0...alphabet.count - 1)]
                case 1 where !bytes.isEmpty: bytes.remove(at: index)
                case 2: bytes.insert(alphabet[random.int(0...alphabet.count - 1)], at: min(index, bytes.count))
                default: bytes = Array(bytes.prefix(index))
                }
            }
            let parsed = Result { try JSONValue(parsing: Data(bytes)) }
            let valid = bytes.withUnsafeBytes { raw in
                Result { () throws(JSONReader.Bail) in try JSONReader.validate(raw) }
            }
            switch (parsed, valid) {
            case (.success(let value), .success):
                let canonical = value.canonicalData()
                #expect(try JSONValue(parsing: canonical).canonicalData() == canonical, "round \(round)")
            case (.failure(let error), .failure(let bail)):
                #expect((error as? SyncModelsError)?.code == "json.invalid", "round \(round)")
                #expect(bail.isMalformed, "round \(round)")
            default:
                Issue.record("round \(round): parse \(parsed), validate \(valid): \(bytes)")
            }
        }
    }
}

/// Random `JSONValue`s: nested, strings with escapes, controls, combining marks and astral characters,
/// integers at the `Int64` bounds, doubles of every magnitude (SplitMix64, so a seed replays a run).
struct JSONGenerator {
    var random: SplitMix64
    /// Whether doubles may be NaN or infinite (written as null).
    var nonFinite = false
    /// Whether doubles may be -0.0 (written as 0).
    var negativeZero = true

    init(seed: UInt64) {
        random = SplitMix64(seed: seed)
    }

    mutating func next() -> UInt64 { random.next() }

    mutating func int(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.count))
    }

    static let characters: [String] = [
        "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\r", "\t", "\u{8}", "\u{C}", "\u{0}", "\u{1}", "\u{1F}", "\u{7F}",
        "é", "e\u{301}", "ß", "漢", "\u{2028}", "\u{FEFF}", "\u{FFFF}", "🙂", "𝄞", "👩‍👩‍👧", "\u{212A}", "K", "{", "]", ":",
    ]

    mutating func string() -> String {
        String((0..<int(0...8)).map { _ in Self.characters[int(0...Self.characters.count - 1)] }.joined())
    }

    mutating func double() -> Double {
        switch int(0...9) {
        case 0:
            return [
                0.1, 0.5, 1e15, 9_007_199_254_740_992, 9_007_199_254_740_994, 1e16, 1e21, .leastNonzeroMagnitude, 1e-7,
            ][int(0...8)]
        case 1: return [Double.greatestFiniteMagnitude, -.greatestFiniteMagnitude, .leastNormalMagnitude][int(0...2)]
        case 2 where nonFinite: return [Double.nan, .infinity, -.infinity][int(0...2)]
        case 3 where negativeZero: return -0.0
        case 4: return Double(Int64(bitPattern: next()) >> int(0...63))
        case 5: return Double(int(-1_000_000...1_000_000)) / 64
        default:
            let value = Double(bitPattern: next())
            return value.isFinite ? value : 1.5
        }
    }

    mutating func value(depth: Int = 0) -> JSONValue {
        switch int(0...(depth > 3 ? 5 : 7)) {
        case 0: return .null
        case 1: return .bool(next() & 1 == 0)
        case 2:
            return .int([Int64.min, .max, 0, -1, Int64(bitPattern: next()), Int64(int(-999...999))][int(0...5)])
        case 3: return .double(double())
        case 4, 5: return .string(string())
        case 6: return .array((0..<int(0...4)).map { _ in value(depth: depth + 1) })
        default:
            var object: [String: JSONValue] = [:]
            for _ in 0..<int(0...5) { object[string()] = value(depth: depth + 1) }
            return .object(object)
        }
    }

    /// The value `JSONReader` gives for what `JSONWriter` writes of `value`: doubles written as integers
    /// come back as integers, non-finite ones as null.
    static func normalized(_ value: JSONValue) -> JSONValue {
        switch value {
        case .double(let number) where !number.isFinite: .null
        case .double(let number) where number.rounded(.towardZero) == number && number.magnitude <= 0x1p53:
            .int(Int64(number))
        case .array(let elements): .array(elements.map(normalized))
        case .object(let members): .object(members.mapValues(normalized))
        default: value
        }
    }
}
