import Foundation
import GRDB
import SyncEventStore
import SyncModels
import SyncStorage
import SyncTestSupport
import TasksDomain
import Testing

/// The app's commands and queries on a real SQLite file, offline, and the projection's own rules: replays,
/// rebuilds and snapshots give the rows incremental application gave.
@Suite struct TasksClientTests {
    static let list: Scope = "groceries"

    @Test func commandsWorkOfflineAndTheRowsShowThem() async throws {
        let directory = try TemporaryDirectory()
        let tasks = try TasksClient.open(path: directory.path("phone.sqlite"))
        let milk = try await tasks.create(list: Self.list, title: "Milk", tags: ["dairy", "shopping"])
        let fridge = try await tasks.addSubtask(milk, title: "check the fridge")
        let shop = try await tasks.addSubtask(milk, title: "go to the shop", atEnd: true)
        let list = try await tasks.addSubtask(milk, title: "write a list", after: fridge)
        try await tasks.removeSubtask(milk, subtask: shop)
        try await tasks.retitle(milk, "Oat milk")
        try await tasks.untag(milk, "shopping")
        try await tasks.complete(milk)

        let row = try #require(try await tasks.task(milk))
        #expect(row.title == "Oat milk" && row.done && !row.deleted && !row.conflict && row.titles.isEmpty)
        #expect(row.tags == ["dairy"])
        #expect(row.subtasks.map(\.id) == [fridge, list])
        #expect(row.subtasks.map(\.title) == ["check the fridge", "write a list"])
        #expect(row.list == Self.list.name)

        try await tasks.reopen(milk)
        #expect(try await tasks.task(milk)?.done == false)
        let bread = try await tasks.create(list: Self.list, title: "Bread")
        try await tasks.delete(bread)
        #expect(try await tasks.tasks(in: Self.list).map(\.id) == [milk])
        #expect(try await tasks.tasks(in: Self.list, includingDeleted: true).count == 2)
        #expect(try await tasks.tasks(in: "work").isEmpty)
        // Every edit is in the outbox, waiting for a sync.
        #expect(try await tasks.store.counts()[.pending] == 13)
    }

    @Test func theReadmeExampleRuns() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("phone.sqlite")
        // README begins
        let tasks = try TasksClient.open(path: path)  // path: where the SQLite file goes
        let milk = try await tasks.create(list: "groceries", title: "Milk", tags: ["dairy"])
        try await tasks.addSubtask(milk, title: "check the fridge")
        try await tasks.complete(milk)
        print(try await tasks.task(milk)!.done)  // true, offline, at once
        // README ends
        #expect(try await tasks.task(milk)?.subtasks.map(\.title) == ["check the fridge"])
        #expect(try await tasks.task(milk)?.done == true)
    }

    @Test func commandsRefuseWhatTheRulesRefuseAndTasksThisDeviceDoesNotHave() async throws {
        let directory = try TemporaryDirectory()
        let tasks = try TasksClient.open(path: directory.path("phone.sqlite"))
        let milk = try await tasks.create(list: Self.list, title: "Milk")
        await #expect(throws: EventStoreError.self) { try await tasks.retitle(milk, "") }
        await #expect(throws: EventStoreError.self) { try await tasks.tag(milk, String(repeating: "x", count: 33)) }
        await #expect(throws: EventStoreError.self) { try await tasks.complete(TaskID()) }
        await #expect(throws: EventStoreError.self) { try await tasks.removeSubtask(milk, subtask: "nope") }
        #expect(try await tasks.task(milk)?.title == "Milk")
    }

    @Test func anAttachedFileShowsAtOnceAndItsEventWaitsInTheOutboxForItsUpload() async throws {
        let directory = try TemporaryDirectory()
        let tasks = try TasksClient.open(path: directory.path("phone.sqlite"))
        let milk = try await tasks.create(list: Self.list, title: "Milk")
        let source = URL(fileURLWithPath: directory.path("receipt.pdf"))
        let bytes = Data((0..<3_000).map { UInt8($0 % 251) })
        try bytes.write(to: source)
        let blob = try await tasks.localBlobs().add(file: source, type: "application/pdf")
        #expect(blob.size == 3_000 && blob.type == "application/pdf")
        try await tasks.attach(milk, name: "receipt march.pdf", blob: blob)

        // Offline, at once: the task lists the file and the device reads its bytes.
        let (list, files) = try #require(try await tasks.files(milk))
        #expect(list == Self.list)
        #expect(files == [TaskFile(name: "receipt march.pdf", blob: blob)])
        let here = try #require(try await tasks.localBlobs().file(blob.hash))
        #expect(try Data(contentsOf: here) == bytes)

        // The attach is in the outbox, but a push takes only what comes before it: the server does not hold
        // the blob yet. An edit made after it waits too (the outbox keeps its order).
        try await tasks.retitle(milk, "Oat milk")
        #expect(try await tasks.store.counts()[.pending] == 3)
        let pushable = try await tasks.store.outboxSnapshot(after: 0, limit: 100).pending
        #expect(pushable.map(\.event.type) == ["task.created"])

        // Attaching the same bytes under the same name again shows one file; detaching removes it.
        try await tasks.attach(milk, name: "receipt march.pdf", blob: blob)
        #expect(try await tasks.files(milk)?.files.count == 1)
        try await tasks.detach(milk, name: "receipt march.pdf")
        #expect(try await tasks.files(milk)?.files == [])
        #expect(try await tasks.files(TaskID()) == nil)

        await #expect(throws: EventStoreError.self) { try await tasks.detach(milk, name: "receipt march.pdf") }
        await #expect(throws: EventStoreError.self) { try await tasks.attach(milk, name: "", blob: blob) }
        await #expect(throws: EventStoreError.self) { try await tasks.attach(TaskID(), name: "a", blob: blob) }
        // A rebuild from the log gives the same files.
        try await tasks.attach(milk, name: "again.pdf", blob: blob)
        let before = try await tasks.files(milk)?.files
        try await tasks.store.rebuildAll()
        #expect(try await tasks.files(milk)?.files == before)
        #expect(before?.map(\.name) == ["again.pdf"])
    }

    @Test func aRebuildAndAReopenedStoreGiveTheSameRows() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("phone.sqlite")
        let tasks = try TasksClient.open(path: path)
        let milk = try await tasks.create(list: Self.list, title: "Milk", tags: ["dairy"])
        try await tasks.addSubtask(milk, title: "check the fridge")
        try await tasks.complete(milk)
        try await tasks.create(list: Self.list, title: "Bread")
        let before = try await tasks.allTasks()
        try await tasks.store.rebuildAll()
        #expect(try await tasks.allTasks() == before)
        #expect(try await TasksClient.open(path: path).allTasks() == before)
    }

    /// The projection alone on a database: a snapshot, then more events, then a restore of some tasks gives
    /// those tasks their snapshot rows back and leaves the others as they are; applying again is idempotent.
    @Test func snapshotsRestoreWhatTheyHeld() async throws {
        let directory = try TemporaryDirectory()
        let phone = try TasksClient.open(path: directory.path("phone.sqlite"))
        let milk = try await phone.create(list: Self.list, title: "Milk")
        let bread = try await phone.create(list: Self.list, title: "Bread")
        let early = try await phone.store.events(stream: milk.stream) + phone.store.events(stream: bread.stream)
        try await phone.retitle(milk, "Oat milk")
        try await phone.complete(bread)
        let eggs = try await phone.create(list: Self.list, title: "Eggs")
        let late =
            try await phone.store.events(stream: milk.stream).dropFirst()
            + phone.store.events(stream: bread.stream)
            .dropFirst() + phone.store.events(stream: eggs.stream)

        let projection = TasksProjection()
        let database = try SyncDatabase(path: directory.path("projection.sqlite"))
        var migrations = SchemaMigrations()
        projection.registerMigrations(into: &migrations)
        try database.migrate(migrations)
        // Synchronous access, as the store's own transactions have it.
        func rows() throws -> [Row] {
            try database.writer.read { db in try Row.fetchAll(db, sql: "SELECT * FROM tasks ORDER BY id") }
        }
        func write(_ body: (Database) throws -> Void) throws {
            try database.writer.write { db in try body(db) }
        }
        func title(_ id: TaskID) throws -> String? {
            try database.writer.read { db in try TasksProjection.state(of: id, in: db)?.state.shownTitle }
        }
        try write { db in
            try projection.apply(early, in: db)
            try projection.saveSnapshot(in: db)
        }
        let snapshot = try rows()
        try write { db in
            try projection.apply(Array(late), in: db)
            try projection.apply(Array(late), in: db)
        }
        let current = try rows()
        #expect(try title(milk) == "Oat milk")
        try write { db in
            try projection.restoreSnapshot(streams: [milk.stream, eggs.stream, "note:elsewhere"], in: db)
        }
        let restored = try rows()
        #expect(restored.count == 2, "eggs is not in the snapshot: restoring removes it")
        #expect(restored.first { $0["id"] == milk.description } == snapshot.first { $0["id"] == milk.description })
        #expect(restored.first { $0["id"] == bread.description } == current.first { $0["id"] == bread.description })
        try write { db in
            try projection.restoreSnapshot(streams: nil, in: db)
        }
        #expect(try rows() == snapshot)
        try write { db in
            try projection.discardSnapshot(in: db)
            try projection.restoreSnapshot(streams: nil, in: db)
        }
        #expect(try rows().isEmpty)
    }
}
