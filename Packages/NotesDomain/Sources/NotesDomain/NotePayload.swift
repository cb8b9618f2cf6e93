import Foundation
import SyncCRDT
import SyncModels

/// Converts CRDT operations to and from the JSON payloads of note events.
public enum NotePayload {
    /// The JSON value of an operation.
    public static func encode<T: Encodable>(_ value: T) -> JSONValue {
        // Encoding our own Codable operations to JSON cannot fail.
        let data = try! CanonicalJSON.encode(value)
        return try! JSONValue(parsing: data)
    }

    /// Decodes an operation from a payload field (straight from the parsed value, the path replays take);
    /// nil when the field is absent or has another shape.
    public static func operation<T: JSONValueDecodable>(_ type: T.Type, _ value: JSONValue?) -> T? {
        value.flatMap { try? T(json: $0) }
    }

    /// Decodes an operation from a payload field through `JSONDecoder`; nil when it has another shape.
    public static func decode<T: Decodable>(_ type: T.Type) -> (JSONValue) -> T? {
        { value in
            try? JSONDecoder().decode(T.self, from: value.canonicalData())
        }
    }
}
