import SyncModels

/// `POST /v1/uploads`: ask for an upload session of one blob in one scope (docs/PROTOCOL.md, "Blobs").
///
/// The same request again (the same scope and hash) answers the same open session, so a device that lost
/// the answer, or restarted, resumes where it was; a blob the scope already holds is answered `committed` at
/// once, and nothing is sent.
public struct UploadRequest: Codable, Hashable, Sendable {
    public var scope: Scope
    public var hash: BlobHash
    /// The blob's length in bytes (0 or more).
    public var size: Int64
    /// Its media type (`BlobReference.isValidMediaType`).
    public var type: String

    public init(scope: Scope, hash: BlobHash, size: Int64, type: String) {
        self.scope = scope
        self.hash = hash
        self.size = size
        self.type = type
    }

    public init(scope: Scope, reference: BlobReference) {
        self.init(scope: scope, hash: reference.hash, size: reference.size, type: reference.type)
    }

    /// Checks the fields the JSON shape does not: the size and the media type.
    /// - Throws: `request.invalid` naming the field.
    public func validate() throws(SyncProtocolError) {
        guard size >= 0 else { throw .invalid("size must be 0 or more") }
        guard BlobReference.isValidMediaType(type) else {
            throw .invalid("type must be a media type such as image/png")
        }
    }
}

/// The state of an upload session, as `POST /v1/uploads`, `GET /v1/uploads/{id}`, each chunk's `PUT` and the
/// commit answer it.
///
/// The blob is cut in `chunks` chunks of `chunkSize` bytes, the last one shorter when `size` is not a multiple
/// (a blob of 0 bytes has no chunk). `missing` lists the chunks the server has not stored yet, in order:
/// what a device still has to send, in any order, each once (a chunk sent again is accepted and changes
/// nothing). Once `missing` is empty, `POST /v1/uploads/{id}/commit` checks the whole file's SHA-256 and makes
/// the blob readable by every token that may read the scope.
public struct UploadState: Codable, Hashable, Sendable {
    /// The session's id (for its chunk and commit routes); nil when the blob was already committed in the
    /// scope when the session was asked for.
    public var upload: String?
    public var scope: Scope
    public var hash: BlobHash
    public var size: Int64
    public var type: String
    public var chunkSize: Int
    public var chunks: Int
    public var missing: [Int]
    /// Whether the blob is readable (`GET /v1/blobs/{hash}`): after the commit, or at once when the scope held
    /// it already.
    public var committed: Bool
    /// When an uncommitted session is forgotten with its chunks (RFC 3339); nil once committed.
    public var expiresAt: String?

    public init(
        upload: String?, scope: Scope, hash: BlobHash, size: Int64, type: String, chunkSize: Int, missing: [Int],
        committed: Bool, expiresAt: String?
    ) {
        self.upload = upload
        self.scope = scope
        self.hash = hash
        self.size = size
        self.type = type
        self.chunkSize = chunkSize
        self.chunks = Self.chunkCount(size: size, chunkSize: chunkSize)
        self.missing = missing
        self.committed = committed
        self.expiresAt = expiresAt
    }

    /// How many chunks of `chunkSize` bytes a blob of `size` bytes is cut in.
    public static func chunkCount(size: Int64, chunkSize: Int) -> Int {
        guard size > 0, chunkSize > 0 else { return 0 }
        return Int((size + Int64(chunkSize) - 1) / Int64(chunkSize))
    }

    /// The bytes of the blob chunk `index` holds.
    public static func chunkRange(_ index: Int, size: Int64, chunkSize: Int) -> Range<Int64> {
        let start = Int64(index) * Int64(chunkSize)
        return start..<min(size, start + Int64(chunkSize))
    }

    /// The bytes of the blob chunk `index` holds.
    public func chunkRange(_ index: Int) -> Range<Int64> { Self.chunkRange(index, size: size, chunkSize: chunkSize) }
}

/// The headers of the blob routes beyond HTTP's own.
public enum BlobHeader {
    /// On each chunk's `PUT`: the SHA-256 of the chunk's bytes, as 64 hexadecimal digits. A chunk whose bytes
    /// do not match is refused with `blob.hashMismatch` and not stored.
    public static let chunkSHA256 = "X-Chunk-SHA256"
}

/// One byte range of a blob, from a `Range: bytes=…` header (RFC 9110, a single range).
public struct BlobByteRange: Hashable, Sendable {
    /// The first byte and the byte after the last, within the blob.
    public var lowerBound: Int64
    public var upperBound: Int64

    public init(_ range: Range<Int64>) {
        lowerBound = range.lowerBound
        upperBound = range.upperBound
    }

    public var range: Range<Int64> { lowerBound..<upperBound }

    /// `Content-Range` of this range in a blob of `size` bytes.
    public func contentRange(size: Int64) -> String { "bytes \(lowerBound)-\(upperBound - 1)/\(size)" }

    /// The `Range` header that asks for the bytes from `offset` to the end.
    public static func header(from offset: Int64) -> String { "bytes=\(offset)-" }

    /// What a `Range` header asks of a blob of `size` bytes: nil for a header this server does not honour
    /// (not `bytes=`, several ranges, not numbers: the whole blob is sent, as RFC 9110 allows).
    /// - Throws: `blob.rangeNotSatisfiable` for a well-formed range that starts at or past the end.
    public static func parse(_ header: String, size: Int64) throws(SyncProtocolError) -> BlobByteRange? {
        let text = header.trimmingSpaces
        guard text.hasPrefix("bytes="), !text.contains(",") else { return nil }
        let spec = text.dropFirst("bytes=".count)
        guard let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[..<dash]
        let last = spec[spec.index(after: dash)...]
        let unsatisfiable = SyncProtocolError(
            .blobRangeNotSatisfiable, "the range asked for is outside the blob's \(size) bytes")
        if first.isEmpty {
            // A suffix: the last n bytes.
            guard let count = Int64(last), count >= 0 else { return nil }
            guard count > 0, size > 0 else { throw unsatisfiable }
            return BlobByteRange(max(0, size - count)..<size)
        }
        guard let start = Int64(first), start >= 0 else { return nil }
        var end = size
        if !last.isEmpty {
            guard let lastByte = Int64(last), lastByte >= start else { return nil }
            end = min(size, lastByte + 1)
        }
        guard start < size else { throw unsatisfiable }
        return BlobByteRange(start..<end)
    }
}

extension String {
    fileprivate var trimmingSpaces: Substring {
        var text = Substring(self)
        while text.first == " " { text.removeFirst() }
        while text.last == " " { text.removeLast() }
        return text
    }
}
