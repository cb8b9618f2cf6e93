import SyncCRDT
import SyncModels

extension NotePayload {
    /// `note.attachmentAdded`, `{"attachment", "op"}`: `op` adds `attachment` (a `NoteAttachment`'s element) to
    /// the note's attachments (an add-wins OR-Set, as tags are).
    public struct AttachmentAdded: NoteEventPayload {
        public static let type = NoteEventType.attachmentAdded
        public static let keys: [NotePayloadKey] = [.attachment, .op]

        public var attachment: String
        public var op: ORSet<String, AddWins>.Operation

        public init(attachment: String, op: ORSet<String, AddWins>.Operation) {
            self.attachment = attachment
            self.op = op
        }
    }

    /// `note.attachmentRemoved`, `{"attachment", "observed": [dot], "op"}`: `op` removes the adds of `attachment`
    /// it observed.
    public struct AttachmentRemoved: NoteEventPayload {
        public static let type = NoteEventType.attachmentRemoved
        public static let keys: [NotePayloadKey] = [.attachment, .observed, .op]

        public var attachment: String
        /// The dots of the adds the remove observed (what the client writes: `op.observed`).
        public var observed: [Dot]
        public var op: ORSet<String, AddWins>.Operation

        public init(attachment: String, observed: [Dot], op: ORSet<String, AddWins>.Operation) {
            self.attachment = attachment
            self.observed = observed
            self.op = op
        }

        /// The remove `op` of `attachment`, with the adds it observed beside it.
        public init(attachment: String, op: ORSet<String, AddWins>.Operation) {
            self.init(attachment: attachment, observed: op.observed, op: op)
        }
    }
}

extension NotePayload.AttachmentAdded {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: NotePayloadKey.self)
        attachment = try container.decodeField(String.self, forKey: .attachment)
        op = try container.decodeField(ORSet<String, AddWins>.Operation.self, forKey: .op)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(attachment, forKey: .attachment)
        try container.encode(op, forKey: .op)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var attachment: String?
        var op: ORSet<String, AddWins>.Operation?
        try reader.readNotePayload { reader, key throws(JSONReader.Bail) in
            switch key {
            case .attachment: attachment = try reader.readString()
            case .op: op = try ORSet<String, AddWins>.Operation(reading: &reader)
            default: try reader.skipValue()
            }
        }
        guard let attachment, let op else { throw JSONReader.Bail() }
        self.init(attachment: attachment, op: op)
    }
}

extension NotePayload.AttachmentRemoved {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: NotePayloadKey.self)
        attachment = try container.decodeField(String.self, forKey: .attachment)
        observed = try container.decodeField([Dot].self, forKey: .observed)
        op = try container.decodeField(ORSet<String, AddWins>.Operation.self, forKey: .op)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(attachment, forKey: .attachment)
        try container.encode(observed, forKey: .observed)
        try container.encode(op, forKey: .op)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var attachment: String?
        var observed: [Dot]?
        var op: ORSet<String, AddWins>.Operation?
        try reader.readNotePayload { reader, key throws(JSONReader.Bail) in
            switch key {
            case .attachment: attachment = try reader.readString()
            case .observed: observed = try [Dot](reading: &reader)
            case .op: op = try ORSet<String, AddWins>.Operation(reading: &reader)
            default: try reader.skipValue()
            }
        }
        guard let attachment, let observed, let op else { throw JSONReader.Bail() }
        self.init(attachment: attachment, observed: observed, op: op)
    }
}

/// One file attached to a note: its name in the note and the blob holding its bytes.
///
/// In the note's OR-Set an attachment is one string, `"<hash> <size> <type> <name>"` (the name last, so it may
/// hold spaces), which keeps the set's elements the plain strings the tags' set has: the same CRDT, the same
/// encodings. Attaching the same bytes under the same name twice is one element; the same bytes under two
/// names are two.
public struct NoteAttachment: Sendable, Hashable, Codable, Comparable {
    public var name: String
    public var blob: BlobReference

    /// Names are 1 to 255 characters without control characters.
    public static let nameLength = 1...255

    public init(name: String, blob: BlobReference) {
        self.name = name
        self.blob = blob
    }

    /// The element of the note's set.
    public var element: String { "\(blob.hash.hex) \(blob.size) \(blob.type) \(name)" }

    /// Reads an element of the note's set; nil when `element` is not one.
    public init?(element: String) {
        let parts = element.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, let hash = try? BlobHash(String(parts[0])), String(parts[0]) == hash.hex,
            let size = Int64(parts[1]), size >= 0, BlobReference.isValidMediaType(String(parts[2])),
            Self.isValidName(String(parts[3]))
        else { return nil }
        self.init(name: String(parts[3]), blob: BlobReference(hash: hash, size: size, type: String(parts[2])))
    }

    public static func isValidName(_ name: String) -> Bool {
        nameLength.contains(name.count) && !name.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    public static func < (lhs: NoteAttachment, rhs: NoteAttachment) -> Bool {
        (lhs.name, lhs.blob.hash) < (rhs.name, rhs.blob.hash)
    }
}

extension NoteAttachment {
    /// The blobs an event refers to: an attachment's event its blob, a snapshot the blobs of the attachments
    /// its note still has; none for any other event (the server's blob references, a verifier's reading of
    /// the log).
    public static func blobs(in event: Event) -> [BlobReference] {
        switch event.type {
        case NoteEventType.attachmentAdded.rawValue:
            guard case .object(let fields) = event.payload,
                case .string(let element)? = fields[NotePayloadKey.attachment.stringValue],
                let attachment = NoteAttachment(element: element)
            else { return [] }
            return [attachment.blob]
        case NoteEventType.snapshot.rawValue:
            guard case .snapshot(let snapshot)? = try? NotePayload(type: .snapshot, json: event.payload),
                let state = try? snapshot.state()
            else { return [] }
            return state.attachmentList.map(\.blob)
        default:
            return []
        }
    }
}
