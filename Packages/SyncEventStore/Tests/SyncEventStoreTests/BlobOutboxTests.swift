import Foundation
import GRDB
import SyncEventStoreTestSupport
import SyncModels
import Testing

@testable import SyncEventStore

/// The outbox rule of attachments (issue 46, `EventStore+Blobs.swift`): an event is pushed only once the
/// server holds every blob it refers to, and a `blob.missing` rejection puts the blob back in the queue while
/// the device still has its bytes.
@Suite struct BlobOutboxTests {
    static let blob = BlobReference(
        hash: try! BlobHash(String(repeating: "ab", count: 32)), size: 5, type: "text/plain")

    /// A store holding three pending events: one without blobs, one referring to `blob`, one without.
    struct Outbox {
        let directory: TemporaryDirectory
        let store: EventStore
        let events: [StoredEvent]

        init(scope: Scope = "team-1") async throws {
            directory = try TemporaryDirectory()
            store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
            var attachment = title("note:2", "with a blob", scope: scope)
            attachment.blobs = [BlobOutboxTests.blob]
            events =
                try await store.append([title("note:1", "before", scope: scope)])
                + store.append([attachment])
                + store.append([title("note:3", "after", scope: scope)])
        }

        var pendingIDs: [EventID] {
            get async throws {
                try await store.outboxSnapshot(after: 0, limit: 100).pending.map(\.event.id)
            }
        }

        func setUploaded(_ uploaded: Bool) async throws {
            try await store.database.writer.write { db in
                try db.execute(sql: "UPDATE local_blobs SET uploaded = ?", arguments: [uploaded])
            }
        }

        func recordFile(present: Bool) async throws {
            try await store.database.writer.write { db in
                try db.execute(
                    sql: "INSERT INTO blob_files (hash, size, present) VALUES (?, ?, ?)",
                    arguments: [BlobOutboxTests.blob.hash.hex, BlobOutboxTests.blob.size, present])
            }
        }

        /// The `local_blobs` rows as `scope/hash=uploaded`.
        func localBlobs() async throws -> [String] {
            try await store.database.writer.read { db in
                try String.fetchAll(
                    db, sql: "SELECT scope || '/' || hash || '=' || uploaded FROM local_blobs ORDER BY scope, hash")
            }
        }
    }

    @Test func anEventWaitsForItsBlobAndHoldsBackTheEventsAfterIt() async throws {
        let outbox = try await Outbox()
        #expect(try await outbox.pendingIDs == [outbox.events[0].event.id], "only the event before the blob")
        #expect(try await outbox.localBlobs() == ["team-1/\(Self.blob.hash.hex)=0"], "the blob joined the queue")
        // Every event stays pending in the log: the cut is only what a push reads.
        #expect(try await outbox.store.pendingEvents().count == 3)
        // A read that starts past the held event still stops there.
        #expect(
            try await outbox.store.outboxSnapshot(after: outbox.events[1].position, limit: 100).pending.isEmpty)
        try await outbox.setUploaded(true)
        #expect(try await outbox.pendingIDs == outbox.events.map(\.event.id))
    }

    @Test func aBlobAlreadyUploadedToTheScopeHoldsNothingButAnotherScopeWaitsForItsOwnUpload() async throws {
        let outbox = try await Outbox()
        try await outbox.setUploaded(true)
        var again = title("note:4", "same blob", scope: "team-1")
        again.blobs = [Self.blob]
        var elsewhere = title("note:5", "same blob, other scope", scope: "team-2")
        elsewhere.blobs = [Self.blob]
        let appended = try await outbox.store.append([again, elsewhere])
        #expect(
            try await outbox.pendingIDs == (outbox.events + [appended[0]]).map(\.event.id),
            "held from the event of team-2 on")
        #expect(
            try await outbox.localBlobs() == [
                "team-1/\(Self.blob.hash.hex)=1", "team-2/\(Self.blob.hash.hex)=0",
            ])
    }

    @Test func aBlobMissingRejectionKeepsTheEventAndRequeuesItsBlobWhenTheBytesAreHere() async throws {
        let outbox = try await Outbox()
        try await outbox.recordFile(present: true)
        try await outbox.setUploaded(true)
        let held = outbox.events[1].event.id
        let rolledBack = try await outbox.store.applySyncResponse(
            acknowledged: [outbox.events[0].event.id: 1],
            rejected: [held: .init(code: "blob.missing", message: "the server has no such blob")],
            pulled: [], cursor: "c1"
        ).rolledBack
        #expect(rolledBack.isEmpty)
        let stored = try #require(try await outbox.store.events(stream: "note:2").first)
        #expect(stored.status == .pending && stored.rejection == nil)
        #expect(try await outbox.localBlobs() == ["team-1/\(Self.blob.hash.hex)=0"], "back in the upload queue")
        #expect(try await outbox.store.counts() == [.pending: 2, .confirmed: 1, .rejected: 0])
        #expect(try await outbox.pendingIDs.isEmpty, "held again until the blob is uploaded again")
        try await outbox.setUploaded(true)
        #expect(try await outbox.pendingIDs == [held, outbox.events[2].event.id])
    }

    @Test func aBlobMissingRejectionThroughMarkRejectedAlsoRequeues() async throws {
        let outbox = try await Outbox()
        try await outbox.recordFile(present: true)
        try await outbox.setUploaded(true)
        let held = outbox.events[1].event.id
        let rolledBack = try await outbox.store.markRejected([held], code: "blob.missing", message: "gone")
        #expect(rolledBack.isEmpty)
        #expect(try await outbox.store.events(stream: "note:2").first?.status == .pending)
        #expect(try await outbox.localBlobs() == ["team-1/\(Self.blob.hash.hex)=0"])
        #expect(try await outbox.pendingIDs == [outbox.events[0].event.id])
    }

    @Test(arguments: [false, true])
    func aBlobMissingRejectionWithoutTheBytesRejectsTheEvent(fileRecorded: Bool) async throws {
        let outbox = try await Outbox()
        // The bytes are not here: never recorded, or evicted (`present = 0`).
        if fileRecorded { try await outbox.recordFile(present: false) }
        try await outbox.setUploaded(true)
        let held = outbox.events[1].event.id
        let rolledBack = try await outbox.store.applySyncResponse(
            acknowledged: [:], rejected: [held: .init(code: "blob.missing", message: "gone")], pulled: [],
            cursor: nil
        ).rolledBack
        #expect(rolledBack.map(\.event.id) == [held])
        let stored = try #require(try await outbox.store.events(stream: "note:2").first)
        #expect(stored.status == .rejected && stored.rejection?.code == "blob.missing")
        #expect(try await TitleProjection.dump(outbox.store) == ["note:1=before", "note:3=after"], "rolled back")
        #expect(try await outbox.localBlobs() == ["team-1/\(Self.blob.hash.hex)=1"], "not queued again")
        #expect(try await outbox.pendingIDs == [outbox.events[0].event.id, outbox.events[2].event.id])
    }

    @Test func anotherRejectionCodeRejectsEvenWithTheBytesHere() async throws {
        let outbox = try await Outbox()
        try await outbox.recordFile(present: true)
        try await outbox.setUploaded(true)
        let held = outbox.events[1].event.id
        let rolledBack = try await outbox.store.markRejected([held], code: "validation.failed", message: "no")
        #expect(rolledBack.map(\.event.id) == [held])
        #expect(try await outbox.localBlobs() == ["team-1/\(Self.blob.hash.hex)=1"])
    }
}
