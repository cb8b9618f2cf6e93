import Foundation
import SyncCRDT
import SyncModels

/// One note as a CRDT: a composition of one CRDT per field (docs/ARCHITECTURE.md, "Conflicts and rejections"). Applying
/// the note's events in any order, any number of times, gives the same state.
///
/// - title, pinned, deleted, and each checklist item's text and done flag: LWW registers ordered by the
///   events' HLCs (ties by replica);
/// - tags: add-wins OR-Set (an add concurrent with a remove survives);
/// - view count: PN-counter;
/// - body: text sequence (FugueMax, so concurrent typing at one place never interleaves);
/// - checklist: sequence of item ids (FugueMax).
public struct NoteState: Sendable, Codable, Equatable {
    public static let version = 1

    public var created = false
    public var title = LWWRegister<String>()
    public var body = FugueText()
    public var tags = ORSet<String, AddWins>()
    public var pinned = LWWRegister<Bool>()
    public var views = PNCounter()
    public var checklist = FugueList<String>()
    public var itemText: [String: LWWRegister<String>] = [:]
    public var itemDone: [String: LWWRegister<Bool>] = [:]
    public var deleted = LWWRegister<Bool>()

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

    /// Applies one event's payload: its operation, or its value to the field's LWW register at the event's
    /// `hlc` (ties broken by `dot`).
    public mutating func apply(_ payload: NotePayload, hlc: HLCTimestamp, dot: Dot) {
        func assignment<V>(_ value: V) -> LWWRegister<V>.Assignment {
            LWWRegister<V>.Assignment(value: value, timestamp: hlc, dot: dot)
        }
        switch payload {
        case .created(let created):
            self.created = true
            title.apply(assignment(created.title))
        case .titleSet(let set):
            title.apply(assignment(set.title))
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
            checklist: checklistItems, deleted: deleted.value ?? false)
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
    public var title: String
    public var body: String
    public var tags: [String]
    public var pinned: Bool
    public var viewCount: Int64
    public var checklist: [Item]
    public var deleted: Bool
}

extension NoteState: BinaryCodable {
    /// The first byte of the binary form. JSON (the form of format 1) starts with `{`, so stored states of
    /// either form can be told apart.
    static let binaryFormat: UInt8 = 2

    /// Every field in declaration order, after the format byte.
    public func encode(to writer: inout BinaryWriter) {
        writer.writeByte(Self.binaryFormat)
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
    }

    public init(from reader: inout BinaryReader) throws {
        guard try reader.readByte() == Self.binaryFormat else {
            throw SyncCRDTError(code: "encoding.version", message: "not a binary note state")
        }
        self.init()
        created = try Bool(from: &reader)
        title = try LWWRegister(from: &reader)
        body = try FugueText(from: &reader)
        tags = try ORSet(from: &reader)
        pinned = try LWWRegister(from: &reader)
        views = try PNCounter(from: &reader)
        checklist = try FugueList(from: &reader)
        itemText = try [String: LWWRegister<String>](from: &reader)
        itemDone = try [String: LWWRegister<Bool>](from: &reader)
        deleted = try LWWRegister(from: &reader)
    }

    /// Decodes a stored state in either form: binary (what is written now) or JSON (written before).
    public init(stored bytes: [UInt8]) throws {
        if bytes.first == UInt8(ascii: "{") {
            self = try JSONDecoder().decode(NoteState.self, from: Data(bytes))
        } else {
            try self.init(binaryEncoded: bytes)
        }
    }
}
