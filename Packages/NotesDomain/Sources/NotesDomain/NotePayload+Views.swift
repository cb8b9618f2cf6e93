import SyncCRDT
import SyncModels

extension NotePayload {
    /// `note.viewed`, `{"count", "op"}`: `count` views; `op` adds them to the view count (a PN-counter),
    /// carrying the replica's running totals.
    public struct Viewed: NoteEventPayload {
        public static let type = NoteEventType.viewed
        public static let keys: [NotePayloadKey] = [.count, .op]

        public var count: Int
        public var op: PNCounter.Operation

        public init(count: Int, op: PNCounter.Operation) {
            self.count = count
            self.op = op
        }
    }
}

extension NotePayload.Viewed {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: NotePayloadKey.self)
        count = try container.decodeField(Int.self, forKey: .count)
        op = try container.decodeField(PNCounter.Operation.self, forKey: .op)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(count, forKey: .count)
        try container.encode(op, forKey: .op)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var count: Int?
        var op: PNCounter.Operation?
        try reader.readNotePayload { reader, key throws(JSONReader.Bail) in
            switch key {
            case .count: count = try reader.readInt()
            case .op: op = try PNCounter.Operation(reading: &reader)
            default: try reader.skipValue()
            }
        }
        guard let count, let op else { throw JSONReader.Bail() }
        self.init(count: count, op: op)
    }
}
