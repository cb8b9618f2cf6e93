import SyncModels

extension NotePayload {
    /// `note.pinnedSet`, `{"pinned"}`: whether the note is pinned (LWW).
    public struct PinnedSet: NoteEventPayload {
        public static let type = NoteEventType.pinnedSet
        public static let keys: [NotePayloadKey] = [.pinned]

        public var pinned: Bool

        public init(pinned: Bool) {
            self.pinned = pinned
        }
    }

    /// `note.deleted`, `{}`: the note is deleted (LWW).
    public struct Deleted: NoteEventPayload {
        public static let type = NoteEventType.deleted
        public static let keys: [NotePayloadKey] = []

        public init() {}
    }
}

extension NotePayload.PinnedSet {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: NotePayloadKey.self)
        pinned = try container.decodeField(Bool.self, forKey: .pinned)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(pinned, forKey: .pinned)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var pinned: Bool?
        try reader.readNotePayload { reader, key throws(JSONReader.Bail) in
            switch key {
            case .pinned: pinned = try reader.readBool()
            default: try reader.skipValue()
            }
        }
        guard let pinned else { throw JSONReader.Bail() }
        self.init(pinned: pinned)
    }
}

extension NotePayload.Deleted {
    /// Any object.
    public init(from decoder: any Decoder) throws {
        _ = try decoder.container(keyedBy: NotePayloadKey.self)
    }

    /// `{}`.
    public func encode(to encoder: any Encoder) throws {
        _ = encoder.container(keyedBy: NotePayloadKey.self)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        try reader.readNotePayload { reader, _ throws(JSONReader.Bail) in try reader.skipValue() }
    }
}
