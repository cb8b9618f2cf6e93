import SyncCRDT
import SyncModels

/// The rules of the Notes domain that any replica can check alone (payload shapes and sizes), and the one
/// rule only the server can check: the per-scope quota of live notes.
public enum NoteRules {
    public static let maxTitleLength = 200
    public static let tagLength = 1...32
    public static let maxChecklistTextLength = 500
    public static let maxBodyOpsPerEvent = 10_000
    /// The default number of live (created, not deleted) notes per scope the server accepts.
    public static let defaultQuota = 1000

    /// Why `event` breaks a rule of the domain, or nil if it is fine (and for types of other domains).
    /// The message is for the user and contains no payload text.
    ///
    /// The CRDT operations a payload carries must decode, and agree with the fields beside them: replicas
    /// apply the operations, so an event whose operation does not decode would be accepted and then change
    /// nothing anywhere, an edit lost without a word.
    public static func violation(type: String, stream: String, payload: JSONValue) -> String? {
        guard type.hasPrefix(NoteEventType.prefix) else { return nil }
        guard let kind = NoteEventType(rawValue: type) else { return "unknown note event type \(type)" }
        guard NoteID(stream) != nil, stream.hasPrefix("note:") else { return "a note's stream is note:<uuid>" }
        guard case .object = payload else { return "a note event's payload is an object" }
        switch kind {
        case .created, .titleSet:
            guard let title = payload["title"]?.stringValue else { return "title is a string" }
            if title.count > maxTitleLength { return "titles are at most \(maxTitleLength) characters" }
        case .bodyEdited:
            guard case .array(let ops)? = payload["ops"] else { return "ops is an array" }
            if ops.count > maxBodyOpsPerEvent { return "at most \(maxBodyOpsPerEvent) body operations per event" }
            if ops.contains(where: { FugueText.Operation.decode(json: $0) == nil }) {
                return "ops are text operations"
            }
        case .tagAdded, .tagRemoved:
            guard let tag = payload["tag"]?.stringValue else { return "tag is a string" }
            if !tagLength.contains(tag.count) { return "tag names are 1-32 characters" }
            if kind == .tagRemoved, case .array? = payload["observed"] {
            } else if kind == .tagRemoved {
                return "observed is an array of dots"
            }
            guard let op = payload["op"].flatMap(ORSet<String, AddWins>.Operation.decode(json:)),
                op.element == tag, op.isAdd == (kind == .tagAdded)
            else { return kind == .tagAdded ? "op adds the tag" : "op removes the tag" }
        case .pinnedSet:
            if payload["pinned"]?.boolValue == nil { return "pinned is a boolean" }
        case .viewed:
            guard let count = payload["count"]?.intValue, count >= 1, count <= 1_000_000 else {
                return "count is an integer from 1 to 1000000"
            }
            // The operation carries the replica's running totals: at least this event's views, no subtraction.
            guard let op = payload["op"].flatMap(PNCounter.Operation.decode(json:)),
                op.increments >= UInt64(count), op.decrements == 0
            else { return "op adds the views" }
        case .checklistItemAdded, .checklistItemTextSet:
            guard payload["item"]?.stringValue.flatMap(NoteID.init) != nil else { return "item is an id" }
            guard let text = payload["text"]?.stringValue else { return "text is a string" }
            if text.count > maxChecklistTextLength {
                return "checklist items are at most \(maxChecklistTextLength) characters"
            }
            if kind == .checklistItemAdded, payload["op"].flatMap(FugueList<String>.Operation.decode(json:)) == nil {
                return "op is a checklist operation"
            }
        case .checklistItemRemoved:
            guard payload["item"]?.stringValue.flatMap(NoteID.init) != nil else { return "item is an id" }
            if payload["op"].flatMap(FugueList<String>.Operation.decode(json:)) == nil {
                return "op is a checklist operation"
            }
        case .checklistItemDoneSet:
            guard payload["item"]?.stringValue.flatMap(NoteID.init) != nil else { return "item is an id" }
            if payload["done"]?.boolValue == nil { return "done is a boolean" }
        case .deleted:
            break
        }
        return nil
    }

    /// How an accepted event changes its scope's count of live notes: +1 for `note.created`, -1 for
    /// `note.deleted`, 0 otherwise. The server applies it once per event id (a retried push is a
    /// duplicate, which counts nothing) and rejects a `note.created` that would pass the quota with
    /// `validation.failed` and `quotaMessage`.
    public static func liveNoteDelta(type: String) -> Int {
        switch type {
        case NoteEventType.created.rawValue: 1
        case NoteEventType.deleted.rawValue: -1
        default: 0
        }
    }

    public static func quotaMessage(quota: Int) -> String {
        "this space already has its \(quota) notes: delete one to create another"
    }
}
