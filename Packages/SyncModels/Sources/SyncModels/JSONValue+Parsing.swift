import Foundation

extension JSONValue {
    /// Parses one JSON document from UTF-8 bytes with `JSONReader`, by its rule set (RFC 8259; nesting up to
    /// 512; repeated keys, invalid UTF-8 and trailing data refused; integer literals that fit in `Int64` as
    /// `.int`, other numbers as `.double`).
    /// - Throws: `SyncModelsError` with code `json.invalid` and a message naming the problem and its byte
    ///   offset.
    public init(parsing data: Data) throws {
        self = try data.withUnsafeBytes { try JSONValue(parsing: $0) }
    }

    /// Parses one JSON document from UTF-8 bytes in place (a SQLite column, a slice of a larger buffer).
    /// - Throws: `SyncModelsError` with code `json.invalid` and the byte offset of the problem.
    public init(parsing bytes: UnsafeRawBufferPointer) throws {
        var reader = JSONReader(bytes)
        do throws(JSONReader.Bail) {
            let value = try reader.readValue()
            try reader.expectEnd()
            self = value
        } catch {
            throw SyncModelsError(code: "json.invalid", message: error.description)
        }
    }

    /// The canonical JSON bytes of this value, written by `JSONWriter`: the bytes `CanonicalJSON.encode`
    /// writes (sorted keys, no escaped slashes) but for `-0.0` and non-finite doubles (see `JSONWriter`).
    public func canonicalData() -> Data {
        var writer = JSONWriter(capacity: 64)
        writer.value(self)
        return writer.data
    }

    /// Appends `string` as a JSON string exactly as `canonicalData()` writes it (with `JSONWriter`'s one
    /// escaper), for code that writes canonical JSON of a known shape without building a `JSONValue` first.
    public static func writeString(_ string: String, to output: inout [UInt8]) {
        JSONWriter.appendString(string, to: &output)
    }
}
