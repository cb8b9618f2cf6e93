import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import SyncEngine
import SyncModels
import SyncProtocol

/// The blob routes over AsyncHTTPClient: JSON for the session and its commit, raw bytes for each chunk, and a
/// download streamed piece by piece to its receiver as the bytes arrive.
extension HTTPClientTransport: BlobTransport {
    public func startUpload(_ request: UploadRequest) async throws(SyncFailure) -> UploadState {
        let body: Data
        do {
            body = try WireCodec().encode(request)
        } catch {
            throw .permanent(code: "request.invalid", message: "the upload request could not be encoded")
        }
        return try await uploadCall(HTTPTransport.uploadsURL(base: baseURL), method: .POST, body: body, json: true)
    }

    public func putChunk(upload: String, index: Int, bytes: Data, sha256: BlobHash) async throws(SyncFailure)
        -> UploadState
    {
        try await putChunk(upload: upload, index: index, bytes: bytes, sha256: sha256, sent: {})
    }

    /// The chunk's body goes out a piece at a time (`ChunkPieces`), never copied whole; `sent` is called when
    /// the client takes its last piece.
    public func putChunk(
        upload: String, index: Int, bytes: Data, sha256: BlobHash, sent: @escaping @Sendable () -> Void
    ) async throws(SyncFailure) -> UploadState {
        try await uploadCall(
            HTTPTransport.chunkURL(base: baseURL, upload: upload, index: index), method: .PUT, body: bytes, json: false,
            headers: [(BlobHeader.chunkSHA256, sha256.hex)], sent: sent)
    }

    public func commitUpload(_ upload: String) async throws(SyncFailure) -> UploadState {
        try await uploadCall(
            HTTPTransport.commitURL(base: baseURL, upload: upload), method: .POST, body: Data(), json: true)
    }

    private func uploadCall(
        _ url: URL, method: HTTPMethod, body: Data, json: Bool, headers: [(String, String)] = [],
        sent: (@Sendable () -> Void)? = nil
    ) async throws(SyncFailure) -> UploadState {
        var outgoing = HTTPClientRequest(url: url.absoluteString)
        outgoing.method = method
        outgoing.headers.add(name: "Content-Type", value: json ? "application/json" : "application/octet-stream")
        for (name, value) in headers { outgoing.headers.add(name: name, value: value) }
        if let token = token.withLock({ $0 }) { outgoing.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let sent {
            outgoing.body = .stream(ChunkPieces(bytes: body, sent: sent), length: .known(Int64(body.count)))
        } else {
            outgoing.body = .bytes(ByteBuffer(bytes: body))
        }
        let response: HTTPClientResponse
        let data: Data
        do {
            response = try await client.execute(outgoing, timeout: timeout)
            data = Data(try await response.body.collect(upTo: 1 << 20).readableBytesView)
        } catch {
            throw .retryable(reason: "network: \(error)", retryAfter: nil)
        }
        onTraffic?(
            Traffic(sentRaw: body.count, sentWire: body.count, receivedRaw: data.count, receivedWire: data.count))
        return try HTTPTransport.uploadState(
            status: Int(response.status.code), retryAfter: response.headers.first(name: "Retry-After"), body: data)
    }

    public func download(
        _ hash: BlobHash, scope: Scope, from offset: Int64, begin: (Int64, Int64) throws -> Void,
        receive: (Data) throws -> Void
    ) async throws(SyncFailure) {
        var outgoing = HTTPClientRequest(
            url: HTTPTransport.blobURL(base: baseURL, hash: hash, scope: scope).absoluteString)
        if offset > 0 { outgoing.headers.add(name: "Range", value: BlobByteRange.header(from: offset)) }
        if let token = token.withLock({ $0 }) { outgoing.headers.add(name: "Authorization", value: "Bearer \(token)") }
        let response: HTTPClientResponse
        do {
            // The timeout covers the answer's head; the body then flows for as long as it takes.
            response = try await client.execute(outgoing, deadline: .now() + timeout)
        } catch {
            throw .retryable(reason: "network: \(error)", retryAfter: nil)
        }
        let status = Int(response.status.code)
        guard status == 200 || status == 206 else {
            let data = (try? await response.body.collect(upTo: 1 << 20)).map { Data($0.readableBytesView) } ?? Data()
            throw HTTPTransport.blobFailure(
                status: status, retryAfter: response.headers.first(name: "Retry-After"), body: data)
        }
        guard
            let head = HTTPTransport.downloadHead(
                status: status, contentRange: response.headers.first(name: "Content-Range"),
                contentLength: response.headers.first(name: "Content-Length"))
        else { throw .retryable(reason: "a blob answer without its length", retryAfter: nil) }
        var received: Int64 = 0
        do {
            try begin(head.start, head.size)
        } catch {
            throw .permanent(code: "blob.file", message: "\(error)")
        }
        do {
            for try await buffer in response.body {
                received += Int64(buffer.readableBytes)
                do {
                    // The piece's own bytes, not a copy: `receive` writes and hashes them during the call.
                    try buffer.withUnsafeReadableBytes { bytes in
                        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
                        try receive(
                            Data(
                                bytesNoCopy: UnsafeMutableRawPointer(mutating: base), count: bytes.count,
                                deallocator: .none))
                    }
                } catch {
                    throw SyncFailure.permanent(code: "blob.file", message: "\(error)")
                }
            }
        } catch let failure as SyncFailure {
            throw failure
        } catch {
            onTraffic?(Traffic(receivedRaw: Int(received), receivedWire: Int(received)))
            throw .retryable(reason: "network: \(error)", retryAfter: nil)
        }
        onTraffic?(Traffic(receivedRaw: Int(received), receivedWire: Int(received)))
    }
}

/// A chunk's bytes as the pieces of a request body, copied a piece at a time as the client asks for them, so
/// that a chunk on its way is not held twice; calls `sent` when the last piece is taken (the body has then
/// been handed to the connection whole).
struct ChunkPieces: AsyncSequence, Sendable {
    static let pieceBytes = 1 << 20
    let bytes: Data
    let sent: @Sendable () -> Void

    struct AsyncIterator: AsyncIteratorProtocol {
        let bytes: Data
        let sent: @Sendable () -> Void
        var offset = 0

        mutating func next() async -> ByteBuffer? {
            guard offset < bytes.count else { return nil }
            let end = Swift.min(bytes.count, offset + ChunkPieces.pieceBytes)
            let piece = ByteBuffer(bytes: bytes[bytes.startIndex + offset..<bytes.startIndex + end])
            offset = end
            if offset == bytes.count { sent() }
            return piece
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(bytes: bytes, sent: sent) }
}
