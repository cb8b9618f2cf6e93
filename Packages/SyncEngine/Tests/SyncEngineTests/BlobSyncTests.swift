import Crypto
import Foundation
import GRDB
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import SyncProtocol
import Synchronization
import Testing

@testable import SyncEngine

/// The device's blob queue (issue 46) against a fake of the server's blob routes: uploads chunk by chunk, each
/// chunk sent once, resumed from what the server holds; downloads resumed from the partial file and checked
/// against the hash.
@Suite struct BlobSyncTests {
    static let scope: Scope = "team-1"

    struct Device {
        let directory: TemporaryDirectory
        let store: EventStore
        let local: LocalBlobs
        let server: FakeBlobServer
        let sync: BlobSync

        init(chunkSize: Int = 64, attempts: Int = 3) throws {
            directory = try TemporaryDirectory()
            store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
            local = try LocalBlobs(store: store)
            server = FakeBlobServer(chunkSize: chunkSize)
            sync = Self.sync(local, server, attempts: attempts)
        }

        static func sync(_ local: LocalBlobs, _ server: FakeBlobServer, attempts: Int) -> BlobSync {
            BlobSync(
                local: local, transport: server, backoff: BackoffPolicy(base: .milliseconds(1), cap: .milliseconds(2)),
                attempts: attempts)
        }

        /// Adds `content` as a blob and appends an event referring to it.
        @discardableResult
        func attach(_ content: Data, stream: String = "note:1") async throws -> BlobReference {
            let reference = try await local.add(data: content, type: "image/png")
            var draft = title(stream, "with \(reference.hash.hex.prefix(8))", scope: BlobSyncTests.scope)
            draft.blobs = [reference]
            try await store.append([draft])
            return reference
        }

        /// What `local_blobs` says of one blob.
        struct QueueRow: Equatable {
            var uploaded: Bool
            var upload: String?
            var sentBytes: Int64
            var attempts: Int
            var lastError: String?
        }

        func row(_ hash: BlobHash) async throws -> QueueRow? {
            try await store.database.writer.read { db in
                try Row.fetchOne(
                    db,
                    sql: "SELECT uploaded, upload_id, sent_bytes, attempts, last_error FROM local_blobs WHERE hash = ?",
                    arguments: [hash.hex]
                ).map { row in
                    QueueRow(
                        uploaded: row["uploaded"], upload: row["upload_id"], sentBytes: row["sent_bytes"],
                        attempts: row["attempts"], lastError: row["last_error"])
                }
            }
        }

        var pushable: Int {
            get async throws { try await store.outboxSnapshot(after: 0, limit: 100).pending.count }
        }
    }

    static func bytes(_ count: Int, seed: UInt8 = 1) -> Data { LocalBlobsTests.bytes(count, seed: seed) }

    // MARK: Uploads

    @Test func aBlobIsSentChunkByChunkEachOnceThenCommitted() async throws {
        let device = try Device()
        let content = Self.bytes(64 * 4 + 10)  // 5 chunks, the last one short
        let reference = try await device.attach(content)
        #expect(try await device.sync.pendingUploads().map(\.reference) == [reference])
        #expect(try await device.pushable == 0)
        let report = await device.sync.uploadPending()
        #expect(report.committed == 1 && report.chunks == 5 && report.bytes == Int64(content.count))
        #expect(report.waiting == 0 && report.lastFailure == nil)
        #expect(device.server.calls == ["start", "put 0", "put 1", "put 2", "put 3", "put 4", "commit"])
        #expect(device.server.holds(Self.scope, reference.hash) == content)
        #expect(
            try await device.row(reference.hash)
                == .init(uploaded: true, upload: nil, sentBytes: Int64(content.count), attempts: 0, lastError: nil))
        #expect(try await device.sync.pendingUploads().isEmpty)
        #expect(try await device.pushable == 1, "the event may go")
        let progress = device.sync.progress
        #expect(progress.uploadsPending == 0 && progress.uploadBytes == Int64(content.count))
        #expect(progress.uploadedBytes == Int64(content.count) && progress.lastUploadError == nil)
        // Nothing left: a second pass asks for nothing.
        let second = await device.sync.uploadPending()
        #expect(second == BlobSync.UploadReport())
        #expect(device.server.calls.count == 7)
    }

    @Test func aChunkThatFailsOnceIsRetriedWithinThePass() async throws {
        let device = try Device(attempts: 3)
        let content = Self.bytes(64 * 3)
        let reference = try await device.attach(content)
        device.server.failChunk(1, with: [.retryable(reason: "HTTP 503", retryAfter: nil)])
        let report = await device.sync.uploadPending()
        #expect(report.committed == 1 && report.chunks == 3 && report.waiting == 0)
        #expect(device.server.calls == ["start", "put 0", "put 1 failed", "put 1", "put 2", "commit"])
        #expect(device.server.holds(Self.scope, reference.hash) == content)
        #expect(try await device.row(reference.hash)?.attempts == 0, "the blob itself never failed")
    }

    /// A chunk that keeps failing ends the blob's pass with what the server acknowledged recorded; the next
    /// pass (here by another process on the same files) sends only the chunks the server lacks.
    @Test func afterAPassRunsOutOfAttemptsTheNextSendsOnlyWhatTheServerLacks() async throws {
        let device = try Device(attempts: 2)
        let content = Self.bytes(64 * 4 + 1)
        let reference = try await device.attach(content)
        let unavailable = SyncFailure.retryable(reason: "HTTP 503", retryAfter: nil)
        device.server.failChunk(2, with: [unavailable, unavailable])
        let first = await device.sync.uploadPending()
        #expect(first.committed == 0 && first.waiting == 1 && first.chunks == 2 && first.lastFailure == unavailable)
        #expect(device.server.calls == ["start", "put 0", "put 1", "put 2 failed", "put 2 failed"])
        let row = try #require(try await device.row(reference.hash))
        #expect(!row.uploaded && row.sentBytes == 128 && row.attempts == 1)
        #expect(row.upload == "upload-1" && row.lastError == unavailable.description)
        #expect(try await device.sync.pendingUploads().map(\.sentBytes) == [128])
        #expect(device.sync.progress.lastUploadError == unavailable.description)
        #expect(try await device.pushable == 0, "the event still waits")

        let restarted = Device.sync(device.local, device.server, attempts: 2)
        let second = await restarted.uploadPending()
        #expect(second.committed == 1 && second.chunks == 3 && second.waiting == 0)
        #expect(device.server.storedChunks == [0, 1, 2, 3, 4], "each chunk stored once")
        #expect(Array(device.server.calls.suffix(5)) == ["start", "put 2", "put 3", "put 4", "commit"])
        #expect(device.server.holds(Self.scope, reference.hash) == content)
        #expect(restarted.progress.uploadedBytes == Int64(content.count) && restarted.progress.lastUploadError == nil)
        #expect(try await device.pushable == 1)
    }

    @Test func aPermanentFailureMidwayIsNotRetriedAndTheNextPassResumes() async throws {
        let device = try Device(attempts: 5)
        let content = Self.bytes(64 * 3)
        let reference = try await device.attach(content)
        let refused = SyncFailure.permanent(code: "upload.notFound", message: "injected")
        device.server.failChunk(1, with: [refused])
        let first = await device.sync.uploadPending()
        #expect(first.waiting == 1 && first.lastFailure == refused)
        #expect(device.server.calls == ["start", "put 0", "put 1 failed"], "no retry of a permanent failure")
        let second = await device.sync.uploadPending()
        #expect(second.committed == 1 && second.chunks == 2)
        #expect(device.server.storedChunks == [0, 1, 2])
        #expect(device.server.holds(Self.scope, reference.hash) == content)
    }

    /// The next chunk goes out once the body of the one before is sent, before its answer, and never a third
    /// while two are unanswered: each chunk's answer here waits until the next chunk has begun.
    @Test func theNextChunkGoesOutWhileTheOneBeforeIsStoredAndNeverAThird() async throws {
        let device = try Device()
        let content = Self.bytes(64 * 5 + 9)
        let reference = try await device.attach(content)
        let overlapping = OverlappingTransport(inner: device.server, chunks: 6)
        let sync = BlobSync(local: device.local, transport: overlapping)
        let report = await sync.uploadPending()
        #expect(report.committed == 1 && report.chunks == 6, "\(report)")
        #expect(device.server.holds(Self.scope, reference.hash) == content)
        let log = overlapping.log
        #expect(log.filter { $0.hasPrefix("begin") } == (0..<6).map { "begin \($0)" }, "in order: \(log)")
        // Before each chunk's answer the next one began; when a chunk began, at most one other was unanswered.
        for index in 0..<5 {
            #expect(log.firstIndex(of: "begin \(index + 1)")! < log.firstIndex(of: "answer \(index)")!, "\(log)")
        }
        for index in 2..<6 {
            #expect(log.firstIndex(of: "answer \(index - 2)")! < log.firstIndex(of: "begin \(index)")!, "\(log)")
        }
    }

    @Test func aBlobTheServerHoldsAlreadySendsNoChunk() async throws {
        let device = try Device()
        let content = Self.bytes(300)
        let reference = try await device.attach(content)
        device.server.commit(content, scope: Self.scope)
        let report = await device.sync.uploadPending()
        #expect(report.committed == 1 && report.chunks == 0 && report.bytes == 0)
        #expect(device.server.calls == ["start"])
        #expect(try await device.row(reference.hash)?.uploaded == true)
        #expect(try await device.pushable == 1)
    }

    @Test func anAuthenticationFailureEndsThePass() async throws {
        let device = try Device()
        try await device.attach(Self.bytes(100, seed: 1), stream: "note:1")
        try await device.attach(Self.bytes(100, seed: 2), stream: "note:2")
        device.server.failStart(with: [.authentication(code: "auth.expired", message: "injected")])
        let report = await device.sync.uploadPending()
        #expect(report.committed == 0 && report.waiting == 1)
        #expect(device.server.calls == ["start"], "the second blob is not tried")
        let next = await device.sync.uploadPending()
        #expect(next.committed == 2)
    }

    @Test func aBlobWhoseBytesAreGoneRejectsTheEventsWaitingForItAndHoldsNothingBack() async throws {
        let device = try Device()
        let content = Self.bytes(100)
        let reference = try await device.attach(content)
        try await device.store.append([title("note:2", "after the attachment", scope: Self.scope)])
        #expect(try await device.pushable == 0, "the attachment holds back what follows it")
        try FileManager.default.removeItem(at: device.local.fileURL(reference.hash))
        let report = await device.sync.uploadPending()
        #expect(report.committed == 0 && report.abandoned == 1 && report.waiting == 0)
        #expect(device.server.storedChunks.isEmpty)
        let rejected = try await device.store.rejectedEvents()
        #expect(rejected.map(\.rejection?.code) == ["blob.notLocal"], "shown with the other rejections")
        #expect(try await device.pushable == 1, "the next event is no longer held back")
        #expect(try await device.sync.pendingUploads().isEmpty)
    }

    // MARK: Downloads

    @Test func openDownloadsAFileOnceAndThenReadsItLocally() async throws {
        let device = try Device()
        let content = Self.bytes(1000)
        device.server.commit(content, scope: Self.scope)
        let reference = BlobReference(hash: BlobHash(digest: SHA256.hash(data: content)), size: 1000)
        let file = try await device.sync.open(reference, scope: Self.scope)
        #expect(file == device.local.fileURL(reference.hash))
        #expect(try Data(contentsOf: file) == content)
        #expect(device.server.calls == ["download from 0"])
        #expect(!FileManager.default.fileExists(atPath: device.local.partialURL(reference.hash).path))
        #expect(device.sync.progress.downloadedBlobs == 1 && device.sync.progress.downloadedBytes == 1000)
        #expect(try await device.sync.open(reference, scope: Self.scope) == file)
        #expect(device.server.calls.count == 1, "no transport call for a blob that is here")
    }

    @Test func aBlobAddedHereOpensWithoutAnyTransportCall() async throws {
        let device = try Device()
        let reference = try await device.local.add(data: Self.bytes(500))
        #expect(try await device.sync.open(reference, scope: Self.scope) == device.local.fileURL(reference.hash))
        #expect(device.server.calls.isEmpty)
    }

    @Test func aCutDownloadResumesFromThePartialFile() async throws {
        let device = try Device()
        let content = Self.bytes(1000)
        device.server.commit(content, scope: Self.scope)
        let reference = BlobReference(hash: BlobHash(digest: SHA256.hash(data: content)), size: 1000)
        device.server.cutDownload(after: 500)
        let file = try await device.sync.open(reference, scope: Self.scope)
        #expect(try Data(contentsOf: file) == content)
        #expect(device.server.calls == ["download from 0", "download from 500"])
        #expect(device.sync.progress.downloadedBytes == 1000, "the first half is not fetched again")
    }

    /// The partial file outlives a failed `open` (attempts ran out): the next `open` resumes from it.
    @Test func aFailedOpenLeavesThePartialFileForTheNext() async throws {
        let device = try Device(attempts: 1)
        let content = Self.bytes(1000)
        device.server.commit(content, scope: Self.scope)
        let reference = BlobReference(hash: BlobHash(digest: SHA256.hash(data: content)), size: 1000)
        device.server.cutDownload(after: 300)
        await #expect(throws: SyncFailure.retryable(reason: "network: connection reset", retryAfter: nil)) {
            try await device.sync.open(reference, scope: Self.scope)
        }
        let partial = device.local.partialURL(reference.hash)
        #expect(try Data(contentsOf: partial) == content.prefix(300))
        #expect(try await device.local.file(reference.hash) == nil)
        let file = try await device.sync.open(reference, scope: Self.scope)
        #expect(try Data(contentsOf: file) == content)
        #expect(device.server.calls == ["download from 0", "download from 300"])
        #expect(!FileManager.default.fileExists(atPath: partial.path))
    }

    @Test func bytesThatDoNotMatchTheHashAreRefusedAndNothingIsKept() async throws {
        let device = try Device()
        let content = Self.bytes(1000, seed: 1)
        let reference = BlobReference(hash: BlobHash(digest: SHA256.hash(data: content)), size: 1000)
        device.server.serve(Self.bytes(1000, seed: 2), as: reference.hash)
        await #expect(
            throws: SyncFailure.permanent(
                code: "blob.hashMismatch", message: "the downloaded bytes do not match the blob's hash")
        ) {
            try await device.sync.open(reference, scope: Self.scope)
        }
        #expect(try LocalBlobsTests.files(in: device.local.directory).isEmpty, "no file, no partial file")
        #expect(try await device.local.file(reference.hash) == nil)
        #expect(device.server.calls == ["download from 0"], "not retried")
        // Once the server serves the right bytes, the next open starts over and succeeds.
        device.server.serve(content, as: reference.hash)
        #expect(try Data(contentsOf: try await device.sync.open(reference, scope: Self.scope)) == content)
    }

    @Test func aBlobTheServerDoesNotHaveIsAPermanentFailure() async throws {
        let device = try Device()
        let reference = BlobReference(hash: BlobHash(digest: SHA256.hash(data: Self.bytes(10))), size: 10)
        await #expect(throws: SyncFailure.self) { try await device.sync.open(reference, scope: Self.scope) }
        #expect(device.server.calls == ["download from 0"], "not retried")
        #expect(try await device.local.file(reference.hash) == nil)
    }
}

/// A transport whose chunk `put`s tell that their body is sent at once, then wait to answer until the next
/// chunk has begun (the last chunk answers at once), logging `begin N` and `answer N`.
final class OverlappingTransport: BlobTransport {
    let inner: FakeBlobServer
    let chunks: Int
    let state = Mutex<(log: [String], waiting: [Int: CheckedContinuation<Void, Never>])>(([], [:]))

    init(inner: FakeBlobServer, chunks: Int) {
        self.inner = inner
        self.chunks = chunks
    }

    var log: [String] { state.withLock { $0.log } }

    func startUpload(_ request: UploadRequest) async throws(SyncFailure) -> UploadState {
        try await inner.startUpload(request)
    }

    func putChunk(upload: String, index: Int, bytes: Data, sha256: BlobHash) async throws(SyncFailure) -> UploadState {
        try await putChunk(upload: upload, index: index, bytes: bytes, sha256: sha256, sent: {})
    }

    func putChunk(
        upload: String, index: Int, bytes: Data, sha256: BlobHash, sent: @escaping @Sendable () -> Void
    ) async throws(SyncFailure) -> UploadState {
        let waiter = state.withLock { state in
            state.log.append("begin \(index)")
            return state.waiting.removeValue(forKey: index - 1)
        }
        waiter?.resume()
        sent()
        if index + 1 < chunks {
            await withCheckedContinuation { continuation in
                let begun = state.withLock { state in
                    if state.log.contains("begin \(index + 1)") { return true }
                    state.waiting[index] = continuation
                    return false
                }
                if begun { continuation.resume() }
            }
        }
        let answer = try await inner.putChunk(upload: upload, index: index, bytes: bytes, sha256: sha256)
        state.withLock { $0.log.append("answer \(index)") }
        return answer
    }

    func commitUpload(_ upload: String) async throws(SyncFailure) -> UploadState {
        try await inner.commitUpload(upload)
    }

    func download(
        _ hash: BlobHash, scope: Scope, from offset: Int64, begin: (Int64, Int64) throws -> Void,
        receive: (Data) throws -> Void
    ) async throws(SyncFailure) {
        try await inner.download(hash, scope: scope, from: offset, begin: begin, receive: receive)
    }
}
