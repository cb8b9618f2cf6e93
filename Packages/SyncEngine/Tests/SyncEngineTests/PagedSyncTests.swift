import Foundation
import GRDB
import SyncEngineTesting
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import SyncProtocol
import Synchronization
import Testing

@testable import SyncEngine

/// A long pull (a new device, or one back from a week offline) is many pages, pipelined: the next request
/// travels while an answer is applied. A crash at any point of it (a request or answer lost, the process
/// dying mid-apply, or just after a page committed with the next one in flight) must resume exactly: the
/// device ends with the same log, projection, cursor and outbox as a device that was never interrupted.
@Suite struct PagedSyncTests {
    typealias Replica = SyncEngineTests.Replica
    typealias StoreState = SyncResponseCrashTests.StoreState

    /// Where the crash happens.
    enum Crash: Sendable, CustomStringConvertible {
        /// The request of round `round` never gets its answer (lost before the server, or the answer lost
        /// after the server committed it): the answer before it was applied, this one never is.
        case requestLost(round: Int)
        case responseLostAfterCommit(round: Int)
        /// The process dies inside the transaction applying the answer of round `round`, at `step`, while the
        /// next request is in flight.
        case midApply(round: Int, step: EventStore.SyncResponseStep)

        var description: String {
            switch self {
            case .requestLost(let round): "request \(round) lost"
            case .responseLostAfterCommit(let round): "answer \(round) lost after commit"
            case .midApply(let round, let step): "answer \(round) crashed at \(step)"
            }
        }
    }

    static let crashes: [Crash] =
        [0, 1, 3, 6].flatMap { round in
            [Crash.requestLost(round: round), .responseLostAfterCommit(round: round)]
        }
        + [0, 2, 5].flatMap { round in
            EventStore.SyncResponseStep.allCases.map { Crash.midApply(round: round, step: $0) }
        }

    /// A device whose pages start at 4 events and double while they come back full (the budget is never
    /// exceeded in tests), up to 32, and whose pushes go 5 events at a time.
    static func device(_ directory: TemporaryDirectory, _ name: String, server: InMemorySyncServer) throws -> Replica {
        let store = try EventStore(path: directory.path("\(name).sqlite"), projections: [TitleProjection()])
        let transport = InMemoryTransport(server: server)
        var configuration = SyncEngine.Configuration()
        configuration.pageSize = 4
        configuration.maxPageSize = 32
        configuration.applyBudget = .seconds(60)
        configuration.batch = PushBatchPolicy(maxEvents: 5)
        return Replica(
            store: store, transport: transport,
            engine: try SyncEngine(store: store, transport: transport, configuration: configuration))
    }

    /// A server holding `count` events another device pushed.
    static func server(holding count: Int, _ directory: TemporaryDirectory) async throws -> InMemorySyncServer {
        let server = InMemorySyncServer()
        let writer = try SyncEngineTests.replica(directory, "writer", server: server)
        try await writer.store.append((0..<count).map { title("note:\($0 % 9)", "w\($0)") })
        try await writer.engine.syncNow()
        return server
    }

    /// 150 events of another device on the server, and a device that wrote 12 events offline.
    static func scenario(_ directory: TemporaryDirectory) async throws -> (InMemorySyncServer, Replica) {
        let server = InMemorySyncServer()
        let writer = try SyncEngineTests.replica(directory, "writer", server: server)
        try await writer.store.append((0..<150).map { title("note:\($0 % 20)", "w\($0)") })
        try await writer.engine.syncNow()
        let device = try Self.device(directory, "device", server: server)
        try await device.store.append((0..<12).map { tag("note:\($0 % 5)", "d\($0)") })
        return (server, device)
    }

    @Test(arguments: crashes)
    func aCrashAnywhereInALongPullResumesExactly(crash: Crash) async throws {
        let directory = try TemporaryDirectory()
        let (server, device) = try await Self.scenario(directory)
        // The uninterrupted reference: an exact copy of the device's file, synced first.
        let copy = try DatabaseQueue(path: directory.path("reference.sqlite"))
        try device.store.database.writer.backup(to: copy)
        try copy.close()
        let reference = try Self.device(directory, "reference", server: server)
        try await reference.engine.syncNow()
        let expected = try await StoreState.read(reference.store, directory)
        #expect(expected.counts == [.pending: 0, .confirmed: 162, .rejected: 0])

        let answers = Mutex(0)
        switch crash {
        case .requestLost(let round):
            device.transport.inject(Array(repeating: .delay(.zero), count: round) + [.dropRequest])
            await #expect(throws: SyncFailure.self) { try await device.engine.syncNow() }
        case .responseLostAfterCommit(let round):
            device.transport.inject(Array(repeating: .delay(.zero), count: round) + [.dropResponse])
            await #expect(throws: SyncFailure.self) { try await device.engine.syncNow() }
        case .midApply(let round, let step):
            await EventStore.$syncResponseFault.withValue({ reached in
                let answer = answers.withLock { count in
                    if reached == .acknowledged { count += 1 }
                    return count - 1
                }
                if answer == round && reached == step { throw SyncResponseCrashTests.InjectedCrash(step: step) }
            }) {
                await #expect(throws: SyncFailure.self, "\(crash)") { try await device.engine.syncNow() }
            }
        }
        try await Self.reopenAndSync(device, as: "\(crash)", expecting: expected, server: server, directory) {
            try Self.device(directory, "device", server: server)
        }
    }

    /// The process dies (the file is all that is left): the reopened device holds part of the pull, and
    /// once synced it is exactly where the uninterrupted one is, with nothing pushed twice.
    static func reopenAndSync(
        _ device: Replica, as crash: String, expecting expected: StoreState, server: InMemorySyncServer,
        _ directory: TemporaryDirectory, reopen: () throws -> Replica
    ) async throws {
        try device.store.database.writer.close()
        let reopened = try reopen()
        let resumed = try await StoreState.read(reopened.store, directory)
        #expect(resumed.counts[.confirmed]! < 162, "\(crash): the crash stopped the pull part way")

        try await reopened.engine.syncNow()
        var after = try await StoreState.read(reopened.store, directory)
        after.hlc = expected.hlc
        #expect(after == expected, "\(crash), reopened and synced: as if it never crashed")
        #expect(await server.events(in: "team-1").count == 162, "\(crash): nothing pushed twice")
    }

    /// A device that asks for marks every 3 events and whose transactions shrink to the first mark past 2
    /// events (no transaction fits a zero budget), while its pages grow to 64 events: each answer is applied
    /// in several transactions.
    static func markedDevice(
        _ directory: TemporaryDirectory, _ name: String, server: InMemorySyncServer,
        onRound: (@Sendable (SyncRound) -> Void)? = nil
    ) throws -> Replica {
        let store = try EventStore(path: directory.path("\(name).sqlite"), projections: [TitleProjection()])
        let transport = InMemoryTransport(server: server)
        var configuration = SyncEngine.Configuration()
        configuration.pageSize = 8
        configuration.minPageSize = 2
        configuration.maxPageSize = 64
        configuration.markEvery = 3
        configuration.applyBudget = .zero
        configuration.batch = PushBatchPolicy(maxEvents: 5)
        configuration.onRound = onRound
        return Replica(
            store: store, transport: transport,
            engine: try SyncEngine(store: store, transport: transport, configuration: configuration))
    }

    /// A crash between two transactions of one answer, or inside one (at each step), leaves the store at the
    /// end of the last transaction that committed, the cursor at its mark: reopened and synced, the device is
    /// exactly where one that never crashed is, with nothing pushed twice.
    @Test(
        arguments: [1, 4, 9].flatMap { transaction in EventStore.SyncResponseStep.allCases.map { (transaction, $0) } })
    func aCrashBetweenTheTransactionsOfAMarkedPageResumesExactly(transaction: Int, step: EventStore.SyncResponseStep)
        async throws
    {
        let directory = try TemporaryDirectory()
        let (server, device) = try await Self.scenario(directory)
        try device.store.database.writer.close()
        let copy = try DatabaseQueue(path: directory.path("reference.sqlite"))
        try DatabaseQueue(path: directory.path("device.sqlite")).backup(to: copy)
        try copy.close()
        let rounds = Mutex<[SyncRound]>([])
        let reference = try Self.markedDevice(directory, "reference", server: server) { round in
            rounds.withLock { $0.append(round) }
        }
        try await reference.engine.syncNow()
        let expected = try await StoreState.read(reference.store, directory)
        #expect(expected.counts == [.pending: 0, .confirmed: 162, .rejected: 0])
        let log = rounds.withLock { $0 }
        #expect(log.contains { $0.transactions > 1 }, "answers were applied in several transactions")
        #expect(log.map(\.pageLimit).max() == 64)
        #expect(log.reduce(0) { $0 + $1.inserted } == 150)

        let marked = try Self.markedDevice(directory, "device", server: server)
        let transactions = Mutex(0)
        await EventStore.$syncResponseFault.withValue({ reached in
            let current = transactions.withLock { count in
                if reached == .acknowledged { count += 1 }
                return count
            }
            if current == transaction && reached == step { throw SyncResponseCrashTests.InjectedCrash(step: step) }
        }) {
            await #expect(throws: SyncFailure.self) { try await marked.engine.syncNow() }
        }
        try await Self.reopenAndSync(
            marked, as: "transaction \(transaction) crashed at \(step)", expecting: expected, server: server, directory
        ) { try Self.markedDevice(directory, "device", server: server) }
    }

    /// Marks are cursors: a replica that reads many scopes (a long cursor) asks for fewer of them, so that
    /// they never weigh much against the page; none when a page fits between two, or when turned off.
    @Test func marksAreSpacedByTheCursorsLength() throws {
        var cursor = ScopeCursor()
        for index in 0..<1_000 { cursor.advance(try Scope("team-\(index)"), to: 1_000_000 + Int64(index)) }
        let long = cursor.encoded
        #expect(long.utf8.count > 20_000)
        #expect(SyncEngine.markSpacing(100, limit: 5_000, cursor: nil) == 100)
        #expect(SyncEngine.markSpacing(100, limit: 5_000, cursor: "eyJ0ZWFtLTEiOjE2Mn0") == 100)
        let spaced = try #require(SyncEngine.markSpacing(100, limit: 5_000, cursor: long))
        #expect(spaced == long.utf8.count / 20 && 5_000 / spaced <= 5)
        #expect(SyncEngine.markSpacing(100, limit: 100, cursor: nil) == nil)
        #expect(SyncEngine.markSpacing(100, limit: 500, cursor: long) == nil)
        #expect(SyncEngine.markSpacing(0, limit: 5_000, cursor: nil) == nil)
    }

    @Test func theNextRequestTravelsWhileAnAnswerIsApplied() async throws {
        let directory = try TemporaryDirectory()
        let server = try await Self.server(holding: 100, directory)

        let order = Mutex<[String]>([])
        let store = try EventStore(path: directory.path("device.sqlite"), projections: [TitleProjection()])
        let transport = ObservedTransport(InMemoryTransport(server: server)) { order.withLock { $0.append("sent") } }
        var configuration = SyncEngine.Configuration()
        configuration.pageSize = 10
        configuration.maxPageSize = 10
        configuration.onRound = { _ in order.withLock { $0.append("applied") } }
        let engine = try SyncEngine(store: store, transport: transport, configuration: configuration)
        try await engine.syncNow()

        // 100 events in pages of 10: the first answer says there is more, ..., the eleventh is empty.
        let log = order.withLock { $0 }
        #expect(log.count == 2 * 10, "ten requests and ten answers applied")
        #expect(
            Array(log.prefix(3)) == ["sent", "sent", "applied"],
            "the second request left before the first answer was applied")
        #expect(log.last == "applied")
        #expect(try await store.counts() == [.pending: 0, .confirmed: 100, .rejected: 0])
    }

    /// Records every request before passing it on.
    final class CapturingTransport: SyncTransport {
        let inner: InMemoryTransport
        let requests = Mutex<[SyncRequest]>([])

        init(_ inner: InMemoryTransport) { self.inner = inner }

        func sync(_ request: SyncRequest) async throws(SyncFailure) -> TransportExchange {
            requests.withLock { $0.append(request) }
            return try await inner.sync(request)
        }
    }

    @Test func whileEditsMadeOfflineWaitTheDeviceVouchesOnlyForWhatItKnewWhenItMadeThem() async throws {
        let directory = try TemporaryDirectory()
        let server = try await Self.server(holding: 30, directory)
        let transport = CapturingTransport(InMemoryTransport(server: server))
        let store = try EventStore(path: directory.path("offline.sqlite"), projections: [TitleProjection()])
        var configuration = SyncEngine.Configuration()
        configuration.pageSize = 4
        configuration.maxPageSize = 4
        configuration.batch = PushBatchPolicy(maxEvents: 3)
        let engine = try SyncEngine(store: store, transport: transport, configuration: configuration)
        try await engine.syncNow()
        let knew = try #require(try await store.cursor())
        // Offline: 12 edits against what the device knew, while others write 40 more events.
        try await store.append((0..<12).map { tag("note:\($0 % 5)", "offline \($0)") })
        let writer = try SyncEngineTests.replica(directory, "writer-2", server: server)
        try await writer.store.append((0..<40).map { title("note:\($0 % 9)", "later \($0)") })
        try await writer.engine.syncNow()
        transport.requests.withLock { $0.removeAll() }

        try await engine.syncNow()
        let requests = transport.requests.withLock { $0 }
        let holding = requests.filter { $0.acknowledged != nil }
        #expect(holding.count >= 4, "12 pending events go 3 at a time")
        #expect(holding.allSatisfy { $0.acknowledged == knew })
        #expect(holding.contains { $0.cursor != knew }, "the cursor moved on while the edits waited")
        #expect(try await store.acknowledgedCursor() == nil)
    }

    @Test func eachRoundSaysHowMuchIsLeftToPull() async throws {
        let directory = try TemporaryDirectory()
        let server = try await Self.server(holding: 100, directory)
        let rounds = Mutex<[SyncRound]>([])
        let store = try EventStore(path: directory.path("progress.sqlite"), projections: [TitleProjection()])
        var configuration = SyncEngine.Configuration()
        configuration.pageSize = 10
        configuration.maxPageSize = 10
        configuration.onRound = { round in rounds.withLock { $0.append(round) } }
        let engine = try SyncEngine(
            store: store, transport: InMemoryTransport(server: server), configuration: configuration)
        #expect(engine.status.remainingToPull == nil)
        try await engine.syncNow()
        let log = rounds.withLock { $0 }
        #expect(log.map(\.remaining) == stride(from: 90, through: 0, by: -10).map { $0 })
        #expect(engine.status.remainingToPull == 0)
    }

    @Test func pagesGrowWhileTheyComeBackFullAndFastAndNotOtherwise() async throws {
        let directory = try TemporaryDirectory()
        let server = try await Self.server(holding: 200, directory)

        func pageLimits(budget: Duration, name: String) async throws -> [Int] {
            let limits = Mutex<[Int]>([])
            let store = try EventStore(path: directory.path("\(name).sqlite"), projections: [TitleProjection()])
            var configuration = SyncEngine.Configuration()
            configuration.pageSize = 4
            configuration.maxPageSize = 32
            configuration.applyBudget = budget
            configuration.onRound = { round in limits.withLock { $0.append(round.pageLimit) } }
            let engine = try SyncEngine(
                store: store, transport: InMemoryTransport(server: server), configuration: configuration)
            try await engine.syncNow()
            #expect(try await store.counts()[.confirmed] == 200)
            return limits.withLock { $0 }
        }
        // Each size is decided as the answer before it arrives, from how full it came back and how long the
        // apply before it took.
        let growing = try await pageLimits(budget: .seconds(60), name: "fast")
        // The second request leaves before anything was applied: it keeps the first size.
        #expect(Array(growing.prefix(6)) == [4, 4, 8, 16, 32, 32])
        #expect(growing.max() == 32)
        // No apply fits in a zero budget: pages stay at the smallest size.
        let shrinking = try await pageLimits(budget: .zero, name: "slow")
        #expect(Set(shrinking) == [4])
        #expect(shrinking.count == 50)
    }

    @Test func theJournalStaysWithinItsBoundsByCountAndByAge() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("journal.sqlite"))
        let now = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        let journal = try SyncJournal(
            database: store.database, bounds: SyncJournal.Bounds(maxEntries: 250, maxAge: .seconds(3600)),
            now: { now.withLock { $0 } })
        // Many cycles' worth of entries, one a second: the count bound holds.
        for index in 0..<2_000 {
            await journal.record("pull.ok", "entry \(index)")
            now.withLock { $0 += 1 }
        }
        let count = try await journal.count()
        #expect(count <= 250 + Int(SyncJournal.trimInterval) && count >= 250, "\(count) entries")
        #expect(try await journal.entries(limit: 1).last?.detail == "entry 1999", "the newest kept")
        // Two hours later, entries a minute apart: everything older than an hour goes at the next trims.
        now.withLock { $0 += 7_200 }
        for index in 0..<200 {
            await journal.record("pull.ok", "late \(index)")
            now.withLock { $0 += 60 }
        }
        let entries = try await journal.entries(limit: 10_000)
        let cutoff = now.withLock { $0 }.addingTimeInterval(-3600 - 60 * Double(SyncJournal.trimInterval))
        #expect(entries.allSatisfy { $0.at >= cutoff }, "no entry older than the age bound plus one trim interval")
        #expect(entries.allSatisfy { $0.detail.hasPrefix("late") })
        #expect(entries.count < 200)
    }
}

/// A transport that calls `sent` as each request leaves.
final class ObservedTransport: SyncTransport {
    let inner: any SyncTransport
    let sent: @Sendable () -> Void

    init(_ inner: any SyncTransport, sent: @escaping @Sendable () -> Void) {
        self.inner = inner
        self.sent = sent
    }

    func sync(_ request: SyncRequest) async throws(SyncFailure) -> TransportExchange {
        sent()
        return try await inner.sync(request)
    }
}
