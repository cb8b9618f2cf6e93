import Foundation
import GRDB
import SyncEventStore
import SyncModels
import TasksModel

/// The `tasks` projection: the stack's per-stream state projection (`StreamStateProjection`) with the tasks
/// model. One row per task, with plain read columns an app queries with SQL (`scope`: the list, `title`,
/// `done`, `tags` and `subtasks` as JSON, `deleted`, `created`, `conflict` and `titles` for concurrent
/// titles) and the task's CRDT state (`state`, `TaskState.encoded()`), from which the next event goes on.
///
/// The projection brings what every CRDT domain needs without a line here: a page's tasks loaded and
/// written once, decoded states cached between pages, write-behind during a long pull, folding on arrival,
/// copy-on-write snapshots for pruning, and retired (deleted) tasks purged once every replica saw them.
public typealias TasksProjection = StreamStateProjection<TasksStateModel>

/// What the tasks domain gives the projection: the key (`TaskID`, from `task:<id>`), the state (`TaskState`),
/// how an event folds into it, its stored form and its columns.
public struct TasksStateModel: StreamStateModel {
    public init() {}

    public var name: String { "tasks" }
    public var version: Int { TaskState.version }
    public var table: String { "tasks" }
    public var keyColumn: String { "id" }
    public var columns: [StreamStateColumn] {
        TaskColumns.names.map { name in
            switch name {
            case "title": StreamStateColumn(name, "TEXT NOT NULL DEFAULT ''")
            case "tags", "subtasks", "titles": StreamStateColumn(name, "TEXT NOT NULL DEFAULT '[]'")
            default: StreamStateColumn(name, "INTEGER NOT NULL DEFAULT 0")
            }
        }
    }
    /// A deleted task: nothing can follow its end once every replica has seen it.
    public var retiredColumn: String? { "deleted" }
    /// A task whose title was set on devices that did not see each other's: the sync engine journals such
    /// conflicts as they open and close and counts them (`EngineStatus.openConflicts`); the default schema
    /// indexes the tasks in conflict.
    public var conflictColumn: String? { "conflict" }
    /// The tasks an app lists (`TasksClient.tasks(in:)`): created and not deleted. A deep verification
    /// compares these rows with a rebuild.
    public var shownCondition: String? { "deleted = 0 AND created = 1" }

    /// A task's stream has one spelling (`TaskID.stream`); other streams are not tasks.
    public func key(ofStream stream: String) -> TaskID? {
        guard stream.hasPrefix("task:"), let id = TaskID(stream), id.stream == stream else { return nil }
        return id
    }

    public func stream(of key: TaskID) -> String { key.stream }

    public func accepts(type: String) -> Bool { type.hasPrefix(TaskEventType.prefix) }

    public func initialState() -> TaskState { TaskState() }

    public func apply(_ event: StoredEvent, to state: inout TaskState) {
        state.apply(type: event.event.type, payload: event.event.payload, hlc: event.event.hlc, dot: event.event.dot)
    }

    public func encode(_ state: TaskState) -> Data { state.encoded() }

    public func decode(_ data: Data) throws -> TaskState { try TaskState(stored: data) }

    public func values(of state: TaskState) -> [DatabaseValue] {
        state.columns.values.map { value in
            switch value {
            case .text(let text): text.databaseValue
            case .integer(let integer): integer.databaseValue
            }
        }
    }

    public func isRetired(_ state: TaskState) -> Bool { state.lifecycle.deleted }
}

extension StreamStateProjection where Model == TasksStateModel {
    public init() { self.init(TasksStateModel()) }

    /// The task's list and CRDT state, or nil when this replica has no row for it.
    public static func state(of id: TaskID, in db: Database) throws -> (list: Scope, state: TaskState)? {
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT scope, state FROM tasks WHERE id = ?", arguments: [id.description])
        else { return nil }
        return (try Scope(row[0] as String), try TaskState(stored: row[1]))
    }
}
