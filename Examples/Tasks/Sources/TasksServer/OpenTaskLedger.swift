import SyncModels
import TasksModel

/// The pure decision of the open-task limit: walks a push's task events in order over what the server knows
/// of their tasks, and says which ones it refuses. No database: `OpenTaskLimitRule` loads the ledger, asks,
/// and writes back what changed.
///
/// A list may hold at most `limit` open tasks (created, not done, not deleted, as `TaskLifecycle` says). An
/// event that would open one more past the limit is refused: a `task.created`, or a `task.reopened` that
/// undoes every completion of a done task. Of two offline devices that each create the task crossing the
/// limit, the first to push wins; the other's creation comes back rejected, and the device rolls it back.
///
/// Every other event of a task the server never accepted the creation of is refused too, so that a refused
/// task is refused whole (its tags and subtasks with it) instead of leaving events of a task that no replica
/// shows. And an event that breaks `TaskRules` is refused before anything, as every client would refuse it.
public struct OpenTaskLedger: Sendable, Equatable {
    /// Where a task lives: its list (scope) and its stream.
    public struct TaskKey: Hashable, Sendable {
        public var list: Scope
        public var stream: String

        public init(list: Scope, stream: String) {
            self.list = list
            self.stream = stream
        }
    }

    /// Most open tasks per list.
    public var limit: Int
    /// The lifecycle of each task the walk concerns, as accepted events left it.
    public var tasks: [TaskKey: TaskLifecycle]
    /// Open tasks per list, for the lists the walk concerns.
    public var open: [Scope: Int64]

    public init(limit: Int, tasks: [TaskKey: TaskLifecycle] = [:], open: [Scope: Int64] = [:]) {
        self.limit = limit
        self.tasks = tasks
        self.open = open
    }

    /// One event's part in a walk: what the rule needs of a server's `Event`.
    public struct Entry: Sendable, Hashable {
        public var list: Scope
        public var stream: String
        public var type: String
        public var payload: JSONValue

        public init(list: Scope, stream: String, type: String, payload: JSONValue) {
            self.list = list
            self.stream = stream
            self.type = type
            self.payload = payload
        }
    }

    /// Accepts or refuses each entry in order, updating the ledger with the accepted ones.
    /// - Returns: the refusals' messages, by position in `entries`.
    public mutating func walk(_ entries: [Entry]) -> [Int: String] {
        var refusals: [Int: String] = [:]
        for (position, entry) in entries.enumerated() {
            if let refusal = accept(entry) { refusals[position] = refusal }
        }
        return refusals
    }

    /// Accepts `entry` (updating the ledger) or says why not (changing nothing).
    mutating func accept(_ entry: Entry) -> String? {
        if let violation = TaskRules.violation(type: entry.type, stream: entry.stream, payload: entry.payload) {
            return violation
        }
        guard let kind = TaskEventType(rawValue: entry.type),
            let payload = try? TaskPayload(type: kind, json: entry.payload)
        else { return nil }
        let key = TaskKey(list: entry.list, stream: entry.stream)
        var lifecycle = tasks[key] ?? TaskLifecycle()
        if kind != .created, !lifecycle.created {
            return "no task \(entry.stream) in list \(entry.list): its creation was never accepted"
        }
        let wasOpen = lifecycle.isOpen
        lifecycle.apply(payload)
        let count = open[entry.list] ?? 0
        switch (wasOpen, lifecycle.isOpen) {
        case (false, true):
            guard count < Int64(limit) else { return TaskRules.openLimitMessage(limit: limit) }
            open[entry.list] = count + 1
        case (true, false):
            open[entry.list] = count - 1
        default:
            break
        }
        tasks[key] = lifecycle
        return nil
    }
}
