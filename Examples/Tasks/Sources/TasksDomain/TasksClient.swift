import Foundation
import GRDB
import SyncCRDT
import SyncEngine
import SyncEngineHTTPClient
import SyncEventStore
import SyncModels
import TasksModel

/// The commands and queries of the Tasks app over a local event store. Every command reads the task's
/// current CRDT state and appends the events that express the change in one write transaction: it works
/// offline and returns at once, and what it wrote is already queued for the next sync.
public struct TasksClient: Sendable {
    public let store: EventStore

    public init(store: EventStore) {
        self.store = store
    }

    /// Opens (creating if needed) the store in the SQLite file at `path`, with the tasks projection and the
    /// domain's validation.
    public static func open(path: String) throws -> TasksClient {
        TasksClient(store: try EventStore(path: path, projections: [TasksProjection()], validators: [TasksValidator()]))
    }

    var replica: ReplicaID { store.replica }

    // MARK: - Commands

    /// Creates a task in `list`, with tags; returns its id.
    @discardableResult
    public func create(list: Scope, title: String, tags: [String] = []) async throws -> TaskID {
        let id = TaskID()
        let replica = replica
        try await store.append { _ in
            var state = TaskState()
            var drafts = [
                Self.draft(list, id, .created(.init(op: state.title.assign(title, replica: replica))), .noStream)
            ]
            for tag in tags {
                drafts.append(Self.draft(list, id, .tagged(.init(tag: tag, op: state.tags.add(tag, replica: replica)))))
            }
            return drafts
        }
        return id
    }

    /// Sets the title, replacing every title this replica shows, so retitling a task that has concurrent
    /// titles resolves the conflict.
    public func retitle(_ id: TaskID, _ title: String) async throws {
        let replica = replica
        try await change(id) { state, list in
            [Self.draft(list, id, .titled(.init(op: state.title.assign(title, replica: replica))))]
        }
    }

    /// Completes the task. A task already done gets a completion all the same, so that a reopen made
    /// concurrently elsewhere, which cannot have seen this one, does not undo it.
    public func complete(_ id: TaskID) async throws {
        let replica = replica
        try await change(id) { state, list in
            [Self.draft(list, id, .completed(.init(op: state.lifecycle.done.complete(replica: replica))))]
        }
    }

    /// Reopens the task: undoes the completions this replica has seen. Nothing to do when it is open.
    public func reopen(_ id: TaskID) async throws {
        let replica = replica
        try await change(id) { state, list in
            guard state.isDone else { return [] }
            return [Self.draft(list, id, .reopened(.init(op: state.lifecycle.done.reopen(replica: replica))))]
        }
    }

    public func tag(_ id: TaskID, _ tag: String) async throws {
        let replica = replica
        try await change(id) { state, list in
            [Self.draft(list, id, .tagged(.init(tag: tag, op: state.tags.add(tag, replica: replica))))]
        }
    }

    /// Removes the tag as this replica sees it; a concurrent add elsewhere survives (add-wins).
    public func untag(_ id: TaskID, _ tag: String) async throws {
        let replica = replica
        try await change(id) { state, list in
            guard state.tags.contains(tag) else { return [] }
            return [Self.draft(list, id, .untagged(.init(tag: tag, op: state.tags.remove(tag, replica: replica))))]
        }
    }

    /// Adds a subtask after `after` (at the start when nil; at the end with `atEnd`); returns its id.
    @discardableResult
    public func addSubtask(_ id: TaskID, title: String, after: String? = nil, atEnd: Bool = false) async throws
        -> String
    {
        let subtask = UUID().uuidString.lowercased()
        let replica = replica
        try await change(id) { state, list in
            let position: Int
            if atEnd {
                position = state.subtasks.count
            } else if let after {
                guard let index = state.subtasks.elements.firstIndex(of: after) else {
                    throw EventStoreError.invalid("no subtask \(after) in task \(id)")
                }
                position = index + 1
            } else {
                position = 0
            }
            let op = state.subtasks.insert(subtask, at: position, replica: replica)
            return [Self.draft(list, id, .subtaskAdded(.init(subtask: subtask, title: title, op: op)))]
        }
        return subtask
    }

    public func removeSubtask(_ id: TaskID, subtask: String) async throws {
        let replica = replica
        try await change(id) { state, list in
            guard let position = state.subtasks.elements.firstIndex(of: subtask),
                let op = state.subtasks.remove(at: position, replica: replica)
            else {
                throw EventStoreError.invalid("no subtask \(subtask) in task \(id)")
            }
            return [Self.draft(list, id, .subtaskRemoved(.init(subtask: subtask, op: op)))]
        }
    }

    /// Attaches the blob `blob` under `name`: its bytes must already be in the device's blob directory
    /// (`localBlobs().add(file:type:)`, which returns `blob`). The task shows the file at once, offline; the
    /// event joins the outbox but is pushed only once the server holds the blob (the draft's `blobs`), which
    /// the engine's `BlobSync` uploads first. Attaching the same bytes under the same name again changes
    /// nothing anyone sees.
    /// - Throws: `EventStoreError` `task.unknown` when the task is not on this device, `validation.failed`
    ///   when `name` is not a valid file name (`TaskFile.isValidName`).
    public func attach(_ id: TaskID, name: String, blob: BlobReference) async throws {
        let replica = replica
        let file = TaskFile(name: name, blob: blob)
        try await change(id) { state, list in
            var draft = Self.draft(
                list, id, .fileAttached(.init(file: file.element, op: state.files.add(file.element, replica: replica))))
            draft.blobs = [blob]
            return [draft]
        }
    }

    /// Detaches the files named `name` as this replica sees them (every one of that name: two devices may
    /// have attached different bytes under one name); one attached concurrently elsewhere survives
    /// (add-wins). The blob's bytes stay on the device until its cache evicts them.
    /// - Throws: `EventStoreError` `file.unknown` when the task has no file of that name here.
    public func detach(_ id: TaskID, name: String) async throws {
        let replica = replica
        try await change(id) { state, list in
            let named = state.fileList.filter { $0.name == name }
            guard !named.isEmpty else {
                throw EventStoreError(code: "file.unknown", message: "task \(id) has no file \(name)")
            }
            return named.map { file in
                Self.draft(
                    list, id,
                    .fileDetached(.init(file: file.element, op: state.files.remove(file.element, replica: replica))))
            }
        }
    }

    /// Deletes the task for good: a delete beats any concurrent edit.
    public func delete(_ id: TaskID) async throws {
        try await change(id) { _, list in [Self.draft(list, id, .deleted(.init()))] }
    }

    // MARK: - Queries

    /// The tasks of `list` this replica has, open ones first, then by title; deleted ones only when asked.
    public func tasks(in list: Scope, includingDeleted: Bool = false) async throws -> [TaskRow] {
        try await store.database.read { db in
            try TaskRow.fetchAll(
                db,
                sql: """
                    SELECT \(TaskRow.selection) FROM tasks WHERE scope = ? AND created = 1 AND (deleted = 0 OR ?)
                    ORDER BY done, title, id
                    """, arguments: [list.name, includingDeleted])
        }
    }

    /// Every task this replica has, in every list, deleted ones included: what two converged replicas hold
    /// alike.
    public func allTasks() async throws -> [TaskRow] {
        try await store.database.read { db in
            try TaskRow.fetchAll(db, sql: "SELECT \(TaskRow.selection) FROM tasks ORDER BY id")
        }
    }

    /// One task, or nil when this replica does not have it.
    public func task(_ id: TaskID) async throws -> TaskRow? {
        try await store.database.read { db in
            try TaskRow.fetchAll(
                db, sql: "SELECT \(TaskRow.selection) FROM tasks WHERE id = ?", arguments: [id.description]
            ).first
        }
    }

    /// The task's concurrent titles, the shown one first; empty when it has one title.
    public func conflictingTitles(_ id: TaskID) async throws -> [String] {
        try await task(id)?.titles ?? []
    }

    /// The tasks of `list` whose title has concurrent values, for a screen that asks the user to pick one.
    public func titleConflicts(in list: Scope) async throws -> [TaskRow] {
        try await tasks(in: list).filter(\.conflict)
    }

    /// The task's files by name, and the list (scope) their blobs are read from (`BlobSync.open(_:scope:)`);
    /// nil when this replica does not have the task.
    public func files(_ id: TaskID) async throws -> (list: Scope, files: [TaskFile])? {
        try await store.database.read { db in
            try TasksProjection.state(of: id, in: db).map { ($0.list, $0.state.fileList) }
        }
    }

    /// The task's CRDT state as this replica holds it, or nil.
    public func state(_ id: TaskID) async throws -> TaskState? {
        try await store.database.read { db in try TasksProjection.state(of: id, in: db)?.state }
    }

    /// This replica's events the server refused, oldest first.
    public func rejections() async throws -> [TaskRejection] {
        try await store.rejectedEvents().sorted { $0.position < $1.position }.map { stored in
            TaskRejection(
                task: TaskID(stored.event.stream), type: stored.event.type, code: stored.rejection?.code ?? "",
                message: stored.rejection?.message ?? "")
        }
    }

    // MARK: - Sync

    /// The device's blob directory (`<database path>.blobs`): where `attach`'s bytes go first
    /// (`add(file:type:)`) and where opened files are kept (`file(_:)`).
    public func localBlobs() throws -> LocalBlobs {
        try LocalBlobs(store: store)
    }

    /// A sync engine for this store, talking to the server at `server` (e.g. `http://127.0.0.1:8080`) with a
    /// bearer token whose scopes are the lists to sync. `syncNow()` uploads the attached files the server
    /// lacks, then pushes and pulls once; `run()` keeps syncing (on local writes, on the live stream) until
    /// cancelled. Its `blobs` (a `BlobSync` over `localBlobs()`) also downloads files on demand
    /// (`open(_:scope:)`).
    public func syncEngine(
        server: URL, token: String?, configuration: SyncEngine.Configuration = SyncEngine.Configuration()
    ) throws -> SyncEngine {
        let transport = HTTPClientTransport(baseURL: server, token: token)
        let blobs = BlobSync(local: try localBlobs(), transport: transport)
        return try SyncEngine(store: store, transport: transport, configuration: configuration, blobs: blobs)
    }

    // MARK: - Drafts

    /// Appends the drafts `build` makes from the task's current state and list, in one write transaction.
    private func change(
        _ id: TaskID, _ build: @escaping @Sendable (inout TaskState, Scope) throws -> [EventDraft]
    ) async throws {
        try await store.append { db in
            guard let (list, stored) = try TasksProjection.state(of: id, in: db), stored.lifecycle.created else {
                throw EventStoreError(code: "task.unknown", message: "no task \(id) on this device")
            }
            var state = stored
            return try build(&state, list)
        }
    }

    /// The event that carries `payload` in task `id`'s stream.
    static func draft(
        _ list: Scope, _ id: TaskID, _ payload: TaskPayload, _ expecting: ExpectedVersion = .any
    ) -> EventDraft {
        EventDraft(
            scope: list, stream: id.stream, type: payload.type.rawValue, payload: payload.json,
            expectedVersion: expecting)
    }
}

/// Refuses task events that break `TaskRules` before they are written, the same rules the server applies.
public struct TasksValidator: EventValidator {
    public init() {}

    public func validate(_ draft: EventDraft, in db: Database) throws {
        if let violation = TaskRules.violation(type: draft.type, stream: draft.stream, payload: draft.payload) {
            throw EventStoreError.invalid(violation)
        }
    }
}
