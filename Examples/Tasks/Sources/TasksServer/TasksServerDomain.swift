import ArgumentParser
import SyncModels
import SyncServer
import TasksModel

/// The Tasks domain plugged into the generic server: every `task.*` event is a CRDT operation, so the
/// server never refuses one for a stale stream version, and one rule runs in the push transaction,
/// `OpenTaskLimitRule`. Nothing is folded at compaction (`folder` is nil): a task's history is short, so no
/// snapshot event ever carries a task's files, and only `task.fileAttached` refers to a blob.
public struct TasksServerDomain: SyncDomain {
    /// Most open tasks per list.
    public var openTaskLimit: Int

    public init(openTaskLimit: Int = TasksServerOptions.defaultOpenTaskLimit) {
        self.openTaskLimit = openTaskLimit
    }

    public var name: String { "tasks" }

    public var rules: [any EventRule] { [OpenTaskLimitRule(limit: openTaskLimit)] }

    public func isCommutative(type: String) -> Bool { type.hasPrefix(TaskEventType.prefix) }

    /// A `task.fileAttached` refers to its file's blob: the server accepts it only once the list holds the
    /// blob (otherwise `blob.missing`), and keeps the blob while some event refers to it. A detach refers to
    /// nothing: once the attach it removed is gone (a purge of the task), the blob may go. A payload that
    /// does not read as a file refers to nothing (the rules refuse it anyway).
    public func blobReferences(in event: Event) -> [BlobReference] {
        guard event.type == TaskEventType.fileAttached.rawValue,
            let attached = try? TaskPayload.FileAttached(json: event.payload),
            let file = TaskFile(element: attached.file)
        else { return [] }
        return [file.blob]
    }
}

/// The Tasks domain's settings on a server's command line, each overriding its `SYNC_*` variable.
public struct TasksServerOptions: ParsableArguments {
    /// The limit when neither the flag nor `SYNC_OPEN_TASK_LIMIT` sets one.
    public static let defaultOpenTaskLimit = 100

    @Option(help: "Most open tasks per list (SYNC_OPEN_TASK_LIMIT, default 100).")
    public var openTaskLimit: Int?

    public init() {}

    /// The domain: the default limit, then `SYNC_OPEN_TASK_LIMIT` of `environment`, then the flag.
    /// - Throws: `ConfigurationError` when a limit is not a non-negative integer.
    public func domain(environment: [String: String]) throws -> TasksServerDomain {
        var limit = Self.defaultOpenTaskLimit
        if let text = environment["SYNC_OPEN_TASK_LIMIT"], !text.isEmpty {
            guard let value = Int(text), value >= 0 else {
                throw ConfigurationError(message: "SYNC_OPEN_TASK_LIMIT must be an integer in 0...\(Int.max)")
            }
            limit = value
        }
        if let openTaskLimit {
            guard openTaskLimit >= 0 else {
                throw ConfigurationError(message: "--open-task-limit must not be negative")
            }
            limit = openTaskLimit
        }
        return TasksServerDomain(openTaskLimit: limit)
    }
}
