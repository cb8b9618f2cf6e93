import Foundation
import SyncModels

/// The event types of the Tasks domain. Every payload carries a SyncCRDT operation (or nothing, for
/// `task.deleted`), so replicas converge whatever order the events arrive in, and the server can treat every
/// type as commutative: no device ever meets a `conflict.version` for editing a task someone else edited.
///
/// | type | payload (`TaskPayload.…`) | what it changes (CRDT) |
/// |---|---|---|
/// | `task.created` | `Created {op}` | the task exists; its first title (multi-value register) |
/// | `task.titled` | `Titled {op}` | the title (multi-value register: concurrent titles are all kept) |
/// | `task.completed` | `Completed {op}` | done (completion flag: an add of its completion set) |
/// | `task.reopened` | `Reopened {op}` | done (removes the completions the reopen saw) |
/// | `task.tagged` | `Tagged {tag, op}` | tags (add-wins OR-set) |
/// | `task.untagged` | `Untagged {tag, op}` | tags (removes the adds it saw) |
/// | `task.subtask.added` | `SubtaskAdded {subtask, title, op}` | subtasks (FugueMax sequence of subtask ids) |
/// | `task.subtask.removed` | `SubtaskRemoved {subtask, op}` | subtasks |
/// | `task.fileAttached` | `FileAttached {file, op}` | files (add-wins OR-set of `TaskFile` elements) |
/// | `task.fileDetached` | `FileDetached {file, op}` | files (removes the adds it saw) |
/// | `task.deleted` | `Deleted {}` | deleted (once deleted, always deleted) |
public enum TaskEventType: String, Sendable, Hashable, CaseIterable, Codable {
    case created = "task.created"
    case titled = "task.titled"
    case completed = "task.completed"
    case reopened = "task.reopened"
    case tagged = "task.tagged"
    case untagged = "task.untagged"
    case subtaskAdded = "task.subtask.added"
    case subtaskRemoved = "task.subtask.removed"
    case fileAttached = "task.fileAttached"
    case fileDetached = "task.fileDetached"
    case deleted = "task.deleted"

    /// The prefix of every type of this domain: the server marks these commutative, and its rule reads
    /// only these.
    public static let prefix = "task."
}

/// A task's id. Each task is one stream, `task:<id>`, so the server orders and versions each task on its
/// own, and a rollback or replay touches one task at a time.
public struct TaskID: Hashable, Sendable, Comparable, LosslessStringConvertible, Codable {
    public let uuid: UUID

    public init(uuid: UUID = UUID()) { self.uuid = uuid }

    /// The prefix of every task's stream name.
    public static let streamPrefix = "task:"

    /// Parses a task id or its stream name (`task:<uuid>`), the UUID in either case.
    public init?(_ text: String) {
        let raw = text.hasPrefix(Self.streamPrefix) ? String(text.dropFirst(Self.streamPrefix.count)) : text
        guard raw.utf8.count == 36, let uuid = UUID(uuidString: raw) else { return nil }
        self.uuid = uuid
    }

    /// The stream this task's events are appended to.
    public var stream: String { Self.streamPrefix + description }
    /// The lowercase UUID: the form stored in rows and shown to people.
    public var description: String { uuid.uuidString.lowercased() }

    public static func < (lhs: TaskID, rhs: TaskID) -> Bool { lhs.description < rhs.description }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        guard let id = TaskID(try container.decode(String.self)) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a task id")
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
