import Foundation
import NIOCore
import SyncModels

/// Where the bytes of blobs are kept (docs/PROTOCOL.md, "Blobs"); what they are, who may read them and which
/// chunks an upload has received is the server's metadata, always in PostgreSQL.
///
/// A blob is kept as parts: part `i` holds the bytes `UploadState.chunkRange(i, size:chunkSize:)`, exactly the
/// chunk `i` a device uploaded. An upload's parts are kept apart from committed blobs until `promote` moves them,
/// which the server does only after the whole blob's SHA-256 matched its name: the parts of an upload are never
/// readable as the blob before that.
///
/// The server holds at most one part in memory per request, and so should a store. Implementations: `PostgresBlobStore` (the default, a table of `bytea` parts), `DirectoryBlobStore` (files
/// on a local or mounted disk); docs/SCALING.md sketches one over an S3-compatible object store.
public protocol BlobStore: Sendable {
    /// Stores part `part` of `upload`, replacing an earlier copy of the same part. It need not be durable yet
    /// (`promote` makes it so): after a crash the commit reads the parts back (the running hash of the chunks
    /// is gone with the process), sends the device back for a part that is missing or short, and refuses the
    /// upload (`blob.hashMismatch`, which starts it over) when the bytes are not the blob's.
    /// - Throws: the store's error; the server answers 503 and the device sends the chunk again.
    func writeUploadPart(_ bytes: ByteBuffer, part: Int, of upload: BlobUploadKey) async throws

    /// Part `part` of `upload` as stored, or nil when it is not (never written, or gone).
    func readUploadPart(_ part: Int, of upload: BlobUploadKey) async throws -> ByteBuffer?

    /// Makes parts `0..<parts` of `upload` the parts of the committed blob `upload.hash` in `upload.scope`,
    /// replacing any parts that blob had; the upload has no parts afterwards. Durable when it returns, and
    /// atomic as far as the store can be: readers see the old parts or the new ones.
    /// - Returns: false, changing nothing, when the upload does not hold all `parts` parts (another commit of
    ///   the same session promoted them already, or they were lost).
    func promote(_ upload: BlobUploadKey, parts: Int) async throws -> Bool

    /// `range` (offsets within the part) of part `part` of the committed blob `hash` in `scope`, or nil when
    /// that part is not stored.
    func readPart(_ part: Int, range: Range<Int>, of hash: BlobHash, in scope: Scope) async throws -> ByteBuffer?

    /// Deletes every part of `upload`; nothing to delete is not an error.
    func deleteUpload(_ upload: BlobUploadKey) async throws

    /// Deletes every part of the committed blob `hash` in `scope`; nothing to delete is not an error.
    func deleteBlob(_ hash: BlobHash, in scope: Scope) async throws

    /// How many parts a reader of a blob asks for ahead of the one it writes (or hashes): more for a store
    /// whose reads wait on something else (a database, a network), each one holding a part in memory. 1 by
    /// default.
    var partsAhead: Int { get }
}

extension BlobStore {
    public var partsAhead: Int { 1 }
}

/// An upload session as a store knows it: the scope and the hash of the blob it uploads, and its id.
public struct BlobUploadKey: Hashable, Sendable, CustomStringConvertible {
    public var scope: Scope
    public var hash: BlobHash
    public var id: UUID

    public init(scope: Scope, hash: BlobHash, id: UUID) {
        self.scope = scope
        self.hash = hash
        self.id = id
    }

    public var description: String { "\(scope)/\(id.uuidString.lowercased())" }
}
