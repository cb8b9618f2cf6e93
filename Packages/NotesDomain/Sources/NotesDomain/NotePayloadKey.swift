import SyncModels

/// The keys of note event payloads: the one place their names are spelled. Every payload type's `Codable`
/// conformance and its in-place reader (`JSONReader.readNotePayload`) use these, so what a client writes
/// and what a replay reads cannot drift apart.
///
/// A payload type has the keys its `NoteEventPayload.keys` lists; any other key in a payload is ignored, by
/// `Codable` and by the reader alike.
public enum NotePayloadKey: String, CodingKey, CaseIterable, Sendable {
    case title, ops, tag, observed, count, op, pinned, item, text, done, state, overwrites, attachment

    /// The names in `allCases` order: a key's index is its bit in the set of keys a reader has seen.
    static let names: [String] = allCases.map(\.rawValue)
    static let all: [NotePayloadKey] = allCases
}

extension JSONReader {
    /// Reads a note payload's object: `member` is called with each key that is a `NotePayloadKey`, and must
    /// read its value; other keys are skipped. A key seen twice bails: `JSONDecoder` decides what that means.
    mutating func readNotePayload(_ member: (inout JSONReader, NotePayloadKey) throws(Bail) -> Void) throws(Bail) {
        var seen: UInt16 = 0
        try readObject { reader, name throws(Bail) in
            guard let index = NotePayloadKey.names.firstIndex(of: name) else { return try reader.skipValue() }
            guard seen & 1 << index == 0 else { throw Bail() }
            seen |= 1 << index
            try member(&reader, NotePayloadKey.all[index])
        }
    }

    /// An `Int` (a JSON integer that fits).
    mutating func readInt() throws(Bail) -> Int {
        guard let value = Int(exactly: try readInt64()) else { throw Bail() }
        return value
    }
}

extension KeyedDecodingContainer where K == NotePayloadKey {
    /// Decodes the field `key`; any failure is a `DecodingError` whose path starts with `key`, so that
    /// `NotePayloadError` can name the field (`JSONDecoder`'s own errors do not always say where: on Linux
    /// a fraction where an integer belongs comes as invalid JSON, with no path).
    func decodeField<T: Decodable>(_ type: T.Type, forKey key: NotePayloadKey) throws -> T {
        do {
            return try decode(type, forKey: key)
        } catch {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: codingPath + [key], debugDescription: "\(key.stringValue) is missing or malformed",
                    underlyingError: error))
        }
    }
}
