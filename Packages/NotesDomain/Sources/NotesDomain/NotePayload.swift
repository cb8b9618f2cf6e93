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
}

extension JSONReader {
    /// A string, or nil (the value skipped) when the value is of another type.
    mutating func readStringIfString() throws(Bail) -> String? {
        guard try peek() == UInt8(ascii: "\"") else {
            try skipValue()
            return nil
        }
        return try readString()
    }

    /// A boolean, or nil (the value skipped) when the value is of another type.
    mutating func readBoolIfBool() throws(Bail) -> Bool? {
        switch try peek() {
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return try readBool()
        default:
            try skipValue()
            return nil
        }
    }
}
