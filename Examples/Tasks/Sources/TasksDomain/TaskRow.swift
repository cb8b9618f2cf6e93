import Foundation
import GRDB
import SyncModels
import TasksModel

/// A task as its row in the `tasks` table holds it: what a list screen shows, read without decoding the
/// task's CRDT state.
public struct TaskRow: Sendable, Hashable, Codable {
    public var id: TaskID
    /// The list (scope) the task belongs to.
    public var list: String
    /// The title shown: with concurrent titles, the one with the highest HLC.
    public var title: String
    public var done: Bool
    /// Sorted.
    public var tags: [String]
    /// In list order.
    public var subtasks: [TaskState.Subtask]
    public var deleted: Bool
    /// Whether concurrent titles wait for someone to pick one (`titles` lists them).
    public var conflict: Bool
    /// With a conflict, every current title, the shown one first; empty otherwise.
    public var titles: [String]

    /// The columns `init(row:)` reads, in its order.
    static let selection = "id, scope, title, done, tags, subtasks, deleted, conflict, titles"

    init(row: Row) throws {
        guard let id = TaskID(row[0] as String) else {
            throw DatabaseError(message: "tasks row with an id that is not a task id")
        }
        self.id = id
        list = row[1]
        title = row[2]
        done = row[3]
        tags = try TaskColumns.decodeJSON([String].self, row[4])
        subtasks = try TaskColumns.decodeJSON([TaskState.Subtask].self, row[5])
        deleted = row[6]
        conflict = row[7]
        titles = try TaskColumns.decodeJSON([String].self, row[8])
    }

    /// Rows of `sql`'s query, which selects `selection`.
    static func fetchAll(_ db: Database, sql: String, arguments: StatementArguments = []) throws -> [TaskRow] {
        try Row.fetchAll(db, sql: sql, arguments: arguments).map(TaskRow.init(row:))
    }
}

/// A local event the server refused: kept in the log, rolled back from the tasks, shown to the user.
public struct TaskRejection: Sendable, Hashable, Codable {
    public var task: TaskID?
    public var type: String
    /// The server's stable code, e.g. `validation.failed`.
    public var code: String
    /// The server's message, e.g. `TaskRules.openLimitMessage(limit:)`.
    public var message: String
}
