import Foundation
import GRDB
import SyncEngineTesting
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import SyncProtocol
import Testing

@testable import SyncEngine

/// A crash at any instant of applying one server answer (acknowledgements, rejections with their rollback,
/// the pulled page, the cursor) leaves the store exactly as it was before the answer, and syncing again
/// gives the state of a device that never crashed. The crash is `EventStore.syncResponseFault` throwing at
/// one step inside the transaction.
@Suite struct SyncResponseCrashTests {
    struct InjectedCrash: Error, CustomStringConvertible {
        var step: EventStore.SyncResponseStep
        var description: String { "injected crash at \(step)" }
    }

    /// Everything of a store that a sync answer may change.
    struct StoreState: Equatable {
        var counts: [SyncStatus: Int]
        var cursor: String?
        var projection: [String]
        var exported: [ExportedEvent]
        /// `store_meta` rows other than the HLC (replica, dot counter, cursor).
        var meta: [String]
        /// The last HLC stored: rolled back with the rest, but a device that synced at another time has
        /// another one.
        var hlc: String?
        var checkpoints: [String]

        static func read(_ store: EventStore, _ directory: TemporaryDirectory) async throws -> StoreState {
            let file = directory.url.appendingPathComponent("export-\(UUID().uuidString).jsonl.gz")
            try await store.export(to: file)
            let (meta, hlc, checkpoints) = try await store.database.writer.read { db in
                (
                    try String.fetchAll(
                        db, sql: "SELECT key || '=' || value FROM store_meta WHERE key != 'hlc' ORDER BY key"),
                    try String.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = 'hlc'"),
                    try String.fetchAll(
                        db,
                        sql: "SELECT name || '@' || position || 'v' || version FROM projection_checkpoint ORDER BY name"
                    )
                )
            }
            return StoreState(
                counts: try await store.counts(), cursor: try await store.cursor(),
                projection: try await TitleProjection.dump(store), exported: try EventStore.readExport(from: file),
                meta: meta, hlc: hlc, checkpoints: checkpoints)
        }
    }

    /// Device `a` about to sync an answer with every part: two of its three pending events accepted, one
    /// rejected (its rollback changes the projection), and a page holding events of device `b`.
    struct Scenario {
        let directory: TemporaryDirectory
        let server: InMemorySyncServer
        let a: SyncEngineTests.Replica
    }

    static func scenario() async throws -> Scenario {
        let directory = try TemporaryDirectory()
        let server = InMemorySyncServer(rule: { event in
            event.payload["title"]?.stringValue == "forbidden"
                ? EventRejection(ErrorCode(rawValue: "validation.failed"), "the quota is full") : nil
        })
        let a = try SyncEngineTests.replica(directory, "a", server: server)
        let b = try SyncEngineTests.replica(directory, "b", server: server)
        try await a.store.append([title("note:1", "a1"), tag("note:1", "first")])
        try await a.engine.syncNow()
        try await b.store.append([title("note:2", "from b"), tag("note:1", "b")])
        try await b.engine.syncNow()
        try await a.store.append([title("note:1", "a2"), title("note:3", "forbidden"), tag("note:3", "kept")])
        return Scenario(directory: directory, server: server, a: a)
    }

    /// A second device with `replica`'s exact database (same replica id and outbox), to sync without faults.
    static func copy(_ replica: SyncEngineTests.Replica, as name: String, _ scenario: Scenario) throws
        -> SyncEngineTests.Replica
    {
        let copy = try DatabaseQueue(path: scenario.directory.path("\(name).sqlite"))
        try replica.store.database.writer.backup(to: copy)
        try copy.close()
        return try SyncEngineTests.replica(scenario.directory, name, server: scenario.server)
    }

    /// Runs one sync of `replica` with a crash at `step`, which the engine reports as a store failure.
    static func syncCrashing(at step: EventStore.SyncResponseStep, _ replica: SyncEngineTests.Replica) async {
        await EventStore.$syncResponseFault.withValue({ reached in
            if reached == step { throw InjectedCrash(step: step) }
        }) {
            await #expect(
                throws: SyncFailure.permanent(code: "store.error", message: "injected crash at \(step)"),
                "the fault fired at \(step)"
            ) {
                try await replica.engine.syncNow()
            }
        }
    }

    /// Syncs the uncrashed copy and checks `replica` ends in the same state, then that both hold the whole
    /// answer.
    static func expectSameAsUncrashed(
        _ replica: SyncEngineTests.Replica, _ reference: SyncEngineTests.Replica, _ scenario: Scenario,
        _ step: EventStore.SyncResponseStep
    ) async throws {
        try await reference.engine.syncNow()
        let after = try await StoreState.read(replica.store, scenario.directory)
        var expected = try await StoreState.read(reference.store, scenario.directory)
        expected.hlc = after.hlc  // the clock follows the wall clock; everything else must be identical
        #expect(after == expected, "crash at \(step), then a sync: as if it never crashed")
        #expect(after.counts == [.pending: 0, .confirmed: 6, .rejected: 1])
        #expect(after.projection == ["note:1=a2", "note:2=from b", "note:1#b", "note:1#first", "note:3#kept"])
        #expect(
            try await replica.store.rejectedEvents().map(\.event.payload) == [.object(["title": .string("forbidden")])])
    }

    @Test(arguments: EventStore.SyncResponseStep.allCases)
    func aCrashAtAnyStepOfApplyingAnAnswerLeavesTheStoreAsBefore(step: EventStore.SyncResponseStep) async throws {
        let scenario = try await Self.scenario()
        let a = scenario.a
        let reference = try Self.copy(a, as: "reference", scenario)
        let before = try await StoreState.read(a.store, scenario.directory)
        #expect(try await StoreState.read(reference.store, scenario.directory) == before, "an exact copy")

        await Self.syncCrashing(at: step, a)
        #expect(try await StoreState.read(a.store, scenario.directory) == before, "crash at \(step): rolled back")
        #expect(await scenario.server.events(in: "team-1").count == 6, "the server committed the push")

        try await a.engine.syncNow()
        try await Self.expectSameAsUncrashed(a, reference, scenario, step)
    }

    @Test(arguments: EventStore.SyncResponseStep.allCases)
    func aCrashThenReopeningTheFileLeavesTheStoreAsBefore(step: EventStore.SyncResponseStep) async throws {
        let scenario = try await Self.scenario()
        let reference = try Self.copy(scenario.a, as: "reference", scenario)
        let before = try await StoreState.read(scenario.a.store, scenario.directory)

        await Self.syncCrashing(at: step, scenario.a)
        try scenario.a.store.database.writer.close()

        let reopened = try SyncEngineTests.replica(scenario.directory, "a", server: scenario.server)
        #expect(reopened.store.replica == scenario.a.store.replica, "the same file")
        #expect(try await StoreState.read(reopened.store, scenario.directory) == before, "crash at \(step)")
        try await reopened.store.rebuildAll()
        #expect(try await TitleProjection.dump(reopened.store) == before.projection, "projections match the log")

        try await reopened.engine.syncNow()
        try await Self.expectSameAsUncrashed(reopened, reference, scenario, step)
    }
}
