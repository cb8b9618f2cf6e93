import Foundation
import SyncModels

/// Converts CRDT operations to and from the JSON payloads of note events.
public enum NotePayload {
    /// The JSON value of an operation.
    public static func encode<T: Encodable>(_ value: T) -> JSONValue {
        // Encoding our own Codable operations to JSON cannot fail.
        let data = try! CanonicalJSON.encode(value)
        return try! JSONValue(parsing: data)
    }

    /// Decodes an operation from a payload field; nil when it has another shape.
    public static func decode<T: Decodable>(_ type: T.Type) -> (JSONValue) -> T? {
        { value in
            try? JSONDecoder().decode(T.self, from: value.canonicalData())
        }
    }
}
