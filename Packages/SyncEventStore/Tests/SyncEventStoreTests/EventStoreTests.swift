import Foundation
import GRDB
import SyncEventStoreTestSupport
import SyncModels
import Testing

@testable import SyncEventStore

@Suite struct EventStoreTests {
    @Test func appendAssignsIdentityClocksAndVersionsAndAppliesProjectionsInTheSameTransaction() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        let first = try await store.append([title("note:1", "Milk"), tag("note:1", "food"), title("note:2", "Eggs")])
        #expect(first.map(\.event.streamVersion) == [1, 2, 1])
        #expect(first.map(\.event.dot.counter) == [1, 2, 3])
        #expect(first.allSatisfy { $0.event.id.isVersion7 && $0.event.dot.replica == store.replica })
        #expect(first.map(\.event.hlc) == first.map(\.event.hlc).sorted())
        #expect(first.map(\.status) == [.pending, .pending, .pending])
        let second = try await store.append([title("note:1", "Oat milk")])
        #expect(second[0].event.streamVersion == 3 && second[0].event.dot.counter == 4)
        #expect(second[0].event.hlc > first[2].event.hlc)
        #expect(try await TitleProjection.dump(store) == ["note:1=Oat milk", "note:2=Eggs", "note:1#food"])
        #expect(try await store.pendingEvents().count == 4)
    }

    @Test func insertedEventsCarryTheBytesTheLogHoldsWhichTheirValueIgnores() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"))
        let appended = try await store.append([title("note:1", "Milk \"2%\" / ü"), tag("note:1", "food")])
        let read = try await store.events(stream: "note:1")
        #expect(read == appended)
        #expect(Set(read) == Set(appended))
        for (written, readBack) in zip(appended, read) {
            #expect(written.payloadBytes != nil && readBack.payloadBytes == nil)
            let bytes = try await store.database.writer.read { db in
                try Data.fetchOne(
                    db, sql: "SELECT payload FROM events WHERE position = ?", arguments: [written.position])
            }
            #expect(written.withPayloadBytes { Data($0) } == bytes)
            #expect(readBack.withPayloadBytes { Data($0) } == bytes)
        }
        let other = try EventStore(path: directory.path("b.sqlite"))
        let remote = try await other.append([title("note:2", "theirs")])
        try await store.applyConfirmed(confirmed(remote, firstSeq: 1), cursor: "c")
        let pulled = try await store.events(stream: "note:2")
        #expect(pulled.map(\.event.id) == remote.map(\.event.id))
        #expect(pulled[0].withPayloadBytes { Data($0) } == remote[0].event.payload.canonicalData())
        // A changed event does not keep the bytes of the one it replaced.
        var changed = appended[0]
        changed.event.payload = remote[0].event.payload
        #expect(changed.withPayloadBytes { Data($0) } == remote[0].event.payload.canonicalData())
    }

    @Test func optimisticConcurrencyRefusesTheWholeAppend() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        try await store.append([title("note:1", "A", expecting: .noStream)])
        try await store.append([title("note:1", "B", expecting: .exactly(1))])
        await #expect(throws: EventStoreError.versionConflict(stream: "note:1", expected: .noStream, actual: 2)) {
            try await store.append([title("note:1", "C", expecting: .noStream)])
        }
        await #expect(throws: EventStoreError.versionConflict(stream: "note:1", expected: .exactly(1), actual: 2)) {
            try await store.append([title("note:9", "new"), title("note:1", "C", expecting: .exactly(1))])
        }
        #expect(try await store.pendingEvents().count == 2, "nothing of a refused append is written")
        #expect(try await TitleProjection.dump(store) == ["note:1=B"])
        // The next append still gets the next dot: refused appends leave no hole.
        #expect(try await store.append([title("note:1", "D")])[0].event.dot.counter == 3)
    }

    @Test func invalidDraftsAreRefused() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"))
        await #expect(throws: EventStoreError.self) {
            try await store.append([EventDraft(scope: "s", stream: "", type: "t", payload: .null)])
        }
        #expect(try await store.counts()[.pending] == 0)
    }

    @Test func projectionsCatchUpFromTheirCheckpointOnOpen() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("a.sqlite")
        do {
            let store = try EventStore(path: path)  // no projection yet
            try await store.append([title("note:1", "Milk"), tag("note:1", "food")])
        }
        do {
            let store = try EventStore(path: path, projections: [TitleProjection()])
            #expect(try await TitleProjection.dump(store) == ["note:1=Milk", "note:1#food"])
        }
        // The projection falls behind when a build without it writes, and catches up on the next open.
        do {
            let store = try EventStore(path: path)
            try await store.append([title("note:2", "Eggs")])
        }
        let store = try EventStore(path: path, projections: [TitleProjection()])
        #expect(try await TitleProjection.dump(store) == ["note:1=Milk", "note:2=Eggs", "note:1#food"])
        // A new version of the projection is rebuilt.
        try await store.database.writer.write { db in try db.execute(sql: "DELETE FROM titles") }
        let upgraded = try EventStore(path: path, projections: [TitleProjection(version: 2)])
        #expect(try await TitleProjection.dump(upgraded) == ["note:1=Milk", "note:2=Eggs", "note:1#food"])
    }

    @Test func rebuildEqualsIncremental() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        var random = SplitMix64(seed: 7)
        for round in 0..<50 {
            var drafts: [EventDraft] = []
            for _ in 0..<Int.random(in: 1...20, using: &random) {
                let stream = "note:\(Int.random(in: 0..<15, using: &random))"
                drafts.append(
                    Bool.random(using: &random)
                        ? title(stream, "t\(round)-\(Int.random(in: 0..<1000, using: &random))")
                        : tag(stream, "tag\(Int.random(in: 0..<6, using: &random))"))
            }
            try await store.append(drafts)
            if round % 10 == 9 {
                let pending = try await store.pendingEvents(limit: 30)
                try await store.applyConfirmed(confirmed(pending, firstSeq: Int64(round * 100)), cursor: "c\(round)")
            }
        }
        let incremental = try await TitleProjection.dump(store)
        #expect(incremental.count > 20)
        try await store.rebuild(projection: "titles")
        #expect(try await TitleProjection.dump(store) == incremental)
    }

    @Test func confirmedPagesDeduplicateAndKeepTheCursor() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        let local = try await store.append([title("note:1", "mine")])
        let otherReplica = try EventStore(path: directory.path("b.sqlite"))
        let remote = try await otherReplica.append([title("note:2", "theirs"), tag("note:1", "shared")])
        let page = confirmed(local + remote, firstSeq: 1)

        let result = try await store.applyConfirmed(page, cursor: "cursor-1")
        #expect(result == .init(inserted: 2, confirmedLocal: 1, alreadyKnown: 0))
        #expect(try await store.cursor() == "cursor-1")
        #expect(try await store.pendingEvents().isEmpty)
        let mine = try await store.events(stream: "note:1")
        #expect(mine.map(\.event.seq) == [1, 3] && mine.allSatisfy { $0.status == .confirmed })
        #expect(try await TitleProjection.dump(store) == ["note:1=mine", "note:2=theirs", "note:1#shared"])
        // The clock moved past what it received.
        #expect(store.clock.last > remote[1].event.hlc)

        let again = try await store.applyConfirmed(page, cursor: "cursor-1")
        #expect(again == .init(inserted: 0, confirmedLocal: 0, alreadyKnown: 3))
        #expect(try await store.counts() == [.pending: 0, .confirmed: 3, .rejected: 0])

        var broken = page[0]
        broken.seq = nil
        await #expect(throws: EventStoreError.self) { try await store.applyConfirmed([broken], cursor: "x") }
        #expect(try await store.cursor() == "cursor-1")
    }

    /// An event id is unique per scope, as on the server (`UNIQUE (scope, event_id)`): the same id pulled in a
    /// second scope is another event, the same id again in its scope is known, and a pending event still comes
    /// back confirmed by its id.
    @Test func eventIdsAreUniquePerScope() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        let local = try await store.append([title("note:1", "mine")])
        let otherReplica = try EventStore(path: directory.path("b.sqlite"))
        let remote = try await otherReplica.append([title("note:2", "theirs")])
        var elsewhere = confirmed(remote, firstSeq: 1)[0]
        elsewhere.scope = "team-2"
        elsewhere.stream = "note:3"
        let page = confirmed(local + remote, firstSeq: 1) + [elsewhere]
        let result = try await store.applyConfirmed(page, cursor: "c1")
        #expect(result == .init(inserted: 2, confirmedLocal: 1, alreadyKnown: 0))
        let again = try await store.applyConfirmed(page, cursor: "c2")
        #expect(again == .init(inserted: 0, confirmedLocal: 0, alreadyKnown: 3))
        #expect(try await store.counts() == [.pending: 0, .confirmed: 3, .rejected: 0])
        #expect(try await TitleProjection.dump(store) == ["note:1=mine", "note:2=theirs", "note:3=theirs"])
        let (tableSQL, pendingIndex) = try await store.database.writer.read { db in
            (
                try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'events'") ?? "",
                try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'events_pending_id'") ?? ""
            )
        }
        #expect(tableSQL.contains("UNIQUE (scope, event_id)") && !tableSQL.contains("event_id TEXT NOT NULL UNIQUE"))
        #expect(pendingIndex.contains("WHERE status = 'pending'"))
    }

    @Test func pushAcknowledgementsConfirmAtOnceAndThePullFillsInTheTime() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        let local = try await store.append([title("note:1", "a"), title("note:2", "b")])
        #expect(try await store.markConfirmed([local[0].event.id: 7]) == 1)
        #expect(try await store.pendingEvents().map(\.event.id) == [local[1].event.id])
        #expect(try await store.markConfirmed([local[0].event.id: 8]) == 0, "only pending events")
        let pulled = try await store.applyConfirmed(confirmed([local[0]], firstSeq: 7), cursor: "c")
        #expect(pulled == .init(inserted: 0, confirmedLocal: 0, alreadyKnown: 1))
        let event = try await store.events(stream: "note:1")[0].event
        #expect(event.seq == 7 && event.receivedAt != nil)
        try await store.resetCursor()
        #expect(try await store.cursor() == nil)
        #expect(try await store.pendingEvents().count == 1, "a reset keeps pending events")
    }

    @Test func rejectionRollsBackProjectionsAndStaysVisible() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        let accepted = try await store.append([title("note:1", "Milk"), tag("note:1", "food")])
        try await store.applyConfirmed(confirmed(accepted, firstSeq: 1), cursor: "c1")
        let refused = try await store.append([title("note:1", "Forbidden"), tag("note:1", "x"), title("note:2", "New")])
        let kept = try await store.append([tag("note:1", "dairy")])
        #expect(try await TitleProjection.dump(store).contains("note:1=Forbidden"))

        let changes = store.changes(of: "titles")
        let rolledBack = try await store.markRejected(
            refused.map(\.event.id), code: "validation.failed", message: "quota")
        #expect(rolledBack.count == 3)
        #expect(
            try await TitleProjection.dump(store) == ["note:1=Milk", "note:1#dairy", "note:1#food"],
            "the rejected events' effects are gone; later pending ones stay")
        let rejected = try await store.rejectedEvents()
        #expect(Set(rejected.map(\.event.id)) == Set(refused.map(\.event.id)))
        #expect(rejected.allSatisfy { $0.rejection == .init(code: "validation.failed", message: "quota") })
        #expect(try await store.pendingEvents().map(\.event.id) == kept.map(\.event.id))
        var iterator = changes.makeAsyncIterator()
        let change = await iterator.next()
        #expect(change?.kind == .rejected && change?.streams == ["note:1", "note:2"])

        // Rebuilds keep rejected events out.
        try await store.rebuild(projection: "titles")
        #expect(try await TitleProjection.dump(store) == ["note:1=Milk", "note:1#dairy", "note:1#food"])
        // Rejecting a confirmed event does nothing.
        #expect(try await store.markRejected([accepted[0].event.id], code: "x", message: "y").isEmpty)
    }

    @Test func observersHearAboutEveryCommit() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        var changes = store.changes().makeAsyncIterator()
        try await store.append([title("note:1", "a")])
        try await store.append([tag("note:2", "b")])
        #expect(await changes.next() == StoreChange(kind: .appended, streams: ["note:1"], projections: ["titles"]))
        #expect(await changes.next() == StoreChange(kind: .appended, streams: ["note:2"], projections: ["titles"]))
    }
}
