import Foundation
import PropertyBased
import Testing

@testable import SyncModels

@Suite struct JSONParsingTests {
    @Test(arguments: [
        #"{"a":[1,-2,3.5,"x\/y",true,false,null,{"n":{}}],"big":9223372036854775807,"e":1e3,"s":"é漢字🙂\"q\"\\ \n\t\u0001"}"#,
        #"  [ ]  "#, #""\ud83d\ude42""#, "0", "-0.5", #"{"":""}"#,
    ])
    func agreesWithJSONDecoderAndCanonicalEncoding(text: String) throws {
        let data = Data(text.utf8)
        let fast = try JSONValue(parsing: data)
        #expect(fast == (try JSONDecoder().decode(JSONValue.self, from: data)))
        #expect(fast.canonicalData() == (try CanonicalJSON.encode(fast)), "the same canonical bytes")
    }

    @Test(arguments: ["", "{", "[1,]", "{\"a\" 1}", "tru", "\"unterminated", "01x", "\"\\x\"", "[1] 2", "\"\u{01}\""])
    func rejectsInvalidJSON(text: String) {
        #expect(throws: SyncModelsError.self) { try JSONValue(parsing: Data(text.utf8)) }
    }

    @Test func rejectsDeepNesting() {
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: SyncModelsError.self) { try JSONValue(parsing: Data(deep.utf8)) }
    }

    @Test func randomValuesRoundTripThroughBothCodecs() async {
        await propertyCheck(count: 300, input: Gen.int(in: 0...Int.max).array(of: 1...40)) { seeds in
            var iterator = seeds.makeIterator()
            func next() -> Int { iterator.next() ?? 0 }
            func value(_ depth: Int) -> JSONValue {
                switch next() % (depth > 3 ? 5 : 7) {
                case 0: return .null
                case 1: return .bool(next() % 2 == 0)
                case 2: return .int(Int64(next() % 2_000_001) - 1_000_000)
                case 3: return .double(Double(next() % 10_000) / 64)
                case 4: return .string(String(repeating: "ab\"\\/é\n", count: next() % 3))
                case 5: return .array((0..<(next() % 4)).map { _ in value(depth + 1) })
                default:
                    return .object(
                        Dictionary(
                            (0..<(next() % 4)).map { _ in ("k\(next() % 10)", value(depth + 1)) },
                            uniquingKeysWith: { a, _ in a }))
                }
            }
            let original = value(0)
            let canonical = try! CanonicalJSON.encode(original)
            #expect(original.canonicalData() == canonical)
            // JSON has one number type, so 2.0 comes back as 2: what must hold is that the canonical bytes are
            // stable through a parse, and that both decoders agree.
            let parsed = try! JSONValue(parsing: canonical)
            #expect(parsed.canonicalData() == canonical)
            #expect(parsed == (try! JSONDecoder().decode(JSONValue.self, from: canonical)))
        }
    }
}
