import Foundation
import NIOCore
import SyncModels
import Testing

@testable import SyncServer

/// The running hash of an upload's chunks (`UploadDigests`): a digest only when every chunk was taken in order
/// here and is the part the database recorded; anything else leaves the commit to read the parts back.
@Suite struct UploadDigestsTests {
    let chunks: [[UInt8]] = (0..<4).map { index in (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7 + index) } }
    var hashes: [BlobHash] { chunks.map { BlobHash.sha256(of: $0) } }
    var recorded: [Int: BlobHash] { Dictionary(uniqueKeysWithValues: hashes.enumerated().map { ($0, $1) }) }
    var whole: BlobHash { .sha256(of: chunks.flatMap { $0 }) }

    func digest(
        _ digests: UploadDigests, _ upload: UUID, chunks: Int = 4, recorded: [Int: BlobHash]? = nil
    ) -> BlobHash? {
        digests.digest(upload, chunks: chunks, recorded: recorded ?? self.recorded).map { BlobHash(digest: $0) }
    }

    func take(_ digests: UploadDigests, _ upload: UUID, _ index: Int, bytes: [UInt8]? = nil) async {
        let bytes = bytes ?? chunks[index]
        await digests.take(upload, chunk: index, bytes: ByteBuffer(bytes: bytes), hash: .sha256(of: bytes))
        digests.end(upload, chunk: index)
    }

    @Test func chunksTakenInOrderGiveTheWholeBlobsHash() async {
        let digests = UploadDigests()
        let upload = UUID()
        for index in 0..<4 {
            digests.begin(upload, chunk: index)
            await take(digests, upload, index)
        }
        #expect(digest(digests, upload) == whole)
        // Fewer chunks than the upload has, or a part the database recorded with other bytes: no digest.
        #expect(digest(digests, upload, chunks: 5) == nil)
        var other = recorded
        other[2] = .sha256(of: [1, 2, 3])
        #expect(digest(digests, upload, recorded: other) == nil)
        other[2] = nil
        #expect(digest(digests, upload, recorded: other) == nil)
        digests.forget(upload)
        #expect(digest(digests, upload) == nil && digests.count == 0)
    }

    /// Two chunks in flight: the second, stored first, waits for the first while it is still on its way.
    @Test func aChunkStoredBeforeTheOneBeforeItWaitsForIt() async {
        // Patient for an hour: the wait is what is tested, not its bound (10 s by default, which a loaded
        // machine could take between the two chunks).
        let digests = UploadDigests(patience: .seconds(3600))
        let upload = UUID()
        digests.begin(upload, chunk: 0)
        digests.begin(upload, chunk: 1)
        let second = Task { await take(digests, upload, 1) }
        try? await Task.sleep(for: .milliseconds(50))
        #expect(digest(digests, upload, chunks: 2) == nil)
        await take(digests, upload, 0)
        await second.value
        for index in 2..<4 {
            digests.begin(upload, chunk: index)
            await take(digests, upload, index)
        }
        #expect(digest(digests, upload) == whole)
    }

    @Test func aGapOrAFailedChunkBeforeBreaksTheChain() async {
        let digests = UploadDigests()
        // Chunk 1 stored while chunk 0 is not on its way here (another server, or before a restart).
        let gap = UUID()
        digests.begin(gap, chunk: 0)
        await take(digests, gap, 0)
        digests.begin(gap, chunk: 2)
        await take(digests, gap, 2)
        digests.begin(gap, chunk: 1)
        await take(digests, gap, 1)
        digests.begin(gap, chunk: 3)
        await take(digests, gap, 3)
        #expect(digest(digests, gap) == nil)

        // Chunk 1 waits for chunk 0, which fails (never taken): the chain breaks and the wait ends.
        let failed = UUID()
        digests.begin(failed, chunk: 0)
        digests.begin(failed, chunk: 1)
        let waiting = Task { await take(digests, failed, 1) }
        try? await Task.sleep(for: .milliseconds(20))
        digests.end(failed, chunk: 0)
        await waiting.value
        for index in [0, 2, 3] {
            digests.begin(failed, chunk: index)
            await take(digests, failed, index)
        }
        #expect(digest(digests, failed) == nil)
    }

    @Test func aChunkSentAgainKeepsTheChainOnlyWithTheSameBytes() async {
        let digests = UploadDigests()
        let same = UUID()
        let other = UUID()
        for upload in [same, other] {
            for index in 0..<4 {
                digests.begin(upload, chunk: index)
                await take(digests, upload, index)
            }
        }
        digests.begin(same, chunk: 1)
        await take(digests, same, 1)
        #expect(digest(digests, same) == whole)
        digests.begin(other, chunk: 1)
        await take(digests, other, 1, bytes: [9, 9, 9])
        #expect(digest(digests, other) == nil)
    }

    @Test func aChainStartsOnlyAtTheFirstChunk() async {
        let digests = UploadDigests()
        let upload = UUID()
        for index in 1..<4 {
            digests.begin(upload, chunk: index)
            await take(digests, upload, index)
        }
        #expect(digests.count == 0)
    }

    /// A chunk that waits past `patience` for the one before it (a device that stalled mid-chunk) breaks the
    /// chain instead of holding its request.
    @Test func aWaitPastThePatienceBreaksTheChain() async {
        let digests = UploadDigests(patience: .milliseconds(100))
        let upload = UUID()
        digests.begin(upload, chunk: 0)
        digests.begin(upload, chunk: 1)
        await take(digests, upload, 1)
        await take(digests, upload, 0)
        for index in 2..<4 {
            digests.begin(upload, chunk: index)
            await take(digests, upload, index)
        }
        #expect(digest(digests, upload) == nil)
    }

    @Test func theLeastRecentlyUsedChainMakesWay() async {
        let digests = UploadDigests(capacity: 2)
        let uploads = [UUID(), UUID(), UUID()]
        for upload in uploads {
            digests.begin(upload, chunk: 0)
            await take(digests, upload, 0)
        }
        #expect(digests.count == 2)
        let first = [0: hashes[0]]
        #expect(digest(digests, uploads[0], chunks: 1, recorded: first) == nil)
        #expect(digest(digests, uploads[2], chunks: 1, recorded: first) == hashes[0])
    }
}
