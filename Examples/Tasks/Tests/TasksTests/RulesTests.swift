import Foundation
import SyncCRDT
import SyncModels
import TasksModel
import TasksServer
import Testing

/// The rules a replica checks alone (`TaskRules`) and the server's open-task limit (`OpenTaskLedger`), as
/// pure decisions.
@Suite struct RulesTests {
    static let list: Scope = "groceries"

    static func entry(_ id: TaskID, _ delivery: Delivery, list: Scope = list) -> OpenTaskLedger.Entry {
        OpenTaskLedger.Entry(
            list: list, stream: id.stream, type: delivery.payload.type.rawValue, payload: delivery.payload.json)
    }

    @Test func payloadsMustSayWhatTheirTypeSays() {
        var device = Device(1)
        let id = TaskID()
        let created = device.create("Milk")
        #expect(TaskRules.violation(type: "task.created", stream: id.stream, payload: created.payload.json) == nil)
        #expect(TaskRules.violation(type: "note.created", stream: "x", payload: .null) == nil, "not this domain's")
        #expect(TaskRules.violation(type: "task.created", stream: "task:1", payload: created.payload.json) != nil)
        let shouting = "task:" + id.description.uppercased()
        #expect(TaskRules.violation(type: "task.created", stream: shouting, payload: created.payload.json) != nil)
        #expect(TaskRules.violation(type: "task.renamed", stream: id.stream, payload: .object([:])) != nil)
        #expect(TaskRules.violation(type: "task.titled", stream: id.stream, payload: .object([:])) != nil)
        // A completion's operation under a reopen's type.
        let complete = device.complete()
        #expect(TaskRules.violation(type: "task.reopened", stream: id.stream, payload: complete.payload.json) != nil)
        let empty = device.edit { state, replica in .titled(.init(op: state.title.assign("", replica: replica))) }
        #expect(TaskRules.violation(empty.payload) != nil)
        let spaced = device.tag("two words")
        #expect(TaskRules.violation(spaced.payload) != nil)
        let mismatched = device.edit { state, replica in
            .tagged(.init(tag: "a", op: state.tags.add("b", replica: replica)))
        }
        #expect(TaskRules.violation(mismatched.payload) != nil)
    }

    @Test func aListHoldsAtMostLimitOpenTasks() {
        var ledger = OpenTaskLedger(limit: 2)
        var devices = (0..<3).map { Device(UInt64($0 + 1)) }
        let ids = (0..<3).map { _ in TaskID() }
        let creations = (0..<3).map { index in Self.entry(ids[index], devices[index].create("t\(index)")) }
        #expect(ledger.walk(creations) == [2: TaskRules.openLimitMessage(limit: 2)])
        #expect(ledger.open[Self.list] == 2)
        // Another list has its own count.
        var other = Device(9)
        #expect(ledger.walk([Self.entry(TaskID(), other.create("x"), list: "work")]).isEmpty)
        // Completing one makes room; reopening it past the limit is refused once the room is taken.
        #expect(ledger.walk([Self.entry(ids[0], devices[0].complete())]).isEmpty)
        #expect(ledger.open[Self.list] == 1)
        var late = Device(4)
        let fourth = TaskID()
        #expect(ledger.walk([Self.entry(fourth, late.create("t3"))]).isEmpty)
        let reopen = Self.entry(ids[0], devices[0].reopen())
        #expect(ledger.walk([reopen]) == [0: TaskRules.openLimitMessage(limit: 2)])
        #expect(ledger.tasks[.init(list: Self.list, stream: ids[0].stream)]?.isOpen == false, "refused: no change")
        // Deleting one makes room again, and the same reopen goes through.
        #expect(ledger.walk([Self.entry(fourth, late.edit { _, _ in .deleted(.init()) })]).isEmpty)
        #expect(ledger.walk([reopen]).isEmpty)
        #expect(ledger.open[Self.list] == 2)
    }

    @Test func aReopenThatMissedACompletionOpensNothing() {
        var ledger = OpenTaskLedger(limit: 1)
        var phone = Device(1)
        var laptop = Device(2)
        let id = TaskID()
        let created = phone.create("Milk")
        let done = phone.complete()
        laptop.receive([created, done])
        let again = phone.complete()
        let reopen = laptop.reopen()
        #expect(ledger.walk([created, done, again, reopen].map { Self.entry(id, $0) }).isEmpty)
        #expect(ledger.tasks[.init(list: Self.list, stream: id.stream)]?.isOpen == false)
        #expect(ledger.open[Self.list] == 0)
    }

    @Test func everyEventOfARefusedTaskIsRefused() {
        var ledger = OpenTaskLedger(limit: 0)
        var device = Device(1)
        let id = TaskID()
        let refusals = ledger.walk(
            [device.create("Milk"), device.tag("dairy"), device.retitle("Oat milk")].map {
                Self.entry(id, $0)
            })
        #expect(refusals.keys.sorted() == [0, 1, 2])
        #expect(refusals[0] == TaskRules.openLimitMessage(limit: 0))
        #expect(refusals[1]?.contains("never accepted") == true)
        #expect(ledger.tasks.isEmpty && (ledger.open[Self.list] ?? 0) == 0)
    }

    @Test func theDomainReadsItsLimitFromTheEnvironmentThenTheFlag() throws {
        let none = try TasksServerOptions.parse([])
        #expect(try none.domain(environment: [:]).openTaskLimit == 100)
        #expect(try none.domain(environment: ["SYNC_OPEN_TASK_LIMIT": "7"]).openTaskLimit == 7)
        let options = try TasksServerOptions.parse(["--open-task-limit", "3"])
        #expect(try options.domain(environment: ["SYNC_OPEN_TASK_LIMIT": "7"]).openTaskLimit == 3)
        #expect(throws: (any Error).self) {
            try none.domain(environment: ["SYNC_OPEN_TASK_LIMIT": "x"])
        }
        let domain = TasksServerDomain()
        #expect(domain.isCommutative(type: "task.titled") && !domain.isCommutative(type: "note.created"))
        #expect(domain.rules.map(\.name) == ["open-task-limit"])
    }
}
