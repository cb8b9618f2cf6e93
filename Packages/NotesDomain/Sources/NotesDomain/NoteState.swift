import Foundation
import SyncCRDT
import SyncModels

/// One note as a CRDT: a composition of one CRDT per field (DESIGN §1). Applying the note's events in any
/// order, any number of times, gives the same state.
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
        guard let kind = NoteEventType(rawValue: type) else { return }
        apply(kind, Fields(kind, payload), hlc: hlc, dot: dot)
    }

    /// Applies one event from the canonical JSON bytes of its payload (as the log stores it), read in place
    /// without building a `JSONValue`; the same result as `apply(type:payload:hlc:dot:)` on the parsed bytes.
    public mutating func apply(type: String, payloadBytes bytes: UnsafeRawBufferPointer, hlc: HLCTimestamp, dot: Dot) {
        guard let kind = NoteEventType(rawValue: type) else { return }
        apply(kind, payloadBytes: bytes, hlc: hlc, dot: dot)
    }

    /// Applies one event of type `kind` from the canonical JSON bytes of its payload, read in place.
    public mutating func apply(
        _ kind: NoteEventType, payloadBytes bytes: UnsafeRawBufferPointer, hlc: HLCTimestamp, dot: Dot
    ) {
        if let fields = Fields(kind, bytes) {
            apply(kind, fields, hlc: hlc, dot: dot)
        } else if let payload = try? JSONValue(parsing: bytes) {
            apply(kind, Fields(kind, payload), hlc: hlc, dot: dot)
        }
    }

    /// The payload fields an event type uses, each nil when absent or of another shape.
    struct Fields {
        var title: String?
        var item: String?
        var text: String?
        var pinned: Bool?
        var done: Bool?
        var body: [FugueText.Operation]?
        var tag: ORSet<String, AddWins>.Operation?
        var view: PNCounter.Operation?
        var list: FugueList<String>.Operation?

        init() {}

        /// From a parsed payload.
        init(_ kind: NoteEventType, _ payload: JSONValue) {
            title = payload["title"]?.stringValue
            item = payload["item"]?.stringValue
            text = payload["text"]?.stringValue
            pinned = payload["pinned"]?.boolValue
            done = payload["done"]?.boolValue
            guard case .object = payload else { return }
            if let ops = payload["ops"], kind == .bodyEdited { body = .decode(json: ops) }
            guard let op = payload["op"] else { return }
            switch kind {
            case .tagAdded, .tagRemoved: tag = .decode(json: op)
            case .viewed: view = .decode(json: op)
            case .checklistItemAdded, .checklistItemRemoved: list = .decode(json: op)
            default: break
            }
        }

        static let keys = ["title", "item", "text", "pinned", "done", "ops", "op"]

        /// Straight from JSON bytes; nil when the reader is not sure of them (the caller parses them then).
        init?(_ kind: NoteEventType, _ bytes: UnsafeRawBufferPointer) {
            var fields = Fields()
            var reader = JSONReader(bytes)
            var seen: UInt8 = 0
            do throws(JSONReader.Bail) {
                try reader.readObject { reader, key throws(JSONReader.Bail) in
                    // A known key twice: the parsed path decides what that means.
                    if let bit = Self.keys.firstIndex(of: key) {
                        guard seen & 1 << bit == 0 else { throw JSONReader.Bail() }
                        seen |= 1 << bit
                    }
                    switch key {
                    case "title": fields.title = try reader.readStringIfString()
                    case "item": fields.item = try reader.readStringIfString()
                    case "text": fields.text = try reader.readStringIfString()
                    case "pinned": fields.pinned = try reader.readBoolIfBool()
                    case "done": fields.done = try reader.readBoolIfBool()
                    // Operations are read in place; one the reader is unsure of bails the whole payload to the
                    // parsed path, which decodes each operation on its own, as here.
                    case "ops" where kind == .bodyEdited: fields.body = try [FugueText.Operation](reading: &reader)
                    case "op":
                        switch kind {
                        case .tagAdded, .tagRemoved: fields.tag = try ORSet<String, AddWins>.Operation(reading: &reader)
                        case .viewed: fields.view = try PNCounter.Operation(reading: &reader)
                        case .checklistItemAdded, .checklistItemRemoved:
                            fields.list = try FugueList<String>.Operation(reading: &reader)
                        default: try reader.skipValue()
                        }
                    default: try reader.skipValue()
                    }
                }
                guard reader.atEnd() else { return nil }
            } catch {
                return nil
            }
            self = fields
        }
    }

    private mutating func apply(_ kind: NoteEventType, _ fields: Fields, hlc: HLCTimestamp, dot: Dot) {
        func assignment<V>(_ value: V) -> LWWRegister<V>.Assignment {
            LWWRegister<V>.Assignment(value: value, timestamp: hlc, dot: dot)
        }
        switch kind {
        case .created:
            created = true
            if let value = fields.title { title.apply(assignment(value)) }
        case .titleSet:
            if let value = fields.title { title.apply(assignment(value)) }
        case .bodyEdited:
            for op in fields.body ?? [] { body.apply(op) }
        case .tagAdded, .tagRemoved:
            if let op = fields.tag { tags.apply(op) }
        case .pinnedSet:
            if let value = fields.pinned { pinned.apply(assignment(value)) }
        case .viewed:
            if let op = fields.view { views.apply(op) }
        case .checklistItemAdded:
            guard let item = fields.item else { return }
            if let op = fields.list { checklist.apply(op) }
            if let text = fields.text { itemText[item, default: .init()].apply(assignment(text)) }
        case .checklistItemRemoved:
            if let op = fields.list { checklist.apply(op) }
        case .checklistItemTextSet:
            guard let item = fields.item, let text = fields.text else { return }
            itemText[item, default: .init()].apply(assignment(text))
        case .checklistItemDoneSet:
            guard let item = fields.item, let done = fields.done else { return }
            itemDone[item, default: .init()].apply(assignment(done))
        case .deleted:
            deleted.apply(assignment(true))
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
