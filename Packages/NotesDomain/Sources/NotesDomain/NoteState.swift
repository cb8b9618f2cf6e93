import Foundation
import SyncCRDT
import SyncModels

/// One note as a CRDT: a composition of one CRDT per field (docs/ARCHITECTURE.md, "Conflicts and rejections"). Applying
/// the note's events in any order, any number of times, gives the same state.
///
/// - title: a register that keeps concurrent titles for review (`ReviewRegister`): a `note.titleSet` replaces
///   the titles its writer saw, titles written without seeing each other stay as an open conflict, and the
///   one with the greatest HLC (ties by replica) is shown, the title last-writer-wins would show;
/// - pinned, deleted, and each checklist item's text and done flag: LWW registers ordered by the events'
///   HLCs (ties by replica);
/// - tags: add-wins OR-Set (an add concurrent with a remove survives);
/// - view count: PN-counter;
/// - body: text sequence (FugueMax, so concurrent typing at one place never interleaves);
/// - checklist: sequence of item ids (FugueMax).
public struct NoteState: Sendable, Codable, Equatable {
    /// The meaning of `apply` (2: the title keeps concurrent values), the version of the notes projection.
    public static let version = 2

    public var created = false
    public var title = ReviewRegister<String>()
    public var body = FugueText()
    public var tags = ORSet<String, AddWins>()
    public var pinned = LWWRegister<Bool>()
    public var views = PNCounter()
    public var checklist = FugueList<String>()
    public var itemText: [String: LWWRegister<String>] = [:]
    public var itemDone: [String: LWWRegister<Bool>] = [:]
    public var deleted = LWWRegister<Bool>()
    /// The files attached (`NoteAttachment` elements): an add-wins OR-Set, as tags are.
    public var attachments = ORSet<String, AddWins>()

    public init() {}

    /// Applies one event of this note. Events of other types are ignored; a payload that does not decode
    /// (which validation keeps out) changes nothing.
    public mutating func apply(type: String, payload: JSONValue, hlc: HLCTimestamp, dot: Dot) {
        guard let kind = NoteEventType(rawValue: type), let payload = try? NotePayload(type: kind, json: payload)
        else { return }
        apply(payload, hlc: hlc, dot: dot)
    }

    /// Applies one event from the canonical JSON bytes of its payload (as the log stores it), read in place
    /// without building a `JSONValue`; the same result as `apply(type:payload:hlc:dot:)` on the parsed bytes.
    public mutating func apply(type: String, payloadBytes bytes: UnsafeRawBufferPointer, hlc: HLCTimestamp, dot: Dot) {
        guard let kind = NoteEventType(rawValue: type) else { return }
        apply(kind, payloadBytes: bytes, hlc: hlc, dot: dot)
    }

    /// Applies one event of type `kind` from the canonical JSON bytes of its payload, read in place
    /// (`NotePayload.init(type:jsonBytes:)`); a payload that does not decode changes nothing.
    public mutating func apply(
        _ kind: NoteEventType, payloadBytes bytes: UnsafeRawBufferPointer, hlc: HLCTimestamp, dot: Dot
    ) {
        guard let payload = try? NotePayload(type: kind, jsonBytes: bytes) else { return }
        apply(payload, hlc: hlc, dot: dot)
    }

    /// Applies one event's payload: its operation, or its value to the field's register at the event's
    /// `hlc` (ties broken by `dot`).
    public mutating func apply(_ payload: NotePayload, hlc: HLCTimestamp, dot: Dot) {
        func assignment<V>(_ value: V) -> LWWRegister<V>.Assignment {
            LWWRegister<V>.Assignment(value: value, timestamp: hlc, dot: dot)
        }
        switch payload {
        case .created(let created):
            self.created = true
            title.apply(.init(value: created.title, timestamp: hlc, dot: dot, overwrites: nil))
        case .titleSet(let set):
            title.apply(.init(value: set.title, timestamp: hlc, dot: dot, overwrites: set.overwrites))
        case .bodyEdited(let edit):
            for op in edit.ops { body.apply(op) }
        case .tagAdded(let add):
            tags.apply(add.op)
        case .tagRemoved(let remove):
            tags.apply(remove.op)
        case .pinnedSet(let set):
            pinned.apply(assignment(set.pinned))
        case .viewed(let view):
            views.apply(view.op)
        case .checklistItemAdded(let add):
            checklist.apply(add.op)
            itemText[add.item, default: .init()].apply(assignment(add.text))
        case .checklistItemRemoved(let remove):
            checklist.apply(remove.op)
        case .checklistItemTextSet(let set):
            itemText[set.item, default: .init()].apply(assignment(set.text))
        case .checklistItemDoneSet(let set):
            itemDone[set.item, default: .init()].apply(assignment(set.done))
        case .deleted:
            deleted.apply(assignment(true))
        case .attachmentAdded(let add):
            attachments.apply(add.op)
        case .attachmentRemoved(let remove):
            attachments.apply(remove.op)
        case .snapshot(let snapshot):
            // A snapshot that does not decode (which the server never writes) changes nothing.
            if let state = try? snapshot.state() { merge(state) }
        }
    }

    /// The plain values an app shows.
    public var view: NoteView {
        NoteView(
            title: title.value ?? "", body: body.text, tags: tags.elements.sorted(), pinned: pinned.value ?? false,
            viewCount: views.value,
            checklist: checklistItems, deleted: deleted.value ?? false, titleConflict: titleConflict,
            attachments: attachmentList.isEmpty ? nil : attachmentList)
    }

    /// The attachments, by name.
    public var attachmentList: [NoteAttachment] {
        attachments.elements.compactMap(NoteAttachment.init(element:)).sorted()
    }

    /// The titles of the open conflict, the shown one first; nil when there is none.
    public var titleConflict: [NoteView.ConflictValue]? {
        guard title.hasConflict else { return nil }
        return title.candidates.map {
            NoteView.ConflictValue(value: $0.value, replica: $0.author, hlc: $0.timestamp, dot: $0.dot)
        }
    }

    /// The checklist's items in list order, with their text and done flags.
    public var checklistItems: [NoteView.Item] {
        // Eager: a lazy map would capture (copy) the whole state.
        checklist.elements.map { item in
            NoteView.Item(id: item, text: itemText[item]?.value ?? "", done: itemDone[item]?.value ?? false)
        }
    }
}

/// A note's plain values: what `export --state` prints and apps read.
public struct NoteView: Sendable, Codable, Hashable {
    public struct Item: Sendable, Codable, Hashable {
        public var id: String
        public var text: String
        public var done: Bool

        public init(id: String, text: String, done: Bool) {
            self.id = id
            self.text = text
            self.done = done
        }
    }
    /// One of the concurrent values of an open conflict: the value, its author, when and by which event.
    public struct ConflictValue: Sendable, Codable, Hashable {
        public var value: String
        public var replica: ReplicaID
        public var hlc: HLCTimestamp
        public var dot: Dot

        public init(value: String, replica: ReplicaID, hlc: HLCTimestamp, dot: Dot) {
            self.value = value
            self.replica = replica
            self.hlc = hlc
            self.dot = dot
        }
    }
    public var title: String
    public var body: String
    public var tags: [String]
    public var pinned: Bool
    public var viewCount: Int64
    public var checklist: [Item]
    public var deleted: Bool
    /// The open title conflict, the shown title first (nil, and absent from the JSON, when there is none).
    public var titleConflict: [ConflictValue]?
    /// The attached files by name (nil, and absent from the JSON, when there is none).
    public var attachments: [NoteAttachment]? = nil
}

extension NoteState: BinaryCodable {
    /// The first byte of the binary form. JSON (the form of format 1) starts with `{`, so stored states of
    /// any form can be told apart. Format 4 ends with the attachments; format 3 is the same without them, and
    /// is still what a note without attachments is written as (the bytes of such notes, their snapshots
    /// included, stay those that readers before attachments read). Format 3 holds the title as a
    /// `ReviewRegister`; format 2 held it as an `LWWRegister`, which reads as the register it migrates to
    /// (`ReviewRegister(migrating:)`).
    static let binaryFormat: UInt8 = 4
    static let noAttachmentsFormat: UInt8 = 3
    static let lwwTitleFormat: UInt8 = 2

    /// Every field in declaration order, after the format byte.
    public func encode(to writer: inout BinaryWriter) {
        let withAttachments = attachments != ORSet<String, AddWins>()
        writer.writeByte(withAttachments ? Self.binaryFormat : Self.noAttachmentsFormat)
        created.encode(to: &writer)
        title.encode(to: &writer)
        body.encode(to: &writer)
        tags.encode(to: &writer)
        pinned.encode(to: &writer)
        views.encode(to: &writer)
        checklist.encode(to: &writer)
        itemText.encode(to: &writer)
        itemDone.encode(to: &writer)
        deleted.encode(to: &writer)
        if withAttachments { attachments.encode(to: &writer) }
    }

    public init(from reader: inout BinaryReader) throws {
        let format = try reader.readByte()
        guard format == Self.binaryFormat || format == Self.noAttachmentsFormat || format == Self.lwwTitleFormat else {
            throw SyncCRDTError(code: "encoding.version", message: "not a binary note state")
        }
        self.init()
        created = try Bool(from: &reader)
        if format == Self.lwwTitleFormat {
            title = ReviewRegister(migrating: try LWWRegister<String>(from: &reader))
        } else {
            title = try ReviewRegister(from: &reader)
        }
        body = try FugueText(from: &reader)
        tags = try ORSet(from: &reader)
        pinned = try LWWRegister(from: &reader)
        views = try PNCounter(from: &reader)
        checklist = try FugueList(from: &reader)
        itemText = try [String: LWWRegister<String>](from: &reader)
        itemDone = try [String: LWWRegister<Bool>](from: &reader)
        deleted = try LWWRegister(from: &reader)
        if format == Self.binaryFormat { attachments = try ORSet(from: &reader) }
    }

    /// Decodes a stored state in any form: binary (format 4 or 3, what is written now, or format 2, with a
    /// last-writer-wins title) or JSON (format 1, written before).
    public init(stored bytes: [UInt8]) throws {
        if bytes.first == UInt8(ascii: "{") {
            self = try JSONDecoder().decode(NoteState.self, from: Data(bytes))
        } else {
            try self.init(binaryEncoded: bytes)
        }
    }
}

extension NoteState {
    private enum CodingKeys: String, CodingKey {
        case created, title, body, tags, pinned, views, checklist, itemText, itemDone, deleted
    }

    /// The JSON form (format 1, no longer written but still read): `title` is a `ReviewRegister`, or an
    /// `LWWRegister` as format 1 wrote it, which reads as the register it migrates to.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        created = try container.decode(Bool.self, forKey: .created)
        if let register = try? container.decode(ReviewRegister<String>.self, forKey: .title) {
            title = register
        } else {
            title = ReviewRegister(migrating: try container.decode(LWWRegister<String>.self, forKey: .title))
        }
        body = try container.decode(FugueText.self, forKey: .body)
        tags = try container.decode(ORSet<String, AddWins>.self, forKey: .tags)
        pinned = try container.decode(LWWRegister<Bool>.self, forKey: .pinned)
        views = try container.decode(PNCounter.self, forKey: .views)
        checklist = try container.decode(FugueList<String>.self, forKey: .checklist)
        itemText = try container.decode([String: LWWRegister<String>].self, forKey: .itemText)
        itemDone = try container.decode([String: LWWRegister<Bool>].self, forKey: .itemDone)
        deleted = try container.decode(LWWRegister<Bool>.self, forKey: .deleted)
    }
}
