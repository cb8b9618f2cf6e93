import Foundation
import GRDB
import SyncEventStoreTestSupport
import SyncModels
import Testing

@testable import SyncEventStore

/// The contract of `StreamStateProjection`, with the small `LabelModel` domain: whichever way events reach
/// it (incrementally, by a rebuild, buffered for a flush, folded on arrival, through a crash at any step of
/// a page), the rows end byte for byte where logging every event ends.
@Suite struct StreamStateProjectionTests {
    struct InjectedFault: Error {}

    static func open(_ directory: TemporaryDirectory, _ name: String, cached: Int = 20_000, workers: Int = 2) throws
        -> EventStore
    {
        try EventStore(
            path: directory.path("\(name).sqlite"),
            projections: [StreamStateProjection(LabelModel(), workers: workers, cachedStreams: cached)])
    }

    /// A deterministic generator (a linear congruential one): the same pages on every run.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state
        }
    }

    /// Pages a server would send: events of two other replicas on 40 labels, renamed, counted, tagged and
    /// some deleted, with their seqs, in pages of 25.
    static func serverPages(_ directory: TemporaryDirectory, seed: UInt64 = 7) async throws -> [[Event]] {
        var random = Seeded(state: seed)
        let replicas = [
            try EventStore(path: directory.path("b.sqlite")), try EventStore(path: directory.path("c.sqlite")),
        ]
        var events: [StoredEvent] = []
        for round in 0..<10 {
            for replica in replicas {
                var drafts: [EventDraft] = []
                for _ in 0..<12 {
                    let label = "\(Int.random(in: 0..<40, using: &random))"
                    switch Int.random(in: 0..<10, using: &random) {
                    case 0..<3:
                        drafts.append(LabelEvents.named(label, "n\(round)-\(Int.random(in: 0..<99, using: &random))"))
                    case 3..<6: drafts.append(LabelEvents.counted(label, by: Int64.random(in: 1..<5, using: &random)))
                    case 6..<9: drafts.append(LabelEvents.tagged(label, "t\(Int.random(in: 0..<5, using: &random))"))
                    default: drafts.append(LabelEvents.deleted(label))
                    }
                }
                events += try await replica.append(drafts)
            }
        }
        return StreamStateContract.pages(of: events)
    }

    static func cursor(after page: [Event]) -> String { "after-\(page.last?.seq ?? 0)" }

    static func apply(_ pages: [[Event]], to store: EventStore, deferring: Bool, foldThrough: [Scope: Int64] = [:])
        async throws
    {
        // Each page follows the cursor the one before it stored (the store's own at first).
        var follows = try await store.cursor() ?? ""
        for page in pages {
            let outcome = try await store.applySyncResponse(
                acknowledged: [:], rejected: [:], pulled: page, cursor: cursor(after: page),
                deferProjections: deferring, foldThrough: foldThrough, follows: follows)
            #expect(!outcome.rewound)
            follows = cursor(after: page)
        }
        while try await !store.flushProjections(limit: 7) {}
        while try await !store.flushDeferredVersions(limit: 7) {}
    }

    static func head(_ pages: [[Event]]) -> [Scope: Int64] {
        var head: [Scope: Int64] = [:]
        for event in pages.joined() { head[event.scope] = max(head[event.scope] ?? 0, event.seq ?? 0) }
        return head
    }

    static func contract(_ directory: TemporaryDirectory) async throws -> StreamStateContract {
        StreamStateContract(table: "labels", pages: try await serverPages(directory), directory: directory) {
            path, cached, workers in
            try EventStore(
                path: path, projections: [StreamStateProjection(LabelModel(), workers: workers, cachedStreams: cached)])
        }
    }

    /// The contract (`StreamStateContract`): a rebuild from the log, on one thread or several, gives the rows
    /// that applying each page as it came gave.
    @Test func aRebuildEqualsIncrementalApplication() async throws {
        try await Self.contract(TemporaryDirectory()).rebuildEqualsIncrementalApplication()
    }

    /// Local edits and a rejection rolled back between pulled pages: a rebuild gives the same rows.
    @Test func aRebuildAfterLocalEditsAndARejectionEqualsIncrementalApplication() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await Self.serverPages(directory)
        let store = try Self.open(directory, "a")
        try await store.append([
            LabelEvents.named("1", "mine"), LabelEvents.counted("1", by: 10), LabelEvents.tagged("2", "local"),
        ])
        try await Self.apply(Array(pages.prefix(3)), to: store, deferring: false)
        let refused = try await store.append([LabelEvents.named("3", "refused"), LabelEvents.counted("3", by: 100)])
        try await store.markRejected(refused.map(\.event.id), code: "validation.failed", message: "no")
        try await Self.apply(Array(pages.dropFirst(3)), to: store, deferring: false)
        let incremental = try await LabelModel.rows(store)
        #expect(incremental.contains { $0.contains("label:1") })
        try await store.rebuildAll()
        #expect(try await LabelModel.rows(store) == incremental)
    }

    /// The contract: a crash (or a rollback) at every step of a page's transaction resumes exactly.
    @Test(arguments: EventStore.SyncResponseStep.allCases)
    func aCrashAtEveryStepOfAPageResumesExactly(step: EventStore.SyncResponseStep) async throws {
        try await Self.contract(TemporaryDirectory()).aCrashResumesExactly(at: step)
    }

    /// The contract: write-behind and folding on arrival give, byte for byte, the rows and snapshot copies of
    /// logging every event (and pruning it).
    @Test func writeBehindAndFoldingOnArrivalGiveTheRowsOfLoggingEveryEvent() async throws {
        try await Self.contract(TemporaryDirectory()).writeBehindAndFoldingOnArrivalGiveTheRowsOfLoggingEveryEvent()
    }

    /// A local edit after a snapshot copies the row into the snapshot table first: restoring the snapshot (a
    /// rejection's rollback, a reset) returns to it.
    @Test func aRowChangedAfterItsSnapshotKeepsTheSnapshotCopy() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await Self.serverPages(directory)
        let store = try Self.open(directory, "a")
        try await Self.apply(pages, to: store, deferring: false)
        try await store.prune(stablePoints: Self.head(pages))
        let pruned = try await LabelModel.rows(store)
        let streams = pruned.compactMap { $0.split(separator: "\"").dropFirst().first.map(String.init) }
        let stream = try #require(streams.first)
        let label = String(stream.dropFirst("label:".count))
        let edit = try await store.append([LabelEvents.named(label, "edited")])
        #expect(try await LabelModel.rows(store) != pruned)
        try await store.markRejected(edit.map(\.event.id), code: "validation.failed", message: "no")
        #expect(try await LabelModel.rows(store) == pruned)
    }

    /// The work of a long pull of `count` records, each with one event, buffered (`folded` false) or folded
    /// on arrival, in transactions of 100 events with a cache of half as many states, then flushed in pages of
    /// 100: the keys the cache's passes visited and the comparisons they made.
    static func cacheWork(records count: Int, folded: Bool) async throws -> Int {
        let directory = try TemporaryDirectory()
        let replica = try EventStore(path: directory.path("replica.sqlite"))
        var events: [StoredEvent] = []
        for start in stride(from: 0, to: count, by: 1000) {
            events += try await replica.append(
                (start..<min(start + 1000, count)).map { LabelEvents.named("\($0)", "n") })
        }
        let projection = StreamStateProjection(LabelModel(), workers: 1, cachedStreams: count / 2)
        let store = try EventStore(path: directory.path("device.sqlite"), projections: [projection])
        var follows = ""
        let pages = StreamStateContract.pages(of: events, size: 100)
        let head = Self.head(pages)
        for page in pages {
            _ = try await store.applySyncResponse(
                acknowledged: [:], rejected: [:], pulled: page, cursor: cursor(after: page), deferProjections: true,
                foldThrough: folded ? head : [:], follows: follows)
            follows = cursor(after: page)
        }
        #expect(store.hasBufferedProjections())
        while try await !store.flushProjections(limit: 100) {}
        #expect(!store.hasBufferedProjections())
        #expect(try await LabelModel.rows(store).count == count)
        // The streams' versions, deferred with the pages, are written in stream order too: new rows of
        // `streams` take rowids in the order they are written.
        while try await !store.flushDeferredVersions(limit: 100) {}
        let streams = try await store.database.read { db in
            try String.fetchAll(db, sql: "SELECT stream FROM streams ORDER BY rowid")
        }
        #expect(streams.count == count)
        let inOrder = streams == streams.sorted()
        #expect(inOrder, "the versions were written out of stream order")
        return projection.cache.work + store.deferredVersions.withLock { $0.work }
    }

    /// A long pull of n records costs the cache O(n log n) in all: no sort of every buffered record per
    /// flushed page, no pass over every cached state per transaction. From 1,000 records to 20,000 the work
    /// grows about 20 × log(20,000)/log(1,000) ≈ 29 times (a sort per page made it about 400), counted, not
    /// timed.
    @Test(arguments: [false, true])
    func aLongPullOfManyRecordsCostsTheCacheNLogN(folded: Bool) async throws {
        let small = try await Self.cacheWork(records: 1000, folded: folded)
        let large = try await Self.cacheWork(records: 20_000, folded: folded)
        #expect(small >= 1000)
        #expect(Double(large) / Double(small) < 40, "work \(small) for 1,000 records, \(large) for 20,000")
    }
}
