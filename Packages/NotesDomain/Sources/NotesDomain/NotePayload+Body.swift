import SyncCRDT
import SyncModels

extension NotePayload {
    /// `note.bodyEdited`, `{"ops": [...]}`: operations on the body's text (a FugueMax sequence).
    public struct BodyEdited: NoteEventPayload {
        public static let type = NoteEventType.bodyEdited
        public static let keys: [NotePayloadKey] = [.ops]

        public var ops: [FugueText.Operation]

        public init(ops: [FugueText.Operation]) {
            self.ops = ops
        }
    }
}

extension NotePayload.BodyEdited {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: NotePayloadKey.self)
        ops = try container.decodeField([FugueText.Operation].self, forKey: .ops)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(ops, forKey: .ops)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var ops: [FugueText.Operation]?
        try reader.readNotePayload { reader, key throws(JSONReader.Bail) in
            switch key {
            case .ops: ops = try [FugueText.Operation](reading: &reader)
            default: try reader.skipValue()
            }
        }
        guard let ops else { throw JSONReader.Bail() }
        self.init(ops: ops)
    }
}
