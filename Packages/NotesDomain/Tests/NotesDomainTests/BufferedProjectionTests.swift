import Foundation
import GRDB
import NotesDomain
import NotesStore
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import SyncTestSupport
import Testing

/// Write-behind of the notes projection (`BufferingProjection`): pages applied with `deferProjections` reach
/// the log at once and the notes table only when flushed. Whatever happens in between (a crash, a partial
/// flush, a rollback, another process writing, a local edit, more notes than the cache holds), the table
/// ends exactly as a rebuild from the log makes it, and a local command always starts from the newest state.
@Suite struct BufferedProjectionTests {
    /// A log of another device (2,000 events of every kind over 120 notes) as the server would send it, in
    /// pages.
    static func serverPages(_ directory: TemporaryDirectory, pageSize: Int = 250) async throws -> [[Event]] {
        let path = directory.path("source-\(UUID().uuidString).sqlite")
        _ = try await NotesRebuildTests.makeLog(at: path, seed: 7)
        let source = try EventStore(path: path)
        let events = confirmed(try await source.pendingEvents(), firstSeq: 1)
        return stride(from: 0, to: events.count, by: pageSize).map {
            Array(events[$0..<min($0 + pageSize, events.count)])
        }
    }

    static func table(_ store: EventStore) async throws -> Data {
        try await store.database.writer.read { db in try NotesProjection.exportState(in: db) }
    }

    /// The table as a rebuild from the same file's log makes it.
    static func rebuilt(_ store: EventStore, _ directory: TemporaryDirectory) async throws -> Data {
        let copyPath = directory.path("rebuilt-\(UUID().uuidString).sqlite")
        let copy = try DatabaseQueue(path: copyPath)
        try store.database.writer.backup(to: copy)
        try copy.close()
        let rebuilt = try EventStore(path: copyPath, projections: [NotesProjection()])
        try await rebuilt.rebuildAll()
        return try await table(rebuilt)
    }

    static func checkpoint(_ store: EventStore) async throws -> Int64 {
        try await store.database.writer.read { db in
            try Int64.fetchOne(db, sql: "SELECT position FROM projection_checkpoint WHERE name = 'notes'") ?? -1
        }
    }

    static func lastPosition(_ store: EventStore) async throws -> Int64 {
        try await store.database.writer.read { db in
            try Int64.fetchOne(db, sql: "SELECT max(position) FROM events") ?? 0
        }
    }

    static func apply(_ pages: some Sequence<[Event]>, to store: EventStore, deferring: Bool = true) async throws {
        for page in pages {
            try await store.applySyncResponse(
                acknowledged: [:], rejected: [:], pulled: page, cursor: "after-\(page.last?.seq ?? 0)",
                deferProjections: deferring)
        }
    }

    /// The `streams` table: each stream's version and scope.
    static func streams(_ store: EventStore) async throws -> [String: String] {
        try await store.database.writer.read { db in
            Dictionary(
                try Row.fetchAll(db, sql: "SELECT stream, version, scope FROM streams").map {
                    ($0[0], "\($0[1] as Int64) \(($0[2] as String?) ?? "-")")
                },
                uniquingKeysWith: { a, _ in a })
        }
    }

    /// Pulled pages applied with deferred saves write the streams' versions only when the projections flush;
    /// meanwhile a local edit builds on the pulled version, and after the flush `streams` is what a device
    /// that wrote them at once holds.
    @Test func pulledVersionsWaitForTheFlushAndLocalEditsBuildOnThem() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await Self.serverPages(directory)
        let store = try EventStore(path: directory.path("device.sqlite"), projections: [NotesProjection()])
        let reference = try EventStore(path: directory.path("reference.sqlite"), projections: [NotesProjection()])
        try await Self.apply(pages, to: store)
        try await Self.apply(pages, to: reference, deferring: false)
        #expect(try await Self.streams(store).isEmpty, "no version written yet")
        #expect(store.hasDeferredWrites())

        // The most edited note that is still there, edited on both.
        let versions = try await reference.database.writer.read { db in
            try Row.fetchAll(db, sql: "SELECT stream, version FROM streams ORDER BY version DESC").map {
                ($0[0] as String, $0[1] as Int64)
            }
        }
        var edited: (NoteID, Int64)?
        for (stream, version) in versions {
            guard let id = NoteID(stream), try await NotesClient(store: reference).note(id) != nil else { continue }
            edited = (id, version)
            break
        }
        let (id, version) = try #require(edited)
        #expect(version > 1)
        for device in [store, reference] {
            try await NotesClient(store: device).setTitle(id, "edited here")
            #expect(try await device.pendingEvents().last?.event.streamVersion == version + 1)
        }

        while try await !store.flushProjections(limit: 25) {}
        #expect(store.hasDeferredWrites(), "the notes are written; the versions come after them")
        var versionFlushes = 0
        while try await !store.flushDeferredVersions(limit: 25) { versionFlushes += 1 }
        #expect(versionFlushes >= 4, "120 notes' versions in transactions of 25")
        #expect(!store.hasDeferredWrites())
        #expect(try await Self.streams(store) == Self.streams(reference))
        #expect(try await Self.table(store) == Self.rebuilt(store, directory))
    }

    /// Versions deferred when the process ends are written from the log when the file opens again; a rolled
    /// back page leaves memory unsure, and the flush then reads them from the log.
    @Test func deferredVersionsSurviveACrashAndARollback() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await Self.serverPages(directory)
        let path = directory.path("device.sqlite")
        let reference = try EventStore(path: directory.path("reference.sqlite"), projections: [NotesProjection()])
        try await Self.apply(pages.prefix(4), to: reference, deferring: false)
        do {
            let store = try EventStore(path: path, projections: [NotesProjection()])
            try await Self.apply(pages.prefix(4), to: store)
            #expect(store.hasDeferredWrites())
            // The process ends here, versions unwritten.
        }
        let reopened = try EventStore(path: path, projections: [NotesProjection()])
        #expect(!reopened.hasDeferredWrites())
        #expect(try await Self.streams(reopened) == Self.streams(reference))

        try await Self.apply(pages[4..<6], to: reopened)
        struct Abort: Error {}
        await EventStore.$syncResponseFault.withValue({ step in if step == .beforeCursor { throw Abort() } }) {
            await #expect(throws: Abort.self) { try await Self.apply([pages[6]], to: reopened) }
        }
        try await Self.apply(pages[6...], to: reopened)
        while try await !reopened.flushProjections(limit: 25) {}
        while try await !reopened.flushDeferredVersions(limit: 25) {}
        try await Self.apply(pages[4...], to: reference, deferring: false)
        #expect(!reopened.hasDeferredWrites())
        #expect(try await Self.streams(reopened) == Self.streams(reference))
        #expect(try await Self.table(reopened) == Self.rebuilt(reopened, directory))
    }

    @Test func bufferedPagesReachTheTableOnlyWhenFlushedAndThenExactly() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await Self.serverPages(directory)
        let store = try EventStore(path: directory.path("device.sqlite"), projections: [NotesProjection()])
        try await Self.apply(pages, to: store)
        #expect(store.hasBufferedProjections())
        #expect(try await Self.checkpoint(store) == 0, "the checkpoint stays where the table holds everything")
        let rows = try await store.database.writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM notes")
        }
        #expect(rows == 0, "nothing was written to the table yet")

        var changes = store.changes().makeAsyncIterator()
        var flushes = 0
        while try await !store.flushProjections(limit: 25) { flushes += 1 }
        #expect(flushes >= 4, "120 notes in transactions of 25")
        #expect(!store.hasBufferedProjections())
        #expect(try await Self.checkpoint(store) == Self.lastPosition(store))
        #expect(try await Self.table(store) == Self.rebuilt(store, directory))
        let change = await changes.next()
        #expect(change?.kind == .projected && change?.streams.count == 25)
    }

    @Test func aCrashLosesOnlyMemoryAfterAnyNumberOfPartialFlushes() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await Self.serverPages(directory)
        for partialFlushes in [0, 1, 3] {
            let path = directory.path("crash-\(partialFlushes).sqlite")
            do {
                let store = try EventStore(path: path, projections: [NotesProjection()])
                try await Self.apply(pages.prefix(5), to: store)
                for _ in 0..<partialFlushes { try await store.flushProjections(limit: 10) }
                #expect(store.hasBufferedProjections())
                // The process ends here: buffered notes are lost with its memory.
            }
            let reopened = try EventStore(path: path, projections: [NotesProjection()])
            #expect(!reopened.hasBufferedProjections())
            #expect(try await Self.checkpoint(reopened) == Self.lastPosition(reopened))
            #expect(try await Self.table(reopened) == Self.rebuilt(reopened, directory))
            try await Self.apply(pages.dropFirst(5), to: reopened)
            try await reopened.flushProjections()
            #expect(try await Self.table(reopened) == Self.rebuilt(reopened, directory))
        }
    }

    @Test func aLocalEditStartsFromTheBufferedStateAndIsReadBackAtOnce() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("device.sqlite"), projections: [NotesProjection()])
        let client = NotesClient(store: store)
        let id = try await client.create(scope: "team-1", title: "mine", body: "hello")
        // Another device retitled the note and appended to its body; the page arrives in the middle of a pull.
        let otherPath = directory.path("other.sqlite")
        let other = try NotesClient.open(path: otherPath)
        let source = try await store.pendingEvents()
        try await other.store.applySyncResponse(
            acknowledged: [:], rejected: [:], pulled: confirmed(source, firstSeq: 1), cursor: "c1")
        try await other.setTitle(id, "theirs")
        try await other.setBody(id, "hello world")
        let theirs = confirmed(try await other.store.pendingEvents(), firstSeq: Int64(source.count + 1))
        try await Self.apply([theirs], to: store)
        #expect(store.hasBufferedProjections())
        #expect(try await client.note(id)?.title == "mine", "the table still shows the note as it was")

        try await client.setBody(id, "hello world!")
        let view = try #require(try await client.note(id))
        #expect(view.title == "theirs")
        #expect(view.body == "hello world!", "the edit was made on the buffered body, not the stale row")
        #expect(!store.hasBufferedProjections(), "the only buffered note was written with the edit")
        #expect(try await Self.checkpoint(store) == Self.lastPosition(store))
        #expect(try await Self.table(store) == Self.rebuilt(store, directory))
    }

    @Test func aRollbackOrAnotherProcessDropsBufferedStateAndTheTableCatchesUp() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await Self.serverPages(directory)
        let path = directory.path("device.sqlite")
        let store = try EventStore(path: path, projections: [NotesProjection()])
        try await Self.apply(pages.prefix(2), to: store)
        struct Abort: Error {}
        await EventStore.$syncResponseFault.withValue({ step in if step == .beforeCursor { throw Abort() } }) {
            await #expect(throws: Abort.self) { try await Self.apply([pages[2]], to: store) }
        }
        #expect(!store.hasBufferedProjections(), "the rollback dropped what was buffered")
        // A flush now has nothing in memory to write: it catches the table up from the log instead.
        #expect(try await store.flushProjections())
        #expect(try await Self.checkpoint(store) == Self.lastPosition(store))
        #expect(try await Self.table(store) == Self.rebuilt(store, directory))
        try await Self.apply(pages[2..<4], to: store)
        // Another process writes to the file while this one holds buffered notes.
        let other = try NotesClient.open(path: path)
        try await other.create(scope: "team-1", title: "from another process")
        try await Self.apply(pages[4..<6], to: store)
        try await store.flushProjections()
        #expect(try await Self.checkpoint(store) == Self.lastPosition(store))
        #expect(try await Self.table(store) == Self.rebuilt(store, directory))
    }

    @Test func pastTheCacheNotesAreWrittenWithTheirPage() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await Self.serverPages(directory)
        let store = try EventStore(
            path: directory.path("device.sqlite"), projections: [NotesProjection(cachedNotes: 30)])
        try await Self.apply(pages, to: store)
        try await store.flushProjections()
        #expect(try await Self.checkpoint(store) == Self.lastPosition(store))
        #expect(try await Self.table(store) == Self.rebuilt(store, directory))
    }

    @Test func aRejectionWhileBufferingRollsBackOnTopOfTheNewestState() async throws {
        let directory = try TemporaryDirectory()
        let pages = try await Self.serverPages(directory)
        let store = try EventStore(path: directory.path("device.sqlite"), projections: [NotesProjection()])
        let client = NotesClient(store: store)
        try await Self.apply(pages.prefix(3), to: store)
        let note = try #require(pages[0].first.flatMap { NoteID($0.stream) })
        try await client.addTag(note, "refused")
        let refused = try #require(try await store.pendingEvents().last)
        try await Self.apply([pages[3]], to: store)
        #expect(store.hasBufferedProjections())
        try await store.applySyncResponse(
            acknowledged: [:], rejected: [refused.event.id: .init(code: "rule", message: "no")], pulled: pages[4],
            cursor: "c", deferProjections: true)
        #expect(try await client.note(note)?.tags.contains("refused") == false)
        try await store.flushProjections()
        #expect(try await Self.table(store) == Self.rebuilt(store, directory))
    }
}
