import Crypto
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

/// The engine with a blob queue (issue 46): `syncNow()` uploads the blobs pending events wait for, then
/// pushes them; an event whose blob is not on the server is never pushed.
@Suite struct EngineBlobTests {
    struct Replica {
        let directory: TemporaryDirectory
        let store: EventStore
        let server: InMemorySyncServer
        let blobServer: FakeBlobServer
        let local: LocalBlobs
        let engine: SyncEngine

        init(server: InMemorySyncServer = InMemorySyncServer()) throws {
            directory = try TemporaryDirectory()
            store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
            self.server = server
            blobServer = FakeBlobServer(chunkSize: 64)
            local = try LocalBlobs(store: store)
            let blobs = BlobSync(
                local: local, transport: blobServer,
                backoff: BackoffPolicy(base: .milliseconds(1), cap: .milliseconds(2)), attempts: 2)
            engine = try SyncEngine(store: store, transport: InMemoryTransport(server: server), blobs: blobs)
        }

        /// Appends a title, an event attaching `content`, and another title; returns the three event ids.
        func appendAroundAnAttachment(_ content: Data) async throws -> (ids: [EventID], blob: BlobReference) {
            let reference = try await local.add(data: content, type: "image/png")
            var attachment = title("note:2", "attached")
            attachment.blobs = [reference]
            let stored =
                try await store.append([title("note:1", "before")]) + store.append([attachment])
                + store.append([title("note:3", "after")])
            return (stored.map(\.event.id), reference)
        }
    }

    final class Refusals: Sendable {
        let count = Mutex(0)
        /// Counts one more refusal asked for; returns how many were.
        func next() -> Int {
            count.withLock { count in
                count += 1
                return count
            }
        }
    }

    @Test func anAttachmentIsPushedOnlyAfterItsBlobIsUploaded() async throws {
        let replica = try Replica()
        let content = LocalBlobsTests.bytes(100)  // 2 chunks
        let (ids, blob) = try await replica.appendAroundAnAttachment(content)
        #expect(try await replica.store.outboxSnapshot(after: 0, limit: 100).pending.map(\.event.id) == [ids[0]])
        #expect(replica.blobServer.holds("team-1", blob.hash) == nil)

        try await replica.engine.syncNow()
        #expect(replica.blobServer.holds("team-1", blob.hash) == content)
        #expect(await replica.server.events(in: "team-1").map(\.id) == ids)
        #expect(try await replica.store.counts() == [.pending: 0, .confirmed: 3, .rejected: 0])
        // The upload came before the push: the blob queue's calls were all made when the server got events.
        #expect(replica.blobServer.calls == ["start", "put 0", "put 1", "commit"])
        let kinds = try await replica.engine.journal.entries().map(\.kind)
        #expect(kinds.contains("blob.upload"))

        var expected = BlobProgress()
        expected.uploadBytes = 100
        expected.uploadedBytes = 100
        #expect(replica.engine.blobs?.progress == expected)
        #expect(replica.engine.status.blobs == expected, "the engine's status shows the queue's progress")
    }

    @Test func aFailedUploadHoldsTheAttachmentAndWhatFollowsUntilTheNextSync() async throws {
        let replica = try Replica()
        let content = LocalBlobsTests.bytes(200)
        let (ids, blob) = try await replica.appendAroundAnAttachment(content)
        replica.blobServer.failChunk(1, with: [.permanent(code: "blob.quotaExceeded", message: "injected")])
        try await replica.engine.syncNow()
        #expect(await replica.server.events(in: "team-1").map(\.id) == [ids[0]], "only what came before")
        #expect(try await replica.store.pendingEvents().map(\.event.id) == Array(ids[1...]))
        #expect(replica.engine.blobs?.progress.lastUploadError != nil)
        let entries = try await replica.engine.journal.entries()
        #expect(entries.contains { $0.kind == "blob.upload" && $0.detail.contains("blob.quotaExceeded") })

        try await replica.engine.syncNow()
        #expect(replica.blobServer.holds("team-1", blob.hash) == content)
        #expect(replica.blobServer.storedChunks == [0, 1, 2, 3])
        #expect(await replica.server.events(in: "team-1").map(\.id) == ids)
        #expect(try await replica.store.counts() == [.pending: 0, .confirmed: 3, .rejected: 0])
    }

    /// The server answers `blob.missing` (it collected the blob): the device keeps the event, uploads the blob
    /// again and pushes the event with its next sync.
    @Test func aBlobMissingRejectionUploadsAgainAndPushesAgain() async throws {
        let refusals = Refusals()
        let server = InMemorySyncServer(rule: { event in
            guard event.stream == "note:2", refusals.next() == 1 else { return nil }
            return EventRejection(.blobMissing, "the scope does not hold the blob")
        })
        let replica = try Replica(server: server)
        let content = LocalBlobsTests.bytes(100)
        let (ids, blob) = try await replica.appendAroundAnAttachment(content)

        try await replica.engine.syncNow()
        #expect(await server.events(in: "team-1").map(\.id) == [ids[0], ids[2]])
        let kept = try await replica.store.events(stream: "note:2")
        #expect(kept.map(\.status) == [.pending], "kept, not rejected")
        #expect(try await replica.store.outboxSnapshot(after: 0, limit: 100).pending.isEmpty, "held for its blob")
        #expect(try await replica.engine.blobs?.pendingUploads().map(\.reference) == [blob])

        replica.blobServer.collect("team-1", blob.hash)
        try await replica.engine.syncNow()
        #expect(replica.blobServer.storedChunks == [0, 1, 0, 1], "uploaded a second time")
        #expect(await server.events(in: "team-1").map(\.id) == [ids[0], ids[2], ids[1]])
        #expect(try await replica.store.counts() == [.pending: 0, .confirmed: 3, .rejected: 0])
    }
}
