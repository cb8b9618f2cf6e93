import SyncModels
import SyncProtocol

/// Turns an event's `JSONValue` payload into the JSON text stored in the `jsonb` column.
///
/// Faster than `JSONEncoder` for this one shape, and it checks what PostgreSQL's `jsonb` would refuse:
/// U+0000 inside a string or key, which is valid JSON but cannot be stored, is an `event.invalid`
/// rejection rather than a database error.
struct PayloadEncoder {
    enum Failure: Error, Equatable {
        case containsNul
        case tooLarge
    }

    private var writer = EventJSONWriter(capacity: 256)
    private let maxBytes: Int

    init(maxBytes: Int) {
        self.maxBytes = maxBytes
    }

    /// The JSON text of `value`.
    /// - Throws: `Failure.containsNul`, or `Failure.tooLarge` once the text passes `maxBytes`.
    static func encode(_ value: JSONValue, maxBytes: Int) throws(Failure) -> String {
        var encoder = PayloadEncoder(maxBytes: maxBytes)
        try encoder.write(value)
        return String(decoding: encoder.writer.bytes, as: UTF8.self)
    }

    private mutating func write(_ value: JSONValue) throws(Failure) {
        switch value {
        case .null: writer.raw("null")
        case .bool(let flag): writer.raw(flag ? "true" : "false")
        case .int(let number): writer.raw(String(number))
        case .double(let number): writer.raw(number.isFinite ? "\(number)" : "null")
        case .string(let text): try string(text)
        case .array(let items):
            writer.raw("[")
            for (index, item) in items.enumerated() {
                if index > 0 { writer.raw(",") }
                try write(item)
            }
            writer.raw("]")
        case .object(let members):
            writer.raw("{")
            var first = true
            for (key, member) in members {
                if !first { writer.raw(",") }
                first = false
                try string(key)
                writer.raw(":")
                try write(member)
            }
            writer.raw("}")
        }
        if writer.bytes.count > maxBytes { throw .tooLarge }
    }

    private mutating func string(_ text: String) throws(Failure) {
        if text.utf8.contains(0) { throw .containsNul }
        writer.string(text)
    }
}
