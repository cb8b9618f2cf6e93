import Foundation
import SyncModels
import SyncProtocol

/// The blob routes of the protocol (docs/PROTOCOL.md, "Blobs"), as the device's blob queue (`BlobSync`) uses
/// them: an upload session, its chunks and its commit, and a download that resumes at an offset.
///
/// Every failure is a `SyncFailure` classified as the sync requests' are: a network failure, a 5xx or a 429
/// is retryable, a 401 or 403 pauses for a new token, anything else is permanent.
public protocol BlobTransport: Sendable {
    /// `POST /v1/uploads`: the open session of this blob in this scope (created, or the one already open), or
    /// `committed` when the scope holds the blob already.
    func startUpload(_ request: UploadRequest) async throws(SyncFailure) -> UploadState
    /// `PUT /v1/uploads/{id}/chunks/{index}`: one chunk's bytes, with their SHA-256.
    func putChunk(upload: String, index: Int, bytes: Data, sha256: BlobHash) async throws(SyncFailure) -> UploadState
    /// `putChunk`, calling `sent` once the whole body is handed to the network, before the answer comes: the
    /// blob queue sends the next chunk then, while the server stores this one. The default calls it with a
    /// successful answer (the next chunk then waits for it; after a failure, for the chunk's last attempt).
    func putChunk(
        upload: String, index: Int, bytes: Data, sha256: BlobHash, sent: @escaping @Sendable () -> Void
    ) async throws(SyncFailure) -> UploadState
    /// `POST /v1/uploads/{id}/commit`: the server checks the whole blob's hash and makes it readable.
    func commitUpload(_ upload: String) async throws(SyncFailure) -> UploadState
    /// `GET /v1/blobs/{hash}?scope=` from byte `offset` (`Range: bytes=offset-` when above 0). Calls `begin`
    /// once with the offset of the first byte the answer holds (0 when the server sent the whole blob) and
    /// the blob's size, then `receive` with each piece as it arrives: never the whole blob in memory. A piece
    /// may be the transport's own buffer, valid only during the call: `receive` copies what it keeps.
    func download(
        _ hash: BlobHash, scope: Scope, from offset: Int64, begin: (_ start: Int64, _ size: Int64) throws -> Void,
        receive: (Data) throws -> Void
    ) async throws(SyncFailure)
    /// Replaces the bearer token of the requests that follow (the engine's `tokenProvider`). Transports
    /// without tokens keep the default, which does nothing.
    func setToken(_ token: String?)
}

extension BlobTransport {
    public func setToken(_ token: String?) {}

    public func putChunk(
        upload: String, index: Int, bytes: Data, sha256: BlobHash, sent: @escaping @Sendable () -> Void
    ) async throws(SyncFailure) -> UploadState {
        let state = try await putChunk(upload: upload, index: index, bytes: bytes, sha256: sha256)
        sent()
        return state
    }
}

extension HTTPTransport {
    /// Decodes an answer of the upload routes (`UploadState`), or classifies its error.
    public static func uploadState(status: Int, retryAfter: String?, body data: Data) throws(SyncFailure)
        -> UploadState
    {
        try answer(UploadState.self, status: status, retryAfter: retryAfter, body: data).value
    }

    /// The failure an error answer of a blob route stands for (its body is the protocol's error, if any).
    public static func blobFailure(status: Int, retryAfter: String?, body data: Data) -> SyncFailure {
        let detail = try? WireCodec().decode(ErrorBody.self, from: data)
        return SyncFailure.from(
            status: status, code: detail?.error.code.rawValue ?? "http.\(status)",
            message: detail?.error.message ?? "HTTP \(status)",
            retryAfter: retryAfter.flatMap(Int.init).map { Duration.seconds($0) })
    }

    /// The URLs of the blob routes.
    public static func uploadsURL(base: URL) -> URL { base.appendingPathComponent("v1/uploads") }
    public static func chunkURL(base: URL, upload: String, index: Int) -> URL {
        base.appendingPathComponent("v1/uploads/\(percentEncoded(upload))/chunks/\(index)")
    }
    public static func commitURL(base: URL, upload: String) -> URL {
        base.appendingPathComponent("v1/uploads/\(percentEncoded(upload))/commit")
    }
    public static func blobURL(base: URL, hash: BlobHash, scope: Scope) -> URL {
        URL(
            string: base.appendingPathComponent("v1/blobs/\(hash.hex)").absoluteString
                + "?scope=\(percentEncoded(scope.name))")!
    }

    /// What a blob answer's head says: the offset of its first byte and the blob's size (`Content-Range` of
    /// a 206, `Content-Length` of a 200), or nil when it says neither.
    public static func downloadHead(status: Int, contentRange: String?, contentLength: String?) -> (
        start: Int64, size: Int64
    )? {
        if status == 206, let range = contentRange, range.hasPrefix("bytes ") {
            let parts = range.dropFirst("bytes ".count).split(separator: "/")
            guard parts.count == 2, let size = Int64(parts[1]),
                let start = parts[0].split(separator: "-").first.flatMap({ Int64($0) })
            else { return nil }
            return (start, size)
        }
        if status == 200, let length = contentLength.flatMap(Int64.init) { return (0, length) }
        return nil
    }
}
