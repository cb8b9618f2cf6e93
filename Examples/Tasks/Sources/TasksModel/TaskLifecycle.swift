import SyncModels

/// The part of a task that decides whether it is open: created, done, deleted. Clients hold it inside
/// `TaskState`; the server's rule keeps only this, one per task, to count a list's open tasks. Both apply
/// the same operations the same way, so the server's count is exactly what every replica will show once it
/// has the same events.
public struct TaskLifecycle: Sendable, Equatable, Codable {
    /// Whether the task's `task.created` has been applied.
    public var created = false
    /// Once true, true for good: a delete beats any concurrent edit.
    public var deleted = false
    public var done = CompletionFlag()

    public init() {}

    /// Created, not done, not deleted: what the server's open-task limit counts.
    public var isOpen: Bool { created && !deleted && !done.isDone }

    /// Applies what `payload` changes of the lifecycle; other payloads change nothing.
    public mutating func apply(_ payload: TaskPayload) {
        switch payload {
        case .created: created = true
        case .completed(let completed): done.apply(completed.op)
        case .reopened(let reopened): done.apply(reopened.op)
        case .deleted: deleted = true
        case .titled, .tagged, .untagged, .subtaskAdded, .subtaskRemoved, .fileAttached, .fileDetached: break
        }
    }
}
