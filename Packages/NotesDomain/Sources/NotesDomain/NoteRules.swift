import SyncCRDT
import SyncModels

/// The rules of the Notes domain that any replica can check alone (payload shapes and sizes), and the one
/// rule only the server can check: the per-scope quota of live notes.
public enum NoteRules {
    public static let maxTitleLength = 200
    /// The titles one `note.titleSet` may overwrite: the open conflict a writer saw is a handful of
    /// concurrent titles, never more than one per device.
    public static let maxTitleOverwrites = 1000
    public static let tagLength = 1...32
    public static let maxChecklistTextLength = 500
    public static let maxBodyOpsPerEvent = 10_000
    /// The views one `note.viewed` event may count.
    public static let viewsPerEvent = 1...1_000_000
    /// The default number of live (created, not deleted) notes per scope the server accepts.
    public static let defaultQuota = 1000

    /// Why `event` breaks a rule of the domain, or nil if it is fine (and for types of other domains).
    /// The message is for the user and contains no payload text.
    ///
    /// The payload must decode as its type's `NotePayload`: the CRDT operations it carries included, and
    /// they must agree with the fields beside them. Replicas apply the operations, so an event whose
    /// operation does not decode would be accepted and then change nothing anywhere, an edit lost without a
    /// word. A payload's fields are checked in their order (`NoteEventPayload.keys`): the message names the
    /// first field that is malformed or breaks its rule.
    public static func violation(type: String, stream: String, payload: JSONValue) -> String? {
        guard type.hasPrefix(NoteEventType.prefix) else { return nil }
        guard let kind = NoteEventType(rawValue: type) else { return "unknown note event type \(type)" }
        guard NoteID(stream) != nil, stream.hasPrefix("note:") else { return "a note's stream is note:<uuid>" }
        guard case .object(let members) = payload else { return "a note event's payload is an object" }
        do {
            return violation(try NotePayload(type: kind, json: payload))
        } catch {
            return violation(malformed: error, members)
        }
    }

    /// Why a decoded payload breaks a rule, or nil: each field's own rule in the payload's order, then
    /// whether its operation agrees with the fields beside it.
    public static func violation(_ payload: NotePayload) -> String? {
        switch payload {
        case .created(let created): titleViolation(created.title)
        case .titleSet(let set): titleViolation(set.title) ?? set.overwrites.flatMap(overwritesViolation)
        case .bodyEdited(let edit): opsViolation(count: edit.ops.count)
        case .tagAdded(let add):
            tagViolation(add.tag) ?? (add.op.element == add.tag && add.op.isAdd ? nil : opMessage(.tagAdded))
        case .tagRemoved(let remove):
            tagViolation(remove.tag)
                ?? (remove.op.element == remove.tag && !remove.op.isAdd ? nil : opMessage(.tagRemoved))
        case .attachmentAdded(let add):
            attachmentViolation(add.attachment)
                ?? (add.op.element == add.attachment && add.op.isAdd ? nil : opMessage(.attachmentAdded))
        case .attachmentRemoved(let remove):
            attachmentViolation(remove.attachment)
                ?? (remove.op.element == remove.attachment && !remove.op.isAdd ? nil : opMessage(.attachmentRemoved))
        case .pinnedSet, .deleted: nil
        case .viewed(let view):
            // The operation carries the replica's running totals: at least this event's views, no subtraction.
            countViolation(view.count)
                ?? (view.op.increments >= UInt64(view.count) && view.op.decrements == 0 ? nil : opMessage(.viewed))
        case .checklistItemAdded(let add): itemViolation(add.item) ?? textViolation(add.text)
        case .checklistItemRemoved(let remove): itemViolation(remove.item)
        case .checklistItemTextSet(let set): itemViolation(set.item) ?? textViolation(set.text)
        case .checklistItemDoneSet(let set): itemViolation(set.item)
        case .snapshot: snapshotMessage
        }
    }

    /// A payload that does not decode. The fields before the malformed one decoded: their own rules come
    /// first, as they would for a payload that decodes; then the malformed field's message.
    private static func violation(malformed error: NotePayloadError, _ members: [String: JSONValue]) -> String {
        guard let field = error.field else { return "a note event's payload is an object" }
        for key in error.type.payloadType.keys.prefix(while: { $0 != field }) {
            if let value = members[key.stringValue], let message = fieldViolation(key, value) { return message }
        }
        switch field {
        case .title: return "title is a string"
        case .ops:
            guard case .array(let ops)? = members[field.stringValue] else { return "ops is an array" }
            return opsViolation(count: ops.count) ?? "ops are text operations"
        case .tag: return "tag is a string"
        case .observed: return "observed is an array of dots"
        case .count: return countMessage
        case .op: return opMessage(error.type)
        case .pinned: return "pinned is a boolean"
        case .item: return "item is an id"
        case .text: return "text is a string"
        case .done: return "done is a boolean"
        case .state: return snapshotMessage
        case .overwrites: return overwritesMessage
        case .attachment: return attachmentMessage
        }
    }

    /// The rule of a field that decoded in a payload that did not, from its JSON value.
    private static func fieldViolation(_ key: NotePayloadKey, _ value: JSONValue) -> String? {
        switch key {
        case .title: value.stringValue.flatMap(titleViolation)
        case .tag: value.stringValue.flatMap(tagViolation)
        case .count: value.intValue.flatMap { Int(exactly: $0) }.flatMap(countViolation)
        case .item: value.stringValue.flatMap(itemViolation)
        case .text: value.stringValue.flatMap(textViolation)
        case .attachment: value.stringValue.flatMap(attachmentViolation)
        case .ops, .observed, .op, .pinned, .done, .state, .overwrites: nil
        }
    }

    /// Snapshots fold history on the server; a device that sends one would overwrite what it cannot know.
    static let snapshotMessage = "note.snapshot events are written only by the server's compaction"

    private static func titleViolation(_ title: String) -> String? {
        title.count > maxTitleLength ? "titles are at most \(maxTitleLength) characters" : nil
    }

    static let overwritesMessage =
        "overwrites is an array of at most \(maxTitleOverwrites) distinct dots (the titles the writer saw)"

    /// The dots a title assignment overwrites: distinct, at most `maxTitleOverwrites`, each a dot an event
    /// can have (counters start at 1).
    private static func overwritesViolation(_ dots: [Dot]) -> String? {
        dots.count <= maxTitleOverwrites && Set(dots).count == dots.count && dots.allSatisfy({ $0.counter > 0 })
            ? nil : overwritesMessage
    }

    private static func opsViolation(count: Int) -> String? {
        count > maxBodyOpsPerEvent ? "at most \(maxBodyOpsPerEvent) body operations per event" : nil
    }

    private static func tagViolation(_ tag: String) -> String? {
        tagLength.contains(tag.count) ? nil : "tag names are \(tagLength.lowerBound)-\(tagLength.upperBound) characters"
    }

    private static let countMessage =
        "count is an integer from \(viewsPerEvent.lowerBound) to \(viewsPerEvent.upperBound)"

    private static func countViolation(_ count: Int) -> String? {
        viewsPerEvent.contains(count) ? nil : countMessage
    }

    private static func itemViolation(_ item: String) -> String? {
        NoteID(item) == nil ? "item is an id" : nil
    }

    static let attachmentMessage =
        "attachment is \"<sha-256 hex> <size> <media type> <name>\", the name 1-\(NoteAttachment.nameLength.upperBound) characters"

    private static func attachmentViolation(_ attachment: String) -> String? {
        NoteAttachment(element: attachment) == nil ? attachmentMessage : nil
    }

    private static func textViolation(_ text: String) -> String? {
        text.count > maxChecklistTextLength ? "checklist items are at most \(maxChecklistTextLength) characters" : nil
    }

    /// What the `op` of a payload of `type` must be.
    private static func opMessage(_ type: NoteEventType) -> String {
        switch type {
        case .tagAdded: "op adds the tag"
        case .tagRemoved: "op removes the tag"
        case .viewed: "op adds the views"
        case .attachmentAdded: "op adds the attachment"
        case .attachmentRemoved: "op removes the attachment"
        default: "op is a checklist operation"
        }
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
