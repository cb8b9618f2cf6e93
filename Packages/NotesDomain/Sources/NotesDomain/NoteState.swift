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
        func assignment<V>(_ value: V) -> LWWRegister<V>.Assignment {
            LWWRegister<V>.Assignment(value: value, timestamp: hlc, dot: dot)
        }
        switch kind {
        case .created:
            created = true
            if let value = payload["title"]?.stringValue { title.apply(assignment(value)) }
        case .titleSet:
            if let value = payload["title"]?.stringValue { title.apply(assignment(value)) }
        case .bodyEdited:
            if let ops = payload["ops"].flatMap(NotePayload.decode([FugueText.Operation].self)) {
                for op in ops { body.apply(op) }
            }
        case .tagAdded, .tagRemoved:
            if let op = payload["op"].flatMap(NotePayload.decode(ORSet<String, AddWins>.Operation.self)) {
                tags.apply(op)
            }
        case .pinnedSet:
            if let value = payload["pinned"]?.boolValue { pinned.apply(assignment(value)) }
        case .viewed:
            if let op = payload["op"].flatMap(NotePayload.decode(PNCounter.Operation.self)) { views.apply(op) }
        case .checklistItemAdded:
            guard let item = payload["item"]?.stringValue else { return }
            if let op = payload["op"].flatMap(NotePayload.decode(FugueList<String>.Operation.self)) {
                checklist.apply(op)
            }
            if let text = payload["text"]?.stringValue { itemText[item, default: .init()].apply(assignment(text)) }
        case .checklistItemRemoved:
            if let op = payload["op"].flatMap(NotePayload.decode(FugueList<String>.Operation.self)) {
                checklist.apply(op)
            }
        case .checklistItemTextSet:
            guard let item = payload["item"]?.stringValue, let text = payload["text"]?.stringValue else { return }
            itemText[item, default: .init()].apply(assignment(text))
        case .checklistItemDoneSet:
            guard let item = payload["item"]?.stringValue, let done = payload["done"]?.boolValue else { return }
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
            checklist: checklist.elements.map { item in
                NoteView.Item(id: item, text: itemText[item]?.value ?? "", done: itemDone[item]?.value ?? false)
            },
            deleted: deleted.value ?? false)
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
