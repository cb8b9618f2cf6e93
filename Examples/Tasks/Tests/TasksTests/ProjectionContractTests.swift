import Foundation
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import SyncTestSupport
import TasksDomain
import Testing

/// The stack's contract of the per-stream state projection (`StreamStateContract`), with the tasks model:
/// whichever way a server's pages reach a device (one by one, by a rebuild, written behind, folded on arrival,
/// through a crash at any step of a page), its `tasks` rows end byte for byte where logging every event ends.
@Suite struct ProjectionContractTests {
    /// A deterministic generator (a linear congruential one): the same workload on every run.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state
        }
    }

    /// Two devices editing 12 tasks in two lists, offline: created, retitled, completed and reopened, tagged
    /// and untagged, subtasks added and removed, some deleted. Their events, as a server would send them.
    static func pages(_ directory: TemporaryDirectory) async throws -> [[Event]] {
        var random = Seeded(state: 11)
        var events: [StoredEvent] = []
        for device in ["phone", "laptop"] {
            let tasks = try TasksClient.open(path: directory.path("\(device).sqlite"))
            var ids: [TaskID] = []
            for index in 0..<6 {
                ids.append(try await tasks.create(list: index % 2 == 0 ? "home" : "work", title: "\(device) \(index)"))
            }
            for step in 0..<60 {
                let id = ids[Int.random(in: 0..<ids.count, using: &random)]
                guard let row = try await tasks.task(id), !row.deleted else { continue }
                switch Int.random(in: 0..<10, using: &random) {
                case 0, 1: try await tasks.retitle(id, "\(device) title \(step)")
                case 2: try await tasks.complete(id)
                case 3: if row.done { try await tasks.reopen(id) }
                case 4: try await tasks.tag(id, "t\(step % 4)")
                case 5: if let tag = row.tags.first { try await tasks.untag(id, tag) }
                case 6, 7: _ = try await tasks.addSubtask(id, title: "sub \(step)", atEnd: step % 2 == 0)
                case 8: if let subtask = row.subtasks.first { try await tasks.removeSubtask(id, subtask: subtask.id) }
                default: if step % 3 == 0 { try await tasks.delete(id) }
                }
            }
            events += try await tasks.store.pendingEvents()
        }
        return StreamStateContract.pages(of: events, size: 20)
    }

    static func contract() async throws -> StreamStateContract {
        let directory = try TemporaryDirectory()
        return StreamStateContract(
            table: "tasks", keyColumn: "id", pages: try await pages(directory), directory: directory
        ) { path, cached, workers in
            try EventStore(
                path: path, projections: [TasksProjection(TasksStateModel(), workers: workers, cachedStreams: cached)])
        }
    }

    @Test func aRebuildEqualsIncrementalApplication() async throws {
        try await Self.contract().rebuildEqualsIncrementalApplication()
    }

    @Test(arguments: EventStore.SyncResponseStep.allCases)
    func aCrashAtEveryStepOfAPageResumesExactly(step: EventStore.SyncResponseStep) async throws {
        try await Self.contract().aCrashResumesExactly(at: step)
    }

    @Test func writeBehindAndFoldingOnArrivalGiveTheRowsOfLoggingEveryEvent() async throws {
        try await Self.contract().writeBehindAndFoldingOnArrivalGiveTheRowsOfLoggingEveryEvent()
    }
}
