import SyncCRDT
import SyncModels

extension NotePayload {
    /// `note.tagAdded`, `{"tag", "op"}`: `op` adds `tag` to the tags (an add-wins OR-Set).
    public struct TagAdded: NoteEventPayload {
        public static let type = NoteEventType.tagAdded
        public static let keys: [NotePayloadKey] = [.tag, .op]

        public var tag: String
        public var op: ORSet<String, AddWins>.Operation

        public init(tag: String, op: ORSet<String, AddWins>.Operation) {
            self.tag = tag
            self.op = op
        }
    }

    /// `note.tagRemoved`, `{"tag", "observed": [dot], "op"}`: `op` removes the adds of `tag` it observed.
    public struct TagRemoved: NoteEventPayload {
        public static let type = NoteEventType.tagRemoved
        public static let keys: [NotePayloadKey] = [.tag, .observed, .op]

        public var tag: String
        /// The dots of the adds the remove observed (what the client writes: `op.observed`).
        public var observed: [Dot]
        public var op: ORSet<String, AddWins>.Operation

        public init(tag: String, observed: [Dot], op: ORSet<String, AddWins>.Operation) {
            self.tag = tag
            self.observed = observed
            self.op = op
        }

        /// The remove `op` of `tag`, with the adds it observed beside it.
        public init(tag: String, op: ORSet<String, AddWins>.Operation) {
            self.init(tag: tag, observed: op.observed, op: op)
        }
    }
}

extension NotePayload.TagAdded {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: NotePayloadKey.self)
        tag = try container.decodeField(String.self, forKey: .tag)
        op = try container.decodeField(ORSet<String, AddWins>.Operation.self, forKey: .op)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(tag, forKey: .tag)
        try container.encode(op, forKey: .op)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var tag: String?
        var op: ORSet<String, AddWins>.Operation?
        try reader.readNotePayload { reader, key throws(JSONReader.Bail) in
            switch key {
            case .tag: tag = try reader.readString()
            case .op: op = try ORSet<String, AddWins>.Operation(reading: &reader)
            default: try reader.skipValue()
            }
        }
        guard let tag, let op else { throw JSONReader.Bail() }
        self.init(tag: tag, op: op)
    }
}

extension NotePayload.TagRemoved {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: NotePayloadKey.self)
        tag = try container.decodeField(String.self, forKey: .tag)
        observed = try container.decodeField([Dot].self, forKey: .observed)
        op = try container.decodeField(ORSet<String, AddWins>.Operation.self, forKey: .op)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(tag, forKey: .tag)
        try container.encode(observed, forKey: .observed)
        try container.encode(op, forKey: .op)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var tag: String?
        var observed: [Dot]?
        var op: ORSet<String, AddWins>.Operation?
        try reader.readNotePayload { reader, key throws(JSONReader.Bail) in
            switch key {
            case .tag: tag = try reader.readString()
            case .observed: observed = try [Dot](reading: &reader)
            case .op: op = try ORSet<String, AddWins>.Operation(reading: &reader)
            default: try reader.skipValue()
            }
        }
        guard let tag, let observed, let op else { throw JSONReader.Bail() }
        self.init(tag: tag, observed: observed, op: op)
    }
}
