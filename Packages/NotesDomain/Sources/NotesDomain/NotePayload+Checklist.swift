import SyncCRDT
import SyncModels

extension NotePayload {
    /// `note.checklistItemAdded`, `{"item", "text", "op"}`: `op` inserts the item's id into the checklist (a
    /// FugueMax sequence of item ids); the item's text is `text` (LWW).
    public struct ChecklistItemAdded: NoteEventPayload {
        public static let type = NoteEventType.checklistItemAdded
        public static let keys: [NotePayloadKey] = [.item, .text, .op]

        /// The item's id (a `NoteID`'s form).
        public var item: String
        public var text: String
        public var op: FugueList<String>.Operation

        public init(item: String, text: String, op: FugueList<String>.Operation) {
            self.item = item
            self.text = text
            self.op = op
        }
    }

    /// `note.checklistItemRemoved`, `{"item", "op"}`: `op` removes the item's id from the checklist.
    public struct ChecklistItemRemoved: NoteEventPayload {
        public static let type = NoteEventType.checklistItemRemoved
        public static let keys: [NotePayloadKey] = [.item, .op]

        public var item: String
        public var op: FugueList<String>.Operation

        public init(item: String, op: FugueList<String>.Operation) {
            self.item = item
            self.op = op
        }
    }

    /// `note.checklistItemTextSet`, `{"item", "text"}`: the item's text (LWW).
    public struct ChecklistItemTextSet: NoteEventPayload {
        public static let type = NoteEventType.checklistItemTextSet
        public static let keys: [NotePayloadKey] = [.item, .text]

        public var item: String
        public var text: String

        public init(item: String, text: String) {
            self.item = item
            self.text = text
        }
    }

    /// `note.checklistItemDoneSet`, `{"item", "done"}`: the item's done flag (LWW).
    public struct ChecklistItemDoneSet: NoteEventPayload {
        public static let type = NoteEventType.checklistItemDoneSet
        public static let keys: [NotePayloadKey] = [.item, .done]

        public var item: String
        public var done: Bool

        public init(item: String, done: Bool) {
            self.item = item
            self.done = done
        }
    }
}

extension NotePayload.ChecklistItemAdded {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: NotePayloadKey.self)
        item = try container.decodeField(String.self, forKey: .item)
        text = try container.decodeField(String.self, forKey: .text)
        op = try container.decodeField(FugueList<String>.Operation.self, forKey: .op)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(item, forKey: .item)
        try container.encode(text, forKey: .text)
        try container.encode(op, forKey: .op)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var item: String?
        var text: String?
        var op: FugueList<String>.Operation?
        try reader.readNotePayload { reader, key throws(JSONReader.Bail) in
            switch key {
            case .item: item = try reader.readString()
            case .text: text = try reader.readString()
            case .op: op = try FugueList<String>.Operation(reading: &reader)
            default: try reader.skipValue()
            }
        }
        guard let item, let text, let op else { throw JSONReader.Bail() }
        self.init(item: item, text: text, op: op)
    }
}

extension NotePayload.ChecklistItemRemoved {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: NotePayloadKey.self)
        item = try container.decodeField(String.self, forKey: .item)
        op = try container.decodeField(FugueList<String>.Operation.self, forKey: .op)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(item, forKey: .item)
        try container.encode(op, forKey: .op)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var item: String?
        var op: FugueList<String>.Operation?
        try reader.readNotePayload { reader, key throws(JSONReader.Bail) in
            switch key {
            case .item: item = try reader.readString()
            case .op: op = try FugueList<String>.Operation(reading: &reader)
            default: try reader.skipValue()
            }
        }
        guard let item, let op else { throw JSONReader.Bail() }
        self.init(item: item, op: op)
    }
}

extension NotePayload.ChecklistItemTextSet {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: NotePayloadKey.self)
        item = try container.decodeField(String.self, forKey: .item)
        text = try container.decodeField(String.self, forKey: .text)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(item, forKey: .item)
        try container.encode(text, forKey: .text)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var item: String?
        var text: String?
        try reader.readNotePayload { reader, key throws(JSONReader.Bail) in
            switch key {
            case .item: item = try reader.readString()
            case .text: text = try reader.readString()
            default: try reader.skipValue()
            }
        }
        guard let item, let text else { throw JSONReader.Bail() }
        self.init(item: item, text: text)
    }
}

extension NotePayload.ChecklistItemDoneSet {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: NotePayloadKey.self)
        item = try container.decodeField(String.self, forKey: .item)
        done = try container.decodeField(Bool.self, forKey: .done)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(item, forKey: .item)
        try container.encode(done, forKey: .done)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var item: String?
        var done: Bool?
        try reader.readNotePayload { reader, key throws(JSONReader.Bail) in
            switch key {
            case .item: item = try reader.readString()
            case .done: done = try reader.readBool()
            default: try reader.skipValue()
            }
        }
        guard let item, let done else { throw JSONReader.Bail() }
        self.init(item: item, done: done)
    }
}
