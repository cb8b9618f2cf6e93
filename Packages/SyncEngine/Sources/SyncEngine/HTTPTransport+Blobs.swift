import Foundation
import SyncModels
import SyncProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The blob routes over URLSession, for apps on Apple platforms: JSON for the session and its commit, raw
/// bytes for each chunk, and a download that URLSession writes to a temporary file, handed to the receiver a
/// piece at a time (never the whole blob in memory).
extension HTTPTransport: BlobTransport {
    public func startUpload(_ request: UploadRequest) async throws(SyncFailure) -> UploadState {
        let body: Data
        do {
            body = try WireCodec().encode(request)
        } catch {
            throw .permanent(code: "request.invalid", message: "the upload request could not be encoded")
        }
        return try await uploadCall(Self.uploadsURL(base: baseURL), method: "POST", body: body, json: true)
    }

    public func putChunk(upload: String, index: Int, bytes: Data, sha256: BlobHash) async throws(SyncFailure)
        -> UploadState
    {
        try await uploadCall(
            Self.chunkURL(base: baseURL, upload: upload, index: index), method: "PUT", body: bytes, json: false,
            headers: [BlobHeader.chunkSHA256: sha256.hex])
    }

    public func commitUpload(_ upload: String) async throws(SyncFailure) -> UploadState {
        try await uploadCall(Self.commitURL(base: baseURL, upload: upload), method: "POST", body: Data(), json: true)
    }

    private func uploadCall(
        _ url: URL, method: String, body: Data, json: Bool, headers: [String: String] = [:]
    ) async throws(SyncFailure) -> UploadState {
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.setValue(json ? "application/json" : "application/octet-stream", forHTTPHeaderField: "Content-Type")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = body
        let (status, retryAfter, data) = try await send(request)
        return try Self.uploadState(status: status, retryAfter: retryAfter, body: data)
    }

    public func download(
        _ hash: BlobHash, scope: Scope, from offset: Int64, begin: (Int64, Int64) throws -> Void,
        receive: (Data) throws -> Void
    ) async throws(SyncFailure) {
        var request = URLRequest(url: Self.blobURL(base: baseURL, hash: hash, scope: scope))
        if offset > 0 { request.setValue(BlobByteRange.header(from: offset), forHTTPHeaderField: "Range") }
        if let token = token.withLock({ $0 }) {
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        }
        let file: URL
        let response: URLResponse
        do {
            (file, response) = try await session.download(for: request)
        } catch {
            throw .retryable(reason: "network: \(error.localizedDescription)", retryAfter: nil)
        }
        defer { try? FileManager.default.removeItem(at: file) }
        guard let http = response as? HTTPURLResponse else {
            throw .retryable(reason: "not an HTTP response", retryAfter: nil)
        }
        let retryAfter = http.value(forHTTPHeaderField: "Retry-After")
        guard http.statusCode == 200 || http.statusCode == 206 else {
            let body = (try? Data(contentsOf: file)) ?? Data()
            throw Self.blobFailure(status: http.statusCode, retryAfter: retryAfter, body: body)
        }
        guard
            let head = Self.downloadHead(
                status: http.statusCode, contentRange: http.value(forHTTPHeaderField: "Content-Range"),
                contentLength: http.value(forHTTPHeaderField: "Content-Length"))
        else { throw .retryable(reason: "a blob answer without its length", retryAfter: nil) }
        do {
            try begin(head.start, head.size)
            let input = try FileHandle(forReadingFrom: file)
            defer { try? input.close() }
            while let piece = try input.read(upToCount: 1 << 20), !piece.isEmpty { try receive(piece) }
        } catch {
            throw .permanent(code: "blob.file", message: "\(error)")
        }
    }
}
