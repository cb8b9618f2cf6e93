import Foundation
import GRDB
import NotesDomain
import NotesStore
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import SyncTestSupport
import Testing

/// Folding on arrival (`ArrivalFoldingProjection`, `EventStore.applySyncResponse(…foldThrough:…)`): pulled
/// events every other replica has seen go into the notes' state and snapshot, never into the log. Whatever
/// happens meanwhile (a crash with folded events in memory, a rolled-back transaction, a local edit and its
/// rejection, a pull that folds only part of the history), the device ends where logging the same pages and
/// pruning them at the stable point ends.
@Suite struct FoldOnArrivalTests {
    typealias Pages = [[Event]]

    /// The stable point of every scope the pages bring, at `fraction` of the last seq.
    static func foldThrough(_ pages: Pages, fraction: Double = 1) -> [Scope: Int64] {
        var last: [Scope: Int64] = [:]
        for event in pages.joined() { last[event.scope] = max(last[event.scope] ?? 0, event.seq ?? 0) }
        return last.mapValues { Int64(Double($0) * fraction) }
    }

    static func cursor(after page: [Event]) -> String { "after-\(page.last?.seq ?? 0)" }

    /// Applies `pages` as the engine does: each after the cursor the page before left.
    @discardableResult
    static func fold(
        _ pages: some Sequence<[Event]>, into store: EventStore, through: [Scope: Int64], deferring: Bool = true,
        follows first: String = ""
    ) async throws -> [EventStore.SyncResponseOutcome] {
        var follows = first
        var outcomes: [EventStore.SyncResponseOutcome] = []
        for page in pages {
            outcomes.append(
                try await store.applySyncResponse(
                    acknowledged: [:], rejected: [:], pulled: page, cursor: cursor(after: page),
                    deferProjections: deferring, foldThrough: through, follows: follows))
            follows = cursor(after: page)
        }
        return outcomes
    }

    /// Everything held in memory written, as the engine does at the end of a cycle.
    static func settle(_ store: EventStore) async throws {
        while try await !store.flushProjections(limit: 50) {}
        while try await !store.flushDeferredVersions(limit: 50) {}
    }

    static func open(_ directory: TemporaryDirectory, _ name: String) throws -> EventStore {
        try EventStore(path: directory.path("\(name).sqlite"), projections: [NotesProjection()])
    }

    /// A device that logged the pages and pruned them at `through`.
    static func reference(_ pages: Pages, _ directory: TemporaryDirectory, through: [Scope: Int64]) async throws
        -> EventStore
    {
        let store = try open(directory, "reference-\(UUID().uuidString)")
        try await BufferedProjectionTests.apply(pages, to: store, deferring: false)
        try await store.prune(stablePoints: through)
        return store
    }

    /// The notes table row by row (states included) and the snapshot copies.
    static func rows(_ store: EventStore) async throws -> [String] {
        try await store.database.writer.read { db in
            try Row.fetchAll(
                db, sql: "SELECT id, scope, title, body, deleted, hex(state), changed FROM notes ORDER BY id"
            ).map { "\($0)" }
                + Row.fetchAll(db, sql: "SELECT id, hex(state) FROM notes_snapshot ORDER BY id").map { "copy \($0)" }
        }
    }

    static func logged(_ store: EventStore) async throws -> Int {
        try await store.database.writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM events") ?? 0 }
    }

    @Test(arguments: [true, false])
    func foldedPagesEndWhereLoggingAndPruningEnds(deferring: Bool) async throws {
        let directory = try TemporaryDirectory()
        let pages = try await BufferedProjectionTests.serverPages(directory)
        let through = Self.foldThrough(pages)
        let store = try Self.open(directory, "device")
        let outcomes = try await Self.fold(pages, into: store, through: through, deferring: deferring)
        #expect(outcomes.allSatisfy { !$0.rewound && $0.pulled.inserted == 0 })
        #expect(outcomes.reduce(0) { $0 + $1.pulled.folded } == pages.joined().count)
        try await Self.settle(store)
        #expect(try await store.hasFoldedToPurge())
        let purge = try await store.purgeFolded(step: 17)
        #expect(try await !store.hasFoldedToPurge())
        #expect(purge.streams == 120 && purge.retired > 0, "every note visited, the deleted ones retired")

        let reference = try await Self.reference(pages, directory, through: through)
        #expect(try await Self.logged(store) == 0, "the log holds nothing folded")
        #expect(try await Self.rows(store) == Self.rows(reference), "the notes and their snapshots, byte for byte")
        #expect(try await BufferedProjectionTests.streams(store) == BufferedProjectionTests.streams(reference))
        #expect(try await store.cursor() == Self.cursor(after: pages[pages.count - 1]))
        // The snapshot is the state: restoring it and replaying the (empty) log gives it back.
        let before = try await Self.rows(store)
        try await store.rebuildAll()
        #expect(try await Self.rows(store) == before)
    }

    /// Folding only up to a stable point below the head: the events above it are logged, and applied after
    /// what was folded of their notes; a rebuild, and later a prune, end where the reference does.
    @Test func eventsAboveTheStablePointAreLoggedOnTopOfTheFoldedState() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await BufferedProjectionTests.serverPages(directory)
        let through = Self.foldThrough(pages, fraction: 0.6)
        let store = try Self.open(directory, "device")
        try await Self.fold(pages, into: store, through: through)
        try await Self.settle(store)
        let above = pages.joined().filter { ($0.seq ?? 0) > (through[$0.scope] ?? 0) }
        #expect(try await Self.logged(store) == above.count && !above.isEmpty)

        let unpruned = try Self.open(directory, "unpruned")
        try await BufferedProjectionTests.apply(pages, to: unpruned, deferring: false)
        let state = try await BufferedProjectionTests.table(unpruned)
        #expect(try await BufferedProjectionTests.table(store) == state)
        try await store.rebuildAll()
        #expect(try await BufferedProjectionTests.table(store) == state, "snapshot + log replays to the same state")

        // The pull reached the head: the folded notes that took no logged event are purged; then a prune at
        // the head folds the rest, as on the reference.
        try await store.purgeFolded()
        let head = Self.foldThrough(pages)
        try await store.prune(stablePoints: head)
        let reference = try await Self.reference(pages, directory, through: head)
        #expect(try await Self.rows(store) == Self.rows(reference))
    }

    /// A process that ends with folded events in memory loses them: opening the file again moves the cursor
    /// back to the one stored before the first of them, and pulling again from there ends as the reference.
    @Test func aCrashWithFoldedEventsInMemoryResumesFromBeforeThem() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await BufferedProjectionTests.serverPages(directory)
        let through = Self.foldThrough(pages)
        do {
            let store = try Self.open(directory, "device")
            // The first two pages written at once, the next three held in memory.
            try await Self.fold(pages[0..<2], into: store, through: through, deferring: false)
            try await Self.fold(pages[2..<5], into: store, through: through, follows: Self.cursor(after: pages[1]))
            #expect(store.hasBufferedProjections())
            #expect(try await store.cursor() == Self.cursor(after: pages[4]))
            #expect(
                try await store.acknowledgedCursor() == Self.cursor(after: pages[1]),
                "the replica vouches only for what a crash leaves")
        }
        // The crash: the file opened again by a new process (the store before it gone, with its lock).
        let store = try Self.open(directory, "device")
        #expect(try await store.cursor() == Self.cursor(after: pages[1]))
        #expect(try await store.acknowledgedCursor() == nil)
        let resumed = try await Self.fold(
            pages[2...], into: store, through: through, follows: Self.cursor(after: pages[1]))
        #expect(resumed.allSatisfy { !$0.rewound })
        try await Self.settle(store)
        try await store.purgeFolded()
        let reference = try await Self.reference(pages, directory, through: through)
        #expect(try await Self.rows(store) == Self.rows(reference))
        #expect(try await BufferedProjectionTests.streams(store) == BufferedProjectionTests.streams(reference))
    }

    /// A transaction that rolls back drops what the cache held, folded events included: the next page finds
    /// the cursor moved back (`rewound`) and is not applied; pulling again from the stored cursor ends as the
    /// reference.
    @Test func aRollbackLosingFoldedEventsRewindsTheCursor() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await BufferedProjectionTests.serverPages(directory)
        let through = Self.foldThrough(pages)
        let store = try Self.open(directory, "device")
        try await Self.fold(pages[0..<1], into: store, through: through, deferring: false)
        try await Self.fold(pages[1..<4], into: store, through: through, follows: Self.cursor(after: pages[0]))
        // A page whose transaction fails after the projection took it.
        await #expect(throws: CrashFault.self) {
            try await EventStore.$syncResponseFault.withValue({ step in
                if step == .beforeCursor { throw CrashFault() }
            }) {
                try await Self.fold(
                    pages[4..<5], into: store, through: through, follows: Self.cursor(after: pages[3]))
            }
        }
        let outcome = try await Self.fold(
            pages[4..<5], into: store, through: through, follows: Self.cursor(after: pages[3]))
        #expect(outcome.first?.rewound == true && outcome.first?.pulled.folded == 0)
        #expect(try await store.cursor() == Self.cursor(after: pages[0]))
        let again = try await Self.fold(
            pages[1...], into: store, through: through, follows: Self.cursor(after: pages[0]))
        #expect(again.allSatisfy { !$0.rewound })
        try await Self.settle(store)
        try await store.purgeFolded()
        let reference = try await Self.reference(pages, directory, through: through)
        #expect(try await Self.rows(store) == Self.rows(reference))
        #expect(try await BufferedProjectionTests.streams(store) == BufferedProjectionTests.streams(reference))
    }

    struct CrashFault: Error {}

    /// A local edit of a note holding folded events in memory: they are written first, so the snapshot the
    /// edit copies holds them; the server refusing the edit rolls the note back to exactly that.
    @Test func aLocalEditKeepsFoldedEventsInItsNotesSnapshot() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await BufferedProjectionTests.serverPages(directory)
        let through = Self.foldThrough(pages)
        let store = try Self.open(directory, "device")
        let client = NotesClient(store: store)
        try await Self.fold(pages, into: store, through: through)
        #expect(store.hasBufferedProjections())
        let unpruned = try Self.open(directory, "unpruned")
        try await BufferedProjectionTests.apply(pages, to: unpruned, deferring: false)
        let live = try await unpruned.database.writer.read { db in
            try String.fetchOne(db, sql: "SELECT id FROM notes WHERE deleted = 0 AND created = 1 ORDER BY id")
        }
        let id = try #require(live.flatMap { NoteID($0) })

        try await client.setTitle(id, "edited while folded events wait")
        #expect(try await client.note(id)?.title == "edited while folded events wait")
        // Not foldable any more: its next events are logged.
        let projection = try #require(store.projections.first as? NotesProjection)
        #expect(try await store.database.writer.write { db in try projection.foldable([id.stream], in: db) }.isEmpty)
        try await Self.settle(store)
        let pending = try await store.pendingEvents().map(\.event.id)
        try await store.markRejected(pending, code: "validation.failed", message: "refused")
        #expect(try await BufferedProjectionTests.table(store) == BufferedProjectionTests.table(unpruned))
        try await store.rebuildAll()
        #expect(try await BufferedProjectionTests.table(store) == BufferedProjectionTests.table(unpruned))
    }

    /// Only other replicas' events of notes whose row is their own snapshot fold: this replica's own events
    /// (one pending here coming back, say) and notes with events in the log go the usual way.
    @Test func ownEventsAndNotesWithLoggedEventsAreNotFolded() async throws {
        let directory = try TemporaryDirectory()
        let store = try Self.open(directory, "device")
        let client = NotesClient(store: store)
        let mine = try await client.create(scope: "team-1", title: "mine")
        let own = try await store.pendingEvents()
        let other = try NotesClient.open(path: directory.path("other.sqlite"))
        var seq: Int64 = 0
        try await NotesClientTests.exchange(client, other, seq: &seq)
        let theirs = try await other.create(scope: "team-1", title: "theirs")
        try await other.setTitle(mine, "theirs on mine")
        let remote = try await other.store.pendingEvents()
        let page = confirmed(own + remote, firstSeq: 1)
        let outcome = try await store.applySyncResponse(
            acknowledged: [:], rejected: [:], pulled: page, cursor: "c1", foldThrough: ["team-1": 100])
        #expect(outcome.pulled.confirmedLocal == own.count, "its own event is confirmed, not folded")
        #expect(outcome.pulled.inserted == 1, "the edit of a note with a logged event is logged")
        #expect(outcome.pulled.folded == remote.count - 1)
        #expect(try await client.note(theirs)?.title == "theirs")
        #expect(try await client.note(mine)?.title == "theirs on mine")
        #expect(try await Self.logged(store) == own.count + 1)
    }
}
