import Foundation
import SyncCRDT
import SyncModels

/// The payload of one task event type: typed fields, the CRDT operation among them, and its JSON form
/// through `Codable`. Clients build events from these, the projection and the server's rule read events
/// back into them, so what a client writes and what a replica reads cannot drift apart.
public protocol TaskEventPayload: Codable, Hashable, Sendable {
    /// The event type that carries this payload.
    static var type: TaskEventType { get }
}

extension TaskEventPayload {
    /// The payload as an event carries it: canonical JSON (sorted keys), so equal payloads are equal bytes.
    public var json: JSONValue {
        // Encoding these value types cannot fail, and what CanonicalJSON writes parses.
        try! JSONValue(parsing: try! CanonicalJSON.encode(self))
    }

    /// Decodes the payload from an event's JSON value.
    /// - Throws: `TaskPayloadError` when the JSON is not a payload of this type.
    public init(json: JSONValue) throws(TaskPayloadError) {
        do {
            self = try JSONDecoder().decode(Self.self, from: json.canonicalData())
        } catch {
            throw TaskPayloadError(type: Self.type)
        }
    }
}

/// A task event's payload, typed: one case per `TaskEventType`.
///
/// ```swift
/// let payload = TaskPayload.tagged(.init(tag: "home", op: state.tags.add("home", replica: replica)))
/// let draft = EventDraft(scope: list, stream: id.stream, type: payload.type.rawValue, payload: payload.json)
/// ```
public enum TaskPayload: Sendable, Hashable {
    case created(Created)
    case titled(Titled)
    case completed(Completed)
    case reopened(Reopened)
    case tagged(Tagged)
    case untagged(Untagged)
    case subtaskAdded(SubtaskAdded)
    case subtaskRemoved(SubtaskRemoved)
    case fileAttached(FileAttached)
    case fileDetached(FileDetached)
    case deleted(Deleted)

    /// `task.created`, `{"op"}`: the task exists; `op` assigns its first title.
    public struct Created: TaskEventPayload {
        public static let type = TaskEventType.created
        public var op: MVRegister<String>.Assignment
        public init(op: MVRegister<String>.Assignment) { self.op = op }
    }

    /// `task.titled`, `{"op"}`: `op` assigns the title, replacing the values its author saw; values assigned
    /// concurrently elsewhere stay beside it until a later title replaces them all.
    public struct Titled: TaskEventPayload {
        public static let type = TaskEventType.titled
        public var op: MVRegister<String>.Assignment
        public init(op: MVRegister<String>.Assignment) { self.op = op }
    }

    /// `task.completed`, `{"op"}`: `op` adds a completion (`CompletionFlag`).
    public struct Completed: TaskEventPayload {
        public static let type = TaskEventType.completed
        public var op: AddWinsSet<String>.Operation
        public init(op: AddWinsSet<String>.Operation) { self.op = op }
    }

    /// `task.reopened`, `{"op"}`: `op` removes the completions its author saw (`CompletionFlag`).
    public struct Reopened: TaskEventPayload {
        public static let type = TaskEventType.reopened
        public var op: AddWinsSet<String>.Operation
        public init(op: AddWinsSet<String>.Operation) { self.op = op }
    }

    /// `task.tagged`, `{"tag", "op"}`: `op` adds `tag` to the tags (add-wins OR-set).
    public struct Tagged: TaskEventPayload {
        public static let type = TaskEventType.tagged
        public var tag: String
        public var op: AddWinsSet<String>.Operation
        public init(tag: String, op: AddWinsSet<String>.Operation) {
            self.tag = tag
            self.op = op
        }
    }

    /// `task.untagged`, `{"tag", "op"}`: `op` removes the adds of `tag` its author saw; an add made
    /// concurrently elsewhere survives.
    public struct Untagged: TaskEventPayload {
        public static let type = TaskEventType.untagged
        public var tag: String
        public var op: AddWinsSet<String>.Operation
        public init(tag: String, op: AddWinsSet<String>.Operation) {
            self.tag = tag
            self.op = op
        }
    }

    /// `task.subtask.added`, `{"subtask", "title", "op"}`: `op` inserts the subtask's id into the list of
    /// subtasks (FugueMax, so two devices inserting at one place never interleave); `title` is its text.
    public struct SubtaskAdded: TaskEventPayload {
        public static let type = TaskEventType.subtaskAdded
        /// The subtask's id: a lowercase UUID.
        public var subtask: String
        public var title: String
        public var op: FugueList<String>.Operation
        public init(subtask: String, title: String, op: FugueList<String>.Operation) {
            self.subtask = subtask
            self.title = title
            self.op = op
        }
    }

    /// `task.subtask.removed`, `{"subtask", "op"}`: `op` removes the subtask's id from the list.
    public struct SubtaskRemoved: TaskEventPayload {
        public static let type = TaskEventType.subtaskRemoved
        public var subtask: String
        public var op: FugueList<String>.Operation
        public init(subtask: String, op: FugueList<String>.Operation) {
            self.subtask = subtask
            self.op = op
        }
    }

    /// `task.fileAttached`, `{"file", "op"}`: `op` adds `file` (a `TaskFile`'s element) to the task's files
    /// (add-wins OR-set). The event refers to the file's blob: a device pushes it only once the server holds
    /// the blob, and the server refuses it (`blob.missing`) when the list does not.
    public struct FileAttached: TaskEventPayload {
        public static let type = TaskEventType.fileAttached
        public var file: String
        public var op: AddWinsSet<String>.Operation
        public init(file: String, op: AddWinsSet<String>.Operation) {
            self.file = file
            self.op = op
        }
    }

    /// `task.fileDetached`, `{"file", "op"}`: `op` removes the adds of `file` (a `TaskFile`'s element) its
    /// author saw; an attach of the same file made concurrently elsewhere survives.
    public struct FileDetached: TaskEventPayload {
        public static let type = TaskEventType.fileDetached
        public var file: String
        public var op: AddWinsSet<String>.Operation
        public init(file: String, op: AddWinsSet<String>.Operation) {
            self.file = file
            self.op = op
        }
    }

    /// `task.deleted`, `{}`: the task is deleted, for good (a delete beats any concurrent edit).
    public struct Deleted: TaskEventPayload {
        public static let type = TaskEventType.deleted
        public init() {}
    }

    /// The payload of the case.
    public var payload: any TaskEventPayload {
        switch self {
        case .created(let payload): payload
        case .titled(let payload): payload
        case .completed(let payload): payload
        case .reopened(let payload): payload
        case .tagged(let payload): payload
        case .untagged(let payload): payload
        case .subtaskAdded(let payload): payload
        case .subtaskRemoved(let payload): payload
        case .fileAttached(let payload): payload
        case .fileDetached(let payload): payload
        case .deleted(let payload): payload
        }
    }

    /// The event type that carries this payload.
    public var type: TaskEventType { Swift.type(of: payload).type }

    /// The payload's canonical JSON, as an event carries it.
    public var json: JSONValue { payload.json }

    /// Decodes the payload of an event of `type`.
    /// - Throws: `TaskPayloadError` when the JSON is not a payload of that type.
    public init(type: TaskEventType, json: JSONValue) throws(TaskPayloadError) {
        switch type {
        case .created: self = .created(try Created(json: json))
        case .titled: self = .titled(try Titled(json: json))
        case .completed: self = .completed(try Completed(json: json))
        case .reopened: self = .reopened(try Reopened(json: json))
        case .tagged: self = .tagged(try Tagged(json: json))
        case .untagged: self = .untagged(try Untagged(json: json))
        case .subtaskAdded: self = .subtaskAdded(try SubtaskAdded(json: json))
        case .subtaskRemoved: self = .subtaskRemoved(try SubtaskRemoved(json: json))
        case .fileAttached: self = .fileAttached(try FileAttached(json: json))
        case .fileDetached: self = .fileDetached(try FileDetached(json: json))
        case .deleted: self = .deleted(try Deleted(json: json))
        }
    }

    /// Decodes an event's payload when its type is one of this domain's; nil for any other type.
    /// - Throws: `TaskPayloadError` when the type is a task type and the JSON is not its payload.
    public init?(type: String, json: JSONValue) throws(TaskPayloadError) {
        guard let kind = TaskEventType(rawValue: type) else { return nil }
        try self.init(type: kind, json: json)
    }
}

/// A task event's payload that does not decode as the payload of its type. The message names the type,
/// never the payload's content (which may be a person's text).
public struct TaskPayloadError: Error, Sendable, Hashable, CustomStringConvertible {
    public var type: TaskEventType

    public init(type: TaskEventType) { self.type = type }

    public var description: String { "a \(type.rawValue) payload is malformed" }
}
