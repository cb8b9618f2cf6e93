import Foundation
import HummingbirdTesting
import SyncEngine
import SyncModels
import SyncServer
import SyncServerTesting
import SyncTestSupport
import TasksDomain
import TasksServer
import Testing

/// The whole stack on loopback: PostgreSQL (`SYNC_DATABASE_URL`, a fresh database for the test), the sync
/// server with the Tasks domain on a real HTTP port, and two devices, each a `TasksClient` on its own
/// SQLite file syncing through `HTTPClientTransport`.
@Suite(.serialized) struct EndToEndTests {
    static let list: Scope = "groceries"

    /// Whether `SYNC_DATABASE_URL` names a PostgreSQL server; records the issue that says how to run the test
    /// when it does not.
    static func hasDatabase() -> Bool {
        guard let url = ProcessInfo.processInfo.environment["SYNC_DATABASE_URL"], !url.isEmpty else {
            Issue.record(
                """
                SYNC_DATABASE_URL is not set: this test needs a PostgreSQL server. From Examples/Tasks, run \
                `../../scripts/with-postgres.sh swift test`, which starts a throwaway one and sets it.
                """)
            return false
        }
        return true
    }

    @Test func twoDevicesEditOfflineAndConvergeWithTheDomainsRules() async throws {
        guard Self.hasDatabase() else { return }
        try await TestServer.run(live: true, domain: TasksServerDomain(openTaskLimit: 4)) { server in
            let port = try #require(server.client.port)
            let base = try #require(URL(string: "http://127.0.0.1:\(port)"))
            let token = try await server.token([Self.list.name])
            let directory = try TemporaryDirectory()
            let phone = try TasksClient.open(path: directory.path("phone.sqlite"))
            let laptop = try TasksClient.open(path: directory.path("laptop.sqlite"))
            let phoneSync = try phone.syncEngine(server: base, token: token)
            let laptopSync = try laptop.syncEngine(server: base, token: token)
            let list = Self.list

            // Both devices start from the same list: two open tasks and a done one.
            let milk = try await phone.create(list: list, title: "Milk", tags: ["shopping"])
            let fridge = try await phone.addSubtask(milk, title: "check the fridge")
            let bread = try await phone.create(list: list, title: "Bread")
            let eggs = try await phone.create(list: list, title: "Eggs")
            try await phone.complete(eggs)
            try await phoneSync.syncNow()
            try await laptopSync.syncNow()
            #expect(try await laptop.allTasks() == phone.allTasks())
            #expect(try await laptop.tasks(in: list).count == 3)

            // Offline, on the phone.
            try await phone.retitle(milk, "Oat milk")
            try await phone.tag(milk, "shopping")  // again: concurrent with the laptop's untag
            try await phone.tag(milk, "dairy")
            try await phone.addSubtask(milk, title: "2 litres", after: fridge)
            try await phone.reopen(eggs)  // concurrent with the laptop's completion
            let butter = try await phone.create(list: list, title: "Butter")  // the 4th open task: the limit

            // Offline, on the laptop.
            let cheese = try await laptop.create(list: list, title: "Cheese", tags: ["dairy"])  // a 5th: refused
            try await laptop.retitle(milk, "Whole milk")
            try await laptop.untag(milk, "shopping")
            try await laptop.addSubtask(milk, title: "ask Sam", after: fridge)
            try await laptop.complete(eggs)
            #expect(try await laptop.task(cheese)?.title == "Cheese", "offline, the laptop shows its task at once")

            // The phone pushes first; the laptop's creation then finds the list full.
            try await phoneSync.syncNow()
            try await laptopSync.syncNow()
            try await phoneSync.syncNow()

            #expect(try await laptop.task(cheese) == nil, "the refused task is rolled back on the laptop")
            let rejections = try await laptop.rejections()
            #expect(rejections.map(\.type) == ["task.created", "task.tagged"], "refused whole, its tag with it")
            #expect(rejections.allSatisfy { $0.task == cheese && $0.code == "validation.failed" })
            #expect(rejections.first?.message == TaskRules.openLimitMessage(limit: 4))
            #expect(laptopSync.status.rejected == 2)
            #expect(try await phone.rejections().isEmpty)

            // Converged: the same rows on both devices, and the same task states.
            let rows = try await phone.allTasks()
            #expect(try await laptop.allTasks() == rows)
            for id in [milk, bread, eggs, butter] {
                let state = try await phone.state(id)
                #expect(state != nil)
                #expect(try await laptop.state(id) == state)
            }
            #expect(rows.map(\.id).sorted() == [milk, bread, eggs, butter].sorted())

            let merged = try #require(rows.first { $0.id == milk })
            #expect(merged.conflict, "both titles are kept and shown as a conflict")
            #expect(Set(merged.titles) == ["Oat milk", "Whole milk"])
            #expect(merged.title == merged.titles.first)
            #expect(try await laptop.conflictingTitles(milk) == merged.titles)
            #expect(try await phone.titleConflicts(in: list).map(\.id) == [milk])
            // The engine reads the model's conflict column: each device counts the open conflict.
            #expect(phoneSync.status.openConflicts == 1 && laptopSync.status.openConflicts == 1)
            #expect(merged.tags == ["dairy", "shopping"], "add-wins: the phone's concurrent re-add survives the untag")
            #expect(merged.subtasks.first?.id == fridge)
            #expect(Set(merged.subtasks.dropFirst().map(\.title)) == ["2 litres", "ask Sam"])
            #expect(rows.first { $0.id == eggs }?.done == true, "the completion wins over the concurrent reopen")
            #expect(
                try await phone.tasks(in: list).filter { !$0.done }.map(\.id).sorted()
                    == [milk, bread, butter].sorted())

            // A retitle that saw both titles settles the conflict everywhere.
            try await laptop.retitle(milk, "Milk")
            try await laptopSync.syncNow()
            try await phoneSync.syncNow()
            for device in [phone, laptop] {
                let settled = try await device.task(milk)
                #expect(settled?.title == "Milk" && settled?.conflict == false && settled?.titles == [])
            }
            #expect(phoneSync.status.openConflicts == 0 && laptopSync.status.openConflicts == 0)
            #expect(try await laptop.allTasks() == phone.allTasks())
        }
    }

    /// A file attached offline on the phone: the sync uploads it in chunks before it pushes the attach, the
    /// laptop lists it after its own sync without its bytes, and opening it there downloads exactly the bytes
    /// the phone attached. A detach on the laptop then reaches the phone.
    @Test func aFileAttachedOfflineIsUploadedBeforeItsEventAndOpensByteIdenticalOnAnotherDevice() async throws {
        guard Self.hasDatabase() else { return }
        // Small chunks, so the file takes several.
        try await TestServer.run(live: true, domain: TasksServerDomain(), configure: { $0.blobs.chunkBytes = 64 << 10 })
        {
            server in
            let port = try #require(server.client.port)
            let base = try #require(URL(string: "http://127.0.0.1:\(port)"))
            let token = try await server.token([Self.list.name])
            let directory = try TemporaryDirectory()
            let phone = try TasksClient.open(path: directory.path("phone.sqlite"))
            let laptop = try TasksClient.open(path: directory.path("laptop.sqlite"))
            let phoneSync = try phone.syncEngine(server: base, token: token)
            let laptopSync = try laptop.syncEngine(server: base, token: token)

            // Offline, on the phone: a task and a file of about 300 KiB (5 chunks), seeded bytes.
            let milk = try await phone.create(list: Self.list, title: "Milk")
            var random = SplitMix64(seed: 46)
            let bytes = Data((0..<300_001).map { _ in UInt8.random(in: 0...255, using: &random) })
            let source = URL(fileURLWithPath: directory.path("receipt.pdf"))
            try bytes.write(to: source)
            let blob = try await phone.localBlobs().add(file: source, type: "application/pdf")
            try await phone.attach(milk, name: "receipt.pdf", blob: blob)
            #expect(try await phone.store.outboxSnapshot(after: 0, limit: 100).pending.count == 1, "held for its blob")
            #expect(try await server.database.integers("SELECT count(*) FROM blobs") == [0])

            try await phoneSync.syncNow()
            #expect(phoneSync.status.pending == 0, "uploaded, then pushed")
            #expect(try await phoneSync.blobs?.pendingUploads().isEmpty == true)
            #expect(try await server.database.integers("SELECT count(*) FROM blobs") == [1])

            try await laptopSync.syncNow()
            let (list, files) = try #require(try await laptop.files(milk))
            #expect(list == Self.list)
            #expect(files == [TaskFile(name: "receipt.pdf", blob: blob)])
            #expect(try await laptop.localBlobs().file(blob.hash) == nil, "listed, not downloaded until opened")
            let opened = try await #require(laptopSync.blobs).open(files[0].blob, scope: list)
            #expect(try Data(contentsOf: opened) == bytes, "byte-identical")
            #expect(try await laptop.localBlobs().file(blob.hash) == opened, "kept for the next open")

            // A detach on the laptop reaches the phone; both hold the same task.
            try await laptop.detach(milk, name: "receipt.pdf")
            try await laptopSync.syncNow()
            try await phoneSync.syncNow()
            #expect(try await phone.files(milk)?.files == [])
            #expect(try await phone.state(milk) == laptop.state(milk))
            #expect(try await phone.rejections().isEmpty)
            #expect(try await laptop.rejections().isEmpty)
        }
    }
}
