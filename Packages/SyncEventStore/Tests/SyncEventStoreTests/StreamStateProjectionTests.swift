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

    /// The table with `changed`, then the snapshot copies: everything the projection stores.
    static func stored(_ store: EventStore) async throws -> [String] {
        try await LabelModel.rows(store)
            + store.database.read { db in
                try Row.fetchAll(db, sql: "SELECT stream, changed FROM labels ORDER BY stream").map { "changed \($0)" }
                    + Row.fetchAll(db, sql: "SELECT stream, hex(state) FROM labels_snapshot ORDER BY stream").map {
                        "copy \($0)"
                    }
            }
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
        let all = confirmed(events, firstSeq: 1)
        return stride(from: 0, to: all.count, by: 25).map { Array(all[$0..<min($0 + 25, all.count)]) }
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

    /// Local edits, pulled pages, a rejection rolled back: a rebuild from the log gives the rows that
    /// applying each write as it came gave.
    @Test func aRebuildEqualsIncrementalApplication() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await Self.serverPages(directory)
        let store = try Self.open(directory, "a")
        let local = try await store.append([
            LabelEvents.named("1", "mine"), LabelEvents.counted("1", by: 10), LabelEvents.tagged("2", "local"),
        ])
        try await Self.apply(Array(pages.prefix(3)), to: store, deferring: false)
        let refused = try await store.append([LabelEvents.named("3", "refused"), LabelEvents.counted("3", by: 100)])
        try await store.markRejected(refused.map(\.event.id), code: "validation.failed", message: "no")
        try await Self.apply(Array(pages.dropFirst(3)), to: store, deferring: false)
        let incremental = try await LabelModel.rows(store)
        #expect(incremental.count > 20)
        #expect(incremental.contains { $0.contains("label:1") })
        _ = local
        try await store.rebuildAll()
        #expect(try await LabelModel.rows(store) == incremental)
        // Replayed from the log's rows on one thread and on several, split by record: the same rows.
        for workers in [1, 4] {
            let copy = try Self.open(directory, "a", workers: workers)
            try await copy.rebuildAll()
            #expect(try await LabelModel.rows(copy) == incremental)
        }
    }

    /// A crash at every step of a page's transaction (and a rollback there, with the same process going on)
    /// leaves the rows as before the page; applying the page again ends where one clean run ends.
    @Test(arguments: EventStore.SyncResponseStep.allCases)
    func aCrashAtEveryStepOfAPageResumesExactly(step: EventStore.SyncResponseStep) async throws {
        let directory = try TemporaryDirectory()
        let pages = try await Self.serverPages(directory)
        let reference = try Self.open(directory, "reference")
        try await Self.apply(pages, to: reference, deferring: false)
        for deferring in [false, true] {
            let name = "device-\(deferring)"
            var store = try Self.open(directory, name)
            try await Self.apply(Array(pages.prefix(4)), to: store, deferring: deferring)
            let before = try await Self.stored(store)
            let page = pages[4]
            await #expect(throws: InjectedFault.self) {
                try await EventStore.$syncResponseFault.withValue({ if $0 == step { throw InjectedFault() } }) {
                    try await store.applySyncResponse(
                        acknowledged: [:], rejected: [:], pulled: page, cursor: Self.cursor(after: page),
                        deferProjections: deferring, follows: Self.cursor(after: pages[3]))
                }
            }
            #expect(try await Self.stored(store) == before, "the rollback leaves the rows as they were")
            // Half the time the process goes on; otherwise it ends and the file is opened again.
            if deferring { store = try Self.open(directory, name) }
            try await Self.apply(Array(pages.dropFirst(4)), to: store, deferring: deferring)
            #expect(try await LabelModel.rows(store) == LabelModel.rows(reference))
        }
    }

    /// Write-behind (every page buffered, written by small flushes) and folding on arrival (every page folded,
    /// then purged) give, byte for byte, the rows and snapshot copies of logging every event and pruning it.
    @Test func writeBehindAndFoldingOnArrivalGiveTheRowsOfLoggingEveryEvent() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await Self.serverPages(directory)
        let head = Self.head(pages)

        let logged = try Self.open(directory, "logged")
        try await Self.apply(pages, to: logged, deferring: false)
        let buffered = try Self.open(directory, "buffered")
        try await Self.apply(pages, to: buffered, deferring: true)
        #expect(try await Self.stored(buffered) == Self.stored(logged))

        // Past the cache's capacity the pages are written with themselves: the same rows.
        let small = try Self.open(directory, "small", cached: 3)
        try await Self.apply(pages, to: small, deferring: true)
        #expect(try await Self.stored(small) == Self.stored(logged))

        try await logged.prune(stablePoints: head)
        let pruned = try await Self.stored(logged)
        #expect(pruned.contains { $0.hasPrefix("[stream:\"label:") })
        for deferring in [true, false] {
            let folded = try Self.open(directory, "folded-\(deferring)")
            try await Self.apply(pages, to: folded, deferring: deferring, foldThrough: head)
            #expect(try await folded.hasFoldedToPurge())
            try await folded.purgeFolded(step: 9)
            #expect(try await Self.stored(folded) == pruned)
            // The snapshot is the state: a rebuild gives it back.
            try await folded.rebuildAll()
            #expect(try await Self.stored(folded) == pruned)
        }
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
}
