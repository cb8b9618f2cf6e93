import SyncModels

/// A note event's payload, typed: one case per `NoteEventType`, holding that type's `NoteEventPayload`.
///
/// Clients build events from these (`type` and `json` are what an event carries); `NoteRules` decodes an
/// event's JSON into one (`init(type:json:)`) to check it; `NoteState` applies them, and a replay decodes
/// them from the log's bytes in place (`init(type:jsonBytes:)`):
///
/// ```swift
/// let payload = NotePayload.tagAdded(.init(tag: "food", op: state.tags.add("food", replica: replica)))
/// let draft = EventDraft(scope: scope, stream: id.stream, type: payload.type.rawValue, payload: payload.json)
/// let decoded = try NotePayload(type: .tagAdded, json: draft.payload)  // == payload
/// ```
public enum NotePayload: Sendable, Hashable {
    case created(Created)
    case titleSet(TitleSet)
    case bodyEdited(BodyEdited)
    case tagAdded(TagAdded)
    case tagRemoved(TagRemoved)
    case pinnedSet(PinnedSet)
    case viewed(Viewed)
    case checklistItemAdded(ChecklistItemAdded)
    case checklistItemRemoved(ChecklistItemRemoved)
    case checklistItemTextSet(ChecklistItemTextSet)
    case checklistItemDoneSet(ChecklistItemDoneSet)
    case deleted(Deleted)
    case snapshot(Snapshot)
    case attachmentAdded(AttachmentAdded)
    case attachmentRemoved(AttachmentRemoved)

    /// The payload of the case.
    public var payload: any NoteEventPayload {
        switch self {
        case .created(let payload): payload
        case .titleSet(let payload): payload
        case .bodyEdited(let payload): payload
        case .tagAdded(let payload): payload
        case .tagRemoved(let payload): payload
        case .pinnedSet(let payload): payload
        case .viewed(let payload): payload
        case .checklistItemAdded(let payload): payload
        case .checklistItemRemoved(let payload): payload
        case .checklistItemTextSet(let payload): payload
        case .checklistItemDoneSet(let payload): payload
        case .deleted(let payload): payload
        case .snapshot(let payload): payload
        case .attachmentAdded(let payload): payload
        case .attachmentRemoved(let payload): payload
        }
    }

    /// The event type that carries this payload.
    public var type: NoteEventType { Swift.type(of: payload).type }

    /// The payload's canonical JSON (sorted keys), as an event carries it.
    public var json: JSONValue { payload.json }

    /// Decodes the payload of an event of `type` from its JSON value (through its canonical bytes).
    /// - Throws: `NotePayloadError` naming the first field, in the type's `keys` order, that is missing or
    ///   malformed.
    public init(type: NoteEventType, json: JSONValue) throws(NotePayloadError) {
        let decoded = json.canonicalData().withUnsafeBytes { bytes in
            Result { () throws(NotePayloadError) in try NotePayload(type: type, jsonBytes: bytes) }
        }
        self = try decoded.get()
    }

    /// Decodes the payload of an event of `type` from JSON bytes, read in place (a log row's column);
    /// `JSONDecoder` decodes what the reader is not sure of, with the same result.
    /// - Throws: `NotePayloadError` naming the first field, in the type's `keys` order, that is missing or
    ///   malformed.
    public init(type: NoteEventType, jsonBytes bytes: UnsafeRawBufferPointer) throws(NotePayloadError) {
        switch type {
        case .created: self = .created(try Created(jsonBytes: bytes))
        case .titleSet: self = .titleSet(try TitleSet(jsonBytes: bytes))
        case .bodyEdited: self = .bodyEdited(try BodyEdited(jsonBytes: bytes))
        case .tagAdded: self = .tagAdded(try TagAdded(jsonBytes: bytes))
        case .tagRemoved: self = .tagRemoved(try TagRemoved(jsonBytes: bytes))
        case .pinnedSet: self = .pinnedSet(try PinnedSet(jsonBytes: bytes))
        case .viewed: self = .viewed(try Viewed(jsonBytes: bytes))
        case .checklistItemAdded: self = .checklistItemAdded(try ChecklistItemAdded(jsonBytes: bytes))
        case .checklistItemRemoved: self = .checklistItemRemoved(try ChecklistItemRemoved(jsonBytes: bytes))
        case .checklistItemTextSet: self = .checklistItemTextSet(try ChecklistItemTextSet(jsonBytes: bytes))
        case .checklistItemDoneSet: self = .checklistItemDoneSet(try ChecklistItemDoneSet(jsonBytes: bytes))
        case .deleted: self = .deleted(try Deleted(jsonBytes: bytes))
        case .snapshot: self = .snapshot(try Snapshot(jsonBytes: bytes))
        case .attachmentAdded: self = .attachmentAdded(try AttachmentAdded(jsonBytes: bytes))
        case .attachmentRemoved: self = .attachmentRemoved(try AttachmentRemoved(jsonBytes: bytes))
        }
    }
}

extension NoteEventType {
    /// The type of this event type's payload.
    public var payloadType: any NoteEventPayload.Type {
        switch self {
        case .created: NotePayload.Created.self
        case .titleSet: NotePayload.TitleSet.self
        case .bodyEdited: NotePayload.BodyEdited.self
        case .tagAdded: NotePayload.TagAdded.self
        case .tagRemoved: NotePayload.TagRemoved.self
        case .pinnedSet: NotePayload.PinnedSet.self
        case .viewed: NotePayload.Viewed.self
        case .checklistItemAdded: NotePayload.ChecklistItemAdded.self
        case .checklistItemRemoved: NotePayload.ChecklistItemRemoved.self
        case .checklistItemTextSet: NotePayload.ChecklistItemTextSet.self
        case .checklistItemDoneSet: NotePayload.ChecklistItemDoneSet.self
        case .deleted: NotePayload.Deleted.self
        case .snapshot: NotePayload.Snapshot.self
        case .attachmentAdded: NotePayload.AttachmentAdded.self
        case .attachmentRemoved: NotePayload.AttachmentRemoved.self
        }
    }
}
