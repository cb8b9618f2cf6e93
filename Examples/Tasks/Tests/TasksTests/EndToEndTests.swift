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

    @Test func twoDevicesEditOfflineAndConvergeWithTheDomainsRules() async throws {
        guard let url = ProcessInfo.processInfo.environment["SYNC_DATABASE_URL"], !url.isEmpty else {
            Issue.record(
                """
                SYNC_DATABASE_URL is not set: this test needs a PostgreSQL server. From Examples/Tasks, run \
                `../../scripts/with-postgres.sh swift test`, which starts a throwaway one and sets it.
                """)
            return
        }
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
}
