import Foundation
import PropertyBased
import Testing

@testable import SyncModels

/// Golden cases of the one rule set (see `JSONReader`); the seeded properties are in `JSONRoundTripTests`.
@Suite struct JSONParsingTests {
    @Test(arguments: [
        (
            #"{"a":[1,-2,3.5,"x\/y",true,false,null,{"n":{}}],"big":9223372036854775807,"e":1e3,"s":"é漢字🙂\"q\"\\ \n\t\u0001"}"#,
            [
                "a": [1, -2, 3.5, "x/y", true, false, nil, ["n": [:]]], "big": .int(.max), "e": .double(1000),
                "s": "é漢字🙂\"q\"\\ \n\t\u{1}",
            ] as JSONValue
        ),
        (#"  [ ]  "#, .array([])),
        (#""\ud83d\ude42""#, .string("🙂")),
        ("0", .int(0)),
        ("-0", .int(0)),
        ("-0.5", .double(-0.5)),
        (#"{"":""}"#, .object(["": ""])),
        ("2.0", .double(2)),
        ("-9223372036854775808", .int(.min)),
        ("9223372036854775808", .double(9_223_372_036_854_775_808)),
        ("1E-2", .double(0.01)),
        (#""\u0000\u001F\u00e9""#, .string("\u{0}\u{1F}é")),
    ])
    func readsTheRuleSet(text: String, expected: JSONValue) throws {
        let value = try JSONValue(parsing: Data(text.utf8))
        #expect(value == expected)
        #expect(value.canonicalData() == (try CanonicalJSON.encode(value)), "the same canonical bytes")
    }

    @Test(arguments: [
        "", " ", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "{,}", "[,1]", "tru", "nul", "truex", "\"unterminated",
        "01", "-", "1.", ".5", "1e", "1e+", "+1", "0x10", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00x\"",
        "[1] 2", "{} x", "\"\u{01}\"", "\"\t\"", "NaN", "Infinity", "1e400", "-1e400", "{\"a\":1,\"a\":1}",
        "{1:2}", "[1 2]",
    ])
    func refusesInvalidJSON(text: String) {
        #expect(throws: SyncModelsError.self) { try JSONValue(parsing: Data(text.utf8)) }
        do {
            _ = try JSONValue(parsing: Data(text.utf8))
        } catch let error as SyncModelsError {
            #expect(error.code == "json.invalid")
            #expect(error.message.contains("at byte"), "\(error.message)")
        } catch {
            Issue.record("\(error)")
        }
    }

    /// The value `readIntegerValue()` reads from `text`, or why it refused it.
    static func integerValue(_ text: String) -> Result<Int64, JSONReader.Bail> {
        Array(text.utf8).withUnsafeBytes { bytes -> Result<Int64, JSONReader.Bail> in
            var reader = JSONReader(bytes)
            do throws(JSONReader.Bail) {
                let value = try reader.readIntegerValue()
                try reader.expectEnd()
                return .success(value)
            } catch {
                return .failure(error)
            }
        }
    }

    /// `readIntegerValue()` reads what JSON Schema's `integer` admits: any number whose value is an integer,
    /// however it is written, computed from the digits exactly.
    @Test(
        arguments: [
            ("1", 1), ("1.0", 1), ("1e0", 1), ("1E+0", 1), ("10E-1", 1), ("100e-2", 1), ("0.0", 0), ("-0.0", 0),
            ("0e99999999999999999999", 0), ("0.000e-5", 0), ("-5.000", -5), ("1.5e1", 15), ("25e1", 250),
            ("0.0025e5", 250), ("9223372036854775807.0", .max), ("-9223372036854775808.00", .min),
            ("922337203685477580.7e1", .max), ("9.223372036854775807e18", .max), (" 42 ", 42),
        ] as [(String, Int64)])
    func readsIntegerValuesHoweverWritten(text: String, expected: Int64) throws {
        #expect(try Self.integerValue(text).get() == expected, "\(text)")
    }

    /// A number with a fraction, or out of `Int64`'s range, is not an integer; another value is of another
    /// type; a number beyond `Double`'s range is not JSON here, as everywhere.
    @Test(arguments: [
        ("1.5", JSONReader.Bail.Reason.notAnInteger), ("1e-1", .notAnInteger), ("0.1", .notAnInteger),
        ("9223372036854775808", .notAnInteger), ("9223372036854775808.0", .notAnInteger), ("1e19", .notAnInteger),
        ("-9223372036854775809", .notAnInteger), ("9223372036854775807.5", .notAnInteger),
        ("1e99999999999999999999", .numberOutOfRange), ("1e400", .numberOutOfRange), ("\"1\"", .wrongType),
        ("true", .wrongType), ("null", .wrongType), ("1.", .invalidNumber), ("01", .invalidNumber),
    ])
    func refusesNumbersThatAreNotIntegers(text: String, reason: JSONReader.Bail.Reason) {
        #expect(throws: JSONReader.Bail.self) { try Self.integerValue(text).get() }
        if case .failure(let bail) = Self.integerValue(text) {
            #expect(bail.reason == reason, "\(text): \(bail)")
        }
        // The literal reads stay as they were: an integer literal only.
        if text.contains(".") || text.lowercased().contains("e") {
            let literal = Array(text.utf8).withUnsafeBytes { bytes -> Int64? in
                var reader = JSONReader(bytes)
                do throws(JSONReader.Bail) {
                    return try reader.readInt64()
                } catch {
                    return nil
                }
            }
            #expect(literal == nil, "\(text)")
        }
    }

    @Test func refusesDeepNesting() {
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: SyncModelsError.self) { try JSONValue(parsing: Data(deep.utf8)) }
    }

    @Test func randomValuesRoundTripThroughBothCodecs() async {
        await propertyCheck(count: 300, input: Gen.int(in: 0...Int.max).array(of: 1...40)) { seeds in
            let original = seededJSONValue(seeds)
            let canonical = try! CanonicalJSON.encode(original)
            #expect(original.canonicalData() == canonical)
            // JSON has one number type, so 2.0 comes back as 2: what must hold is that the canonical bytes are
            // stable through a parse, and that on canonical bytes `JSONDecoder` agrees.
            let parsed = try! JSONValue(parsing: canonical)
            #expect(parsed.canonicalData() == canonical)
            #expect(parsed == (try! JSONDecoder().decode(JSONValue.self, from: canonical)))
        }
    }
}
