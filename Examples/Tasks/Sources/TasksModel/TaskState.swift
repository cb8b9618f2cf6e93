import Foundation
import SyncCRDT
import SyncModels

/// One task as a CRDT: a composition of one SyncCRDT type per field, so applying the task's events in any
/// order, any number of times, gives the same task.
///
/// - title: multi-value register. Two devices that retitle the task offline both keep their title; the task
///   shows the one with the highest HLC (`title`) and says there is a conflict (`hasTitleConflict`), until a
///   retitle that saw both replaces them. A last-writer-wins title would drop one of them without a word.
/// - done: `CompletionFlag`, where completion wins over a concurrent reopen.
/// - tags: add-wins OR-set.
/// - subtasks: FugueMax sequence of subtask ids (the Notes checklist's structure), with a title per id.
/// - files: add-wins OR-set of `TaskFile` elements (a file attached on one device survives its concurrent
///   detach on another).
/// - created, deleted: `TaskLifecycle`.
///
/// A stream's state is driven by its events alone: `init()`, `apply`, `encoded()`, `init(stored:)` and
/// `columns` are everything a per-stream projection needs of it.
public struct TaskState: Sendable, Equatable {
    /// The version of `apply`'s meaning and of the stored form; a projection built on an older one rebuilds.
    public static let version = 1

    public var lifecycle = TaskLifecycle()
    public var title = MVRegister<String>()
    /// The HLC of the event that assigned each current title value, by the value's dot: what orders
    /// concurrent titles. Only current values have one.
    public private(set) var titleStamps: [Dot: HLCTimestamp] = [:]
    public var tags = AddWinsSet<String>()
    public var subtasks = FugueList<String>()
    /// Each subtask's title, by subtask id (set once, by the event that added it).
    public var subtaskTitles: [String: String] = [:]
    /// The files attached, as `TaskFile` elements (`fileList` reads them).
    public var files = AddWinsSet<String>()

    public init() {}

    // MARK: - Applying events

    /// Applies one event of this task. Events of other types are ignored, and so is a payload that does not
    /// decode (validation keeps those out of every log).
    public mutating func apply(type: String, payload: JSONValue, hlc: HLCTimestamp, dot: Dot) {
        guard let decoded = try? TaskPayload(type: type, json: payload) else { return }
        apply(decoded, hlc: hlc)
    }

    /// Applies one event's payload; `hlc` is the event's, which orders concurrent titles.
    public mutating func apply(_ payload: TaskPayload, hlc: HLCTimestamp) {
        lifecycle.apply(payload)
        switch payload {
        case .created(let created): assignTitle(created.op, hlc: hlc)
        case .titled(let titled): assignTitle(titled.op, hlc: hlc)
        case .tagged(let tagged): tags.apply(tagged.op)
        case .untagged(let untagged): tags.apply(untagged.op)
        case .subtaskAdded(let added):
            subtasks.apply(added.op)
            subtaskTitles[added.subtask] = added.title
        case .subtaskRemoved(let removed): subtasks.apply(removed.op)
        case .fileAttached(let attached): files.apply(attached.op)
        case .fileDetached(let detached): files.apply(detached.op)
        case .completed, .reopened, .deleted: break
        }
    }

    private mutating func assignTitle(_ assignment: MVRegister<String>.Assignment, hlc: HLCTimestamp) {
        title.apply(assignment)
        if title.entries[assignment.dot] != nil { titleStamps[assignment.dot] = hlc }
        // Overwritten values leave with their stamps, so equal registers have equal stamps.
        titleStamps = titleStamps.filter { title.entries[$0.key] != nil }
    }

    // MARK: - What an app shows

    /// The current title values, the shown one first, then the others by HLC, newest first.
    public var titles: [String] {
        title.entries.sorted { lhs, rhs in
            let left = titleStamps[lhs.key] ?? .zero
            let right = titleStamps[rhs.key] ?? .zero
            return left != right ? left > right : lhs.key > rhs.key
        }.map(\.value)
    }

    /// The title shown: of concurrent titles, the one with the highest HLC (the same on every replica).
    public var shownTitle: String { titles.first ?? "" }

    /// Whether concurrent titles wait for someone to pick one.
    public var hasTitleConflict: Bool { title.hasConflict }

    public var isDone: Bool { lifecycle.done.isDone }

    /// The subtasks in list order.
    public var subtaskList: [Subtask] {
        subtasks.elements.map { Subtask(id: $0, title: subtaskTitles[$0] ?? "") }
    }

    /// The files attached, by name (then by hash); elements that are not `TaskFile`s (which the rules keep
    /// out of every log) are left out.
    public var fileList: [TaskFile] {
        files.elements.compactMap(TaskFile.init(element:)).sorted()
    }

    /// One subtask as an app shows it.
    public struct Subtask: Sendable, Hashable, Codable {
        public var id: String
        public var title: String

        public init(id: String, title: String) {
            self.id = id
            self.title = title
        }
    }

    /// The plain values of the task's row: what a projection writes beside the state and an app queries.
    public var columns: TaskColumns {
        TaskColumns(
            title: shownTitle, done: isDone, tags: tags.elements.sorted(), subtasks: subtaskList,
            deleted: lifecycle.deleted, created: lifecycle.created, conflict: hasTitleConflict,
            titles: hasTitleConflict ? titles : [])
    }
}

/// A task's read columns, as plain values (the lists as canonical JSON text in `texts`): what a row of the
/// `tasks` table holds beside its id, its list and its state.
public struct TaskColumns: Sendable, Hashable, Codable {
    public var title: String
    public var done: Bool
    public var tags: [String]
    public var subtasks: [TaskState.Subtask]
    public var deleted: Bool
    public var created: Bool
    /// Whether concurrent titles are kept (`TaskState.hasTitleConflict`).
    public var conflict: Bool
    /// With a conflict, every current title, the shown one first; empty otherwise.
    public var titles: [String]

    public init(
        title: String, done: Bool, tags: [String], subtasks: [TaskState.Subtask], deleted: Bool, created: Bool,
        conflict: Bool, titles: [String]
    ) {
        self.title = title
        self.done = done
        self.tags = tags
        self.subtasks = subtasks
        self.deleted = deleted
        self.created = created
        self.conflict = conflict
        self.titles = titles
    }

    /// The column names, in the order of `values`.
    public static let names = ["title", "done", "tags", "subtasks", "deleted", "created", "conflict", "titles"]

    /// The columns' values in `names` order: text, booleans as 0 or 1, lists as canonical JSON text.
    public var values: [ColumnValue] {
        [
            .text(title), .integer(done ? 1 : 0), .text(Self.json(tags)), .text(Self.json(subtasks)),
            .integer(deleted ? 1 : 0), .integer(created ? 1 : 0), .integer(conflict ? 1 : 0), .text(Self.json(titles)),
        ]
    }

    /// One column's value, in the two types SQLite columns of a row take here.
    public enum ColumnValue: Sendable, Hashable {
        case text(String)
        case integer(Int64)
    }

    /// Canonical JSON text of a list: what the row's JSON columns hold, and what `decodeJSON` reads.
    public static func json<T: Encodable>(_ value: T) -> String {
        // Arrays of strings and of subtasks always encode.
        String(decoding: try! CanonicalJSON.encode(value), as: UTF8.self)
    }

    /// Reads a JSON column back (`json`'s inverse).
    public static func decodeJSON<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        try CanonicalJSON.decode(type, from: Data(text.utf8))
    }
}

// MARK: - Stored form

extension TaskState {
    /// The state as stored in a row: canonical JSON of every field (sorted keys), readable when debugging a
    /// device's file with `sqlite3`. A task is small, so the JSON's size and parsing cost do not matter;
    /// Notes' note state, which holds whole texts, has a binary form instead.
    ///
    /// Equal states need not give equal bytes: the subtasks' sequence writes its operations in the order
    /// this replica applied them. Compare states with `==`.
    ///
    /// The files are written only when the set has seen an operation (`files`, absent otherwise), so a task
    /// that never had a file is written as it was before tasks had files, and a state stored then reads
    /// back with an empty set: the form's version did not change.
    public func encoded() -> Data {
        // Every field is a value type whose encoding cannot fail.
        try! CanonicalJSON.encode(Stored(self))
    }

    /// Decodes what `encoded()` wrote.
    /// - Throws: when the bytes are not a stored task state of this version.
    public init(stored data: Data) throws {
        let stored = try CanonicalJSON.decode(Stored.self, from: data)
        guard stored.version == Self.version else {
            throw TaskStateError(message: "a stored task state of version \(stored.version), not \(Self.version)")
        }
        self.init()
        lifecycle = stored.lifecycle
        title = stored.title
        titleStamps = Dictionary(stored.titleStamps.map { ($0.dot, $0.hlc) }, uniquingKeysWith: max)
        tags = stored.tags
        subtasks = stored.subtasks
        subtaskTitles = stored.subtaskTitles
        files = stored.files ?? AddWinsSet()
    }

    private struct Stored: Codable {
        struct Stamp: Codable {
            var dot: Dot
            var hlc: HLCTimestamp
        }
        var version: Int
        var lifecycle: TaskLifecycle
        var title: MVRegister<String>
        var titleStamps: [Stamp]
        var tags: AddWinsSet<String>
        var subtasks: FugueList<String>
        var subtaskTitles: [String: String]
        /// Absent (nil) while the set has seen no operation.
        var files: AddWinsSet<String>?

        init(_ state: TaskState) {
            version = TaskState.version
            lifecycle = state.lifecycle
            title = state.title
            titleStamps = state.titleStamps.sorted { $0.key < $1.key }.map { Stamp(dot: $0.key, hlc: $0.value) }
            tags = state.tags
            subtasks = state.subtasks
            subtaskTitles = state.subtaskTitles
            files = state.files == AddWinsSet() ? nil : state.files
        }
    }
}

/// A stored task state that this build cannot read.
public struct TaskStateError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String

    public init(message: String) { self.message = message }

    public var description: String { message }
}
