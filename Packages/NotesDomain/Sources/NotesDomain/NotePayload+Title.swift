import SyncModels

extension NotePayload {
    /// `note.created`, `{"title"}`: the note exists, with its first title (a legacy assignment, like a
    /// `TitleSet` without `overwrites`: nothing came before it).
    public struct Created: NoteEventPayload {
        public static let type = NoteEventType.created
        public static let keys: [NotePayloadKey] = [.title]

        public var title: String

        public init(title: String) {
            self.title = title
        }
    }

    /// `note.titleSet`, `{"title", "overwrites"?: [dot]}`: the note's title, an assignment to its
    /// `ReviewRegister`. `overwrites` lists the dots of the titles the writer saw and replaces: titles it did
    /// not see stay beside it as an open conflict (the one with the greatest HLC shown). Without
    /// `overwrites` (what writers before it sent) the assignment is a legacy one and keeps its
    /// last-writer-wins meaning: it replaces every title below its HLC.
    public struct TitleSet: NoteEventPayload {
        public static let type = NoteEventType.titleSet
        public static let keys: [NotePayloadKey] = [.title, .overwrites]
        public static let optionalKeys: Set<NotePayloadKey> = [.overwrites]

        public var title: String
        /// The dots of the titles the writer saw (nil: a legacy, last-writer-wins assignment).
        public var overwrites: [Dot]?

        /// - Parameters:
        ///   - title: the new title.
        ///   - overwrites: the dots of the titles the writer saw and replaces (`NoteState.title.entries`);
        ///     nil writes a legacy payload, which replaces every title below the event's HLC.
        public init(title: String, overwrites: [Dot]? = nil) {
            self.title = title
            self.overwrites = overwrites
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
        overwrites =
            try container.contains(.overwrites) ? container.decodeField([Dot].self, forKey: .overwrites) : nil
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(title, forKey: .title)
        try container.encodeIfPresent(overwrites, forKey: .overwrites)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var title: String?
        var overwrites: [Dot]?
        try reader.readNotePayload { reader, key throws(JSONReader.Bail) in
            switch key {
            case .title: title = try reader.readString()
            case .overwrites: overwrites = try [Dot](reading: &reader)
            default: try reader.skipValue()
            }
        }
        guard let title else { throw JSONReader.Bail() }
        self.init(title: title, overwrites: overwrites)
    }
}
