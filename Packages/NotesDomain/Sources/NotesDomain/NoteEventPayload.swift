import Foundation
import SyncCRDT
import SyncModels

/// The payload of one note event type as a value: its fields typed (the CRDT operations as the SyncCRDT
/// operation types `NoteState` applies), its JSON form through `Codable` with `NotePayloadKey`, and that
/// same JSON read in place by `JSONReadable.init(reading:)` (replays read millions of payloads that way).
///
/// The reader reads exactly what `Codable` decodes and bails on anything else, in which case `JSONDecoder`
/// decodes the bytes: the reader changes speed, never results.
public protocol NoteEventPayload: Codable, Hashable, Sendable, JSONReadable {
    /// The event type that carries this payload.
    static var type: NoteEventType { get }
    /// The payload's keys, in the order they are decoded and `NoteRules` checks them.
    static var keys: [NotePayloadKey] { get }
    /// The keys among `keys` a payload may leave out (fields added to a type after its first writers; an
    /// absent one keeps the meaning the type had before). The default: none.
    static var optionalKeys: Set<NotePayloadKey> { get }
}

extension NoteEventPayload {
    public static var optionalKeys: Set<NotePayloadKey> { [] }

    /// The keys every payload of the type has: `keys` without `optionalKeys`.
    public static var requiredKeys: [NotePayloadKey] { keys.filter { !optionalKeys.contains($0) } }
}

extension NoteEventPayload {
    /// The payload as an event carries it: its canonical JSON (`CanonicalJSON`, sorted keys).
    public var json: JSONValue {
        // Encoding these value types to JSON cannot fail, and what CanonicalJSON writes parses.
        try! JSONValue(parsing: try! CanonicalJSON.encode(self))
    }

    /// Decodes the payload from JSON bytes, read in place; where the reader is not sure of them,
    /// `JSONDecoder` decodes them.
    /// - Throws: `NotePayloadError` naming the first field, in `keys` order, that is missing or malformed.
    public init(jsonBytes bytes: UnsafeRawBufferPointer) throws(NotePayloadError) {
        var reader = JSONReader(bytes)
        do throws(JSONReader.Bail) {
            let value = try Self(reading: &reader)
            if reader.atEnd() {
                self = value
                return
            }
        } catch {}
        do {
            self = try JSONDecoder().decode(Self.self, from: Data(bytes))
        } catch {
            throw NotePayloadError(type: Self.type, decoding: error)
        }
    }

    /// Decodes the payload from an event's JSON value (through its canonical bytes).
    /// - Throws: `NotePayloadError` naming the first field, in `keys` order, that is missing or malformed.
    public init(json: JSONValue) throws(NotePayloadError) {
        let decoded = json.canonicalData().withUnsafeBytes { bytes in
            Result { () throws(NotePayloadError) in try Self(jsonBytes: bytes) }
        }
        self = try decoded.get()
    }
}
