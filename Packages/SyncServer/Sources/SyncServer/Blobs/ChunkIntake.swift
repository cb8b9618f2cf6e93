import Crypto
import NIOCore
import SyncModels
import SyncProtocol

/// One chunk's body as it arrives (`PUT /v1/uploads/{id}/chunks/{index}`): its pieces are counted and hashed
/// as they come, so that a body longer than the chunk is refused at the first byte too many, without reading
/// the rest, and the chunk is never held twice.
struct ChunkIntake {
    /// The chunk's length: the session's chunk size, or less for a blob's last chunk.
    let expected: Int
    /// The SHA-256 the request declared (`X-Chunk-SHA256`).
    let declared: BlobHash
    private var bytes: ByteBuffer
    private var hasher = SHA256()

    init(expected: Int, declared: BlobHash) {
        self.expected = expected
        self.declared = declared
        bytes = ByteBufferAllocator().buffer(capacity: expected)
    }

    /// How many bytes arrived so far.
    var received: Int { bytes.readableBytes }

    /// Takes the next piece of the body.
    /// - Throws: `request.tooLarge` when the body grows past `expected` (nothing of it is kept).
    mutating func append(_ piece: ByteBuffer) throws(SyncProtocolError) {
        guard piece.readableBytes <= expected - bytes.readableBytes else {
            throw .tooLarge("the chunk is longer than its \(expected) bytes")
        }
        piece.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
        bytes.writeImmutableBuffer(piece)
    }

    /// The whole chunk, once the body has ended.
    /// - Throws: `blob.chunkInvalid` when it is shorter than `expected`, `blob.hashMismatch` when its SHA-256 is
    ///   not `declared`.
    func finish() throws(SyncProtocolError) -> ByteBuffer {
        guard bytes.readableBytes == expected else {
            throw SyncProtocolError(
                .blobChunkInvalid, "the chunk has \(bytes.readableBytes) bytes; its place in the blob holds \(expected)"
            )
        }
        guard BlobHash(digest: hasher.finalize()) == declared else {
            throw SyncProtocolError(.blobHashMismatch, "the chunk's bytes do not match its \(BlobHeader.chunkSHA256)")
        }
        return bytes
    }
}
