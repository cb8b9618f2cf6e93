import SyncModels

/// An open conflict of one note's field: values written on replicas that did not see each other, all kept
/// for review (docs/ARCHITECTURE.md, "Conflicts and rejections"). Every replica that has seen the same
/// events shows the same winner and the same values; an assignment that saw them all resolves it.
public struct NoteConflict: Sendable, Codable, Hashable {
    /// The fields that keep concurrent values.
    public enum Field: String, Sendable, Codable, Hashable {
        case title
    }

    public var note: NoteID
    public var field: Field
    /// The concurrent values, the shown one (the winner) first, then by decreasing HLC.
    public var values: [NoteView.ConflictValue]

    /// - Parameters:
    ///   - note: the note whose field is in conflict.
    ///   - field: the field.
    ///   - values: the concurrent values, the shown one first (at least two).
    public init(note: NoteID, field: Field, values: [NoteView.ConflictValue]) {
        self.note = note
        self.field = field
        self.values = values
    }

    /// The value the note shows: the greatest HLC (ties by replica), as last-writer-wins would pick.
    public var winner: NoteView.ConflictValue { values[0] }

    private enum CodingKeys: String, CodingKey { case note, field, values, winner }

    /// `{"note": "<id>", "field", "values": [{"value", "replica", "hlc", "dot"}], "winner": {…}}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(note.description, forKey: .note)
        try container.encode(field, forKey: .field)
        try container.encode(values, forKey: .values)
        try container.encode(winner, forKey: .winner)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard let note = NoteID(try container.decode(String.self, forKey: .note)) else {
            throw DecodingError.dataCorruptedError(forKey: .note, in: container, debugDescription: "not a note id")
        }
        self.note = note
        field = try container.decode(Field.self, forKey: .field)
        values = try container.decode([NoteView.ConflictValue].self, forKey: .values)
        guard !values.isEmpty else {
            throw DecodingError.dataCorruptedError(forKey: .values, in: container, debugDescription: "no values")
        }
    }
}

extension NoteState {
    /// The note's open conflicts (its title's, if any), for a note `id`.
    public func conflicts(of id: NoteID) -> [NoteConflict] {
        guard let values = titleConflict else { return [] }
        return [NoteConflict(note: id, field: .title, values: values)]
    }

    /// The dots a new title assignment overwrites: every title this state shows or holds in conflict.
    public var titleOverwrites: [Dot] { title.entries.keys.sorted() }
}
