import SyncModels

extension NotePayload {
    /// `note.created`, `{"title"}`: the note exists, with its first title (LWW, like `TitleSet`).
    public struct Created: NoteEventPayload {
        public static let type = NoteEventType.created
        public static let keys: [NotePayloadKey] = [.title]

        public var title: String

        public init(title: String) {
            self.title = title
        }
    }

    /// `note.titleSet`, `{"title"}`: the note's title (LWW register ordered by the event's HLC).
    public struct TitleSet: NoteEventPayload {
        public static let type = NoteEventType.titleSet
        public static let keys: [NotePayloadKey] = [.title]

        public var title: String

        public init(title: String) {
            self.title = title
        }
    }
}

extension NotePayload.Created {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: NotePayloadKey.self)
        title = try container.decodeField(String.self, forKey: .title)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(title, forKey: .title)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        self.init(title: try NotePayload.TitleSet(reading: &reader).title)
    }
}

extension NotePayload.TitleSet {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: NotePayloadKey.self)
        title = try container.decodeField(String.self, forKey: .title)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(title, forKey: .title)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var title: String?
        try reader.readNotePayload { reader, key throws(JSONReader.Bail) in
            switch key {
            case .title: title = try reader.readString()
            default: try reader.skipValue()
            }
        }
        guard let title else { throw JSONReader.Bail() }
        self.init(title: title)
    }
}
