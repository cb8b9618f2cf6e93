import SyncModels
import SyncProtocol

/// Turns an event's `JSONValue` payload into the JSON text stored in the `events.payload` column (`json`,
/// kept verbatim): its canonical bytes, written by `JSONWriter`, the same bytes the client stores for it.
///
/// It refuses what the column would refuse or what is too large: U+0000 inside a string or key, which is
/// valid JSON but cannot be stored by PostgreSQL, is an `event.invalid` rejection rather than a database
/// error; text past `maxBytes` is `request.tooLarge`.
struct PayloadEncoder {
    enum Failure: Error, Equatable {
        case containsNul
        case tooLarge
    }

    /// The canonical JSON text of `value`.
    /// - Throws: `Failure.tooLarge` when the text is longer than `maxBytes`, else `Failure.containsNul`
    ///   when a string or key holds U+0000.
    static func encode(_ value: JSONValue, maxBytes: Int) throws(Failure) -> String {
        var writer = JSONWriter(capacity: 256)
        writer.value(value)
        guard writer.count <= maxBytes else { throw .tooLarge }
        let bytes = writer.bytes
        if containsEscapedNul(bytes) { throw .containsNul }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether canonical JSON holds U+0000: the writer escapes it as `\u0000`. A backslash appears only
    /// inside strings, always as the first byte of a two-byte escape or of `\uXXXX`, so escapes are read in
    /// pairs and an escaped backslash followed by `u0000` is not mistaken for one.
    static func containsEscapedNul(_ bytes: [UInt8]) -> Bool {
        var index = 0
        while let backslash = bytes[index...].firstIndex(of: UInt8(ascii: "\\")) {
            if bytes[backslash + 1] == UInt8(ascii: "u"),
                bytes[backslash + 2..<backslash + 6].elementsEqual("0000".utf8)
            {
                return true
            }
            index = backslash + 2
        }
        return false
    }
}
