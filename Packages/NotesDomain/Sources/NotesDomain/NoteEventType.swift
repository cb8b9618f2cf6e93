import Foundation
import SyncModels

/// The event types of the reference Notes domain. Every payload is a CRDT operation, so replicas converge
/// whatever order events arrive in. Each type's payload is a `NoteEventPayload` (`payloadType`), a case of
/// `NotePayload`: its `op` and `ops` fields are SyncCRDT operations, in their JSON form on the wire;
/// `NoteRules` checks that they decode and agree with the fields beside them:
///
/// | type | payload (`NotePayload.…`) | field it changes (CRDT) |
/// |---|---|---|
/// | `note.created` | `Created {title}` | the note exists; title (a legacy, last-writer-wins assignment) |
/// | `note.titleSet` | `TitleSet {title, overwrites?: [dot]}` | title (`ReviewRegister`: replaces the titles it saw, keeps concurrent ones; without `overwrites`, last-writer-wins) |
/// | `note.bodyEdited` | `BodyEdited {ops: [...]}` | body (text sequence, FugueMax) |
/// | `note.tagAdded` | `TagAdded {tag, op}` | tags (add-wins OR-Set; `op` adds the tag) |
/// | `note.tagRemoved` | `TagRemoved {tag, observed: [dot], op}` | tags (`op` removes the adds it observed) |
/// | `note.pinnedSet` | `PinnedSet {pinned}` | pinned (LWW) |
/// | `note.viewed` | `Viewed {count, op}` | view count (PN-counter; `op` adds the views) |
/// | `note.checklistItemAdded` | `ChecklistItemAdded {item, text, op}` | checklist (sequence of item ids) |
/// | `note.checklistItemRemoved` | `ChecklistItemRemoved {item, op}` | checklist |
/// | `note.checklistItemTextSet` | `ChecklistItemTextSet {item, text}` | the item's text (LWW) |
/// | `note.checklistItemDoneSet` | `ChecklistItemDoneSet {item, done}` | the item's done flag (LWW) |
/// | `note.deleted` | `Deleted {}` | deleted (LWW) |
/// | `note.snapshot` | `Snapshot {state}` | every field: the state is merged (written only by compaction) |
public enum NoteEventType: String, Sendable, Hashable, CaseIterable, Codable {
    case created = "note.created"
    case titleSet = "note.titleSet"
    case bodyEdited = "note.bodyEdited"
    case tagAdded = "note.tagAdded"
    case tagRemoved = "note.tagRemoved"
    case pinnedSet = "note.pinnedSet"
    case viewed = "note.viewed"
    case checklistItemAdded = "note.checklistItemAdded"
    case checklistItemRemoved = "note.checklistItemRemoved"
    case checklistItemTextSet = "note.checklistItemTextSet"
    case checklistItemDoneSet = "note.checklistItemDoneSet"
    case deleted = "note.deleted"
    case snapshot = "note.snapshot"
    case attachmentAdded = "note.attachmentAdded"
    case attachmentRemoved = "note.attachmentRemoved"

    /// The prefix of every type of this domain; other types are not this domain's business.
    public static let prefix = "note."

    /// The UTF-8 of every raw value, in `allCases` order.
    private static let utf8Names: [(NoteEventType, [UInt8])] = allCases.map { ($0, Array($0.rawValue.utf8)) }

    /// The type whose raw value is these UTF-8 bytes exactly (a replay reads them from SQLite in place);
    /// nil for any other type, as `init(rawValue:)`.
    public init?(utf8 bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 5, bytes[4] == UInt8(ascii: ".") else { return nil }
        for (kind, name) in Self.utf8Names where name.count == bytes.count {
            if name.withUnsafeBytes({ memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }) {
                self = kind
                return
            }
        }
        return nil
    }
}

/// A note's id; its stream is `note:<id>`.
public struct NoteID: Hashable, Sendable, Comparable, LosslessStringConvertible, Codable {
    public let uuid: UUID

    public init(uuid: UUID = UUID()) { self.uuid = uuid }

    /// Parses a note id or its stream name (`note:<uuid>`).
    public init?(_ text: String) {
        var text = text
        guard let id = text.withUTF8({ NoteID(utf8: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = id
    }

    /// Parses a note id or its stream name (`note:<uuid>`, the UUID in either case) from UTF-8 bytes.
    public init?(utf8 bytes: UnsafeRawBufferPointer) {
        var raw = bytes
        if bytes.count == 41, bytes[0] == UInt8(ascii: "n"), bytes[1] == UInt8(ascii: "o"),
            bytes[2] == UInt8(ascii: "t"), bytes[3] == UInt8(ascii: "e"), bytes[4] == UInt8(ascii: ":")
        {
            raw = UnsafeRawBufferPointer(rebasing: bytes[5...])
        }
        // EventID's parser takes any UUID, without Foundation's sscanf (hot in the server's push path).
        guard let parsed = try? EventID(utf8: raw) else { return nil }
        self.uuid = parsed.uuid
    }

    public var stream: String { "note:\(description)" }
    /// The lowercase UUID, written by hand (`uuidString.lowercased()` allocates twice; every note a replay
    /// meets takes one).
    public var description: String { EventID(uuid: uuid).description }
    /// The order of the ids' strings (`description`), compared without making them.
    public static func < (lhs: NoteID, rhs: NoteID) -> Bool { EventID(uuid: lhs.uuid) < EventID(uuid: rhs.uuid) }
}
