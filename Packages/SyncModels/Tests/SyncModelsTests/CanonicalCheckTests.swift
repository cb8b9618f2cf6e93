import Foundation
import PropertyBased
import Testing

@testable import SyncModels

/// `JSONWriter.isCanonical`: true only for bytes `JSONWriter` would write for the value they hold.
@Suite struct CanonicalCheckTests {
    static func isCanonical(_ text: String) -> Bool {
        Array(text.utf8).withUnsafeBytes { JSONWriter.isCanonical($0) }
    }

    @Test(arguments: [
        #"{}"#, #"[]"#, #"0"#, #"-12"#, #"123456789012345678"#, #"true"#, #"null"#, #""""#,
        #"{"a":1,"b":[true,false,null],"c":{"d":"x"}}"#,
        #"{"A":1,"a":2,"é":3}"#,
        #""quote\" back\\ nl\n cr\r tab\t bs\b ff\f ctl\u0001\u001f / é 🙂""#,
        #"{"ops":[{"insert":{"count":5,"elements":" read","id":{"counter":1,"replica":"e0"}}}]}"#,
    ])
    func acceptsWhatTheWriterWrites(text: String) throws {
        #expect(Self.isCanonical(text))
        let value = try JSONValue(parsing: Data(text.utf8))
        #expect(value.canonicalData() == Data(text.utf8))
    }

    @Test(arguments: [
        #"{ }"#, #"[1, 2]"#, #" 1"#, #"1 "#, #"-0"#, #"1.0"#, #"1.5"#, #"1e3"#, #"1E3"#, #"1234567890123456789"#,
        #"{"b":1,"a":2}"#, #"{"a":1,"a":2}"#, #"{"\u0061":1}"#, #""x\/y""#, #""\u00e9""#, #""\u000a""#,
        #""\u001F""#, #""\u007f""#,
    ])
    func refusesEverythingElse(text: String) {
        #expect(!Self.isCanonical(text))
    }

    /// For random values: the writer's bytes pass unless they hold a fraction or an exponent, and bytes that
    /// pass are the writer's own for the value read from them.
    @Test func agreesWithTheWriterOnRandomValues() async {
        await propertyCheck(count: 300, input: Gen.int(in: 0...Int.max).array(of: 1...40)) { seeds in
            let bytes = seededJSONValue(seeds).canonicalData()
            let text = String(decoding: bytes, as: UTF8.self)
            // The strings here hold no dot: one is a fraction.
            if !text.contains(".") { #expect(Self.isCanonical(text), "\(text)") }
            // Spaces after the separators: never canonical when there is a separator.
            let spaced = text.replacingOccurrences(of: ",", with: ", ")
            if spaced != text { #expect(!Self.isCanonical(spaced), "\(spaced)") }
            if Self.isCanonical(text) {
                #expect(try! JSONValue(parsing: bytes).canonicalData() == bytes)
            }
        }
    }
}
