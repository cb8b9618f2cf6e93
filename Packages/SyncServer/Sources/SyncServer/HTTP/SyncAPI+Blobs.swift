import Foundation
import Hummingbird
import SyncModels
import SyncProtocol

/// The blob routes (docs/PROTOCOL.md, "Blobs"): upload sessions, their chunks and commits, and committed blobs.
///
/// Chunks are read as they arrive, counted and hashed (`ChunkIntake`), and blobs are written out part by part as
/// the store reads them: a request holds at most one chunk, whatever the blob's size. Blob bytes are never
/// compressed (`Content-Encoding`), in either direction.
extension SyncAPI {
    func registerBlobs(on router: Router<SyncRequestContext>) {
        router.post("/v1/uploads") { request, context in try await self.handleOpenUpload(request, context: context) }
        router.get("/v1/uploads/{id}") { request, context in
            try await self.handleUploadState(request, context: context)
        }
        router.put("/v1/uploads/{id}/chunks/{index}") { request, context in
            try await self.handleChunk(request, context: context)
        }
        router.post("/v1/uploads/{id}/commit") { request, context in
            try await self.handleCommit(request, context: context)
        }
        router.head("/v1/blobs/{hash}") { request, context in
            try await self.handleBlob(request, context: context, head: true)
        }
        router.get("/v1/blobs/{hash}") { request, context in
            try await self.handleBlob(request, context: context, head: false)
        }
    }

    /// The blob service, or 503 when the server was built without one.
    var blobService: BlobService {
        get throws {
            guard let blobs else { throw SyncProtocolError(.serverUnavailable, "this server keeps no blobs") }
            return blobs
        }
    }

    func handleOpenUpload(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try await tokens.identity(authorization: request.headers[.authorization])
        let blobs = try blobService
        return try await limiter.withSlot(for: identity.subject) {
            let upload = try codec.decode(UploadRequest.self, from: try await readBody(request))
            let state = try await blobs.open(upload, identity: identity, logger: context.logger)
            return try respond(try codec.encode(state), to: request)
        }
    }

    func handleUploadState(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try await tokens.identity(authorization: request.headers[.authorization])
        let blobs = try blobService
        return try await limiter.withSlot(for: identity.subject) {
            let session = try await blobs.session(
                context.parameters.get("id") ?? "", identity: identity, logger: context.logger)
            return try respond(try codec.encode(session.state), to: request)
        }
    }

    /// A chunk's `PUT`: checked before its body is read (header, session, index, declared length), then read
    /// piece by piece, refused at the first byte past the chunk's length, and stored only whole and matching its
    /// `X-Chunk-SHA256`.
    func handleChunk(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try await tokens.identity(authorization: request.headers[.authorization])
        let blobs = try blobService
        guard let header = request.headers[.init(BlobHeader.chunkSHA256)!], let declared = try? BlobHash(header) else {
            throw SyncProtocolError.invalid("\(BlobHeader.chunkSHA256) must be the chunk's SHA-256 as 64 hex digits")
        }
        guard let index = context.parameters.get("index").flatMap({ Int($0) }) else {
            throw SyncProtocolError(.blobChunkInvalid, "the chunk index must be a number")
        }
        if let coding = request.headers[.contentEncoding], coding.lowercased() != "identity" {
            throw SyncProtocolError(
                .requestUnsupportedEncoding, "chunks are sent as they are, without Content-Encoding")
        }
        return try await limiter.withSlot(for: identity.subject) {
            let session = try await blobs.session(
                context.parameters.get("id") ?? "", identity: identity, logger: context.logger)
            guard (0..<session.chunks).contains(index) else {
                throw SyncProtocolError(
                    .blobChunkInvalid, "chunk \(index) is outside the upload's \(session.chunks) chunks")
            }
            if session.committed { return try respond(try codec.encode(session.state), to: request) }
            let expected = Int(UploadState.chunkRange(index, size: session.size, chunkSize: session.chunkSize).count)
            if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > expected {
                throw SyncProtocolError.tooLarge("the chunk is longer than its \(expected) bytes")
            }
            // Until it is stored (or fails), a chunk after it waits for it to feed the upload's running hash.
            blobs.digests.begin(session.key.id, chunk: index)
            defer { blobs.digests.end(session.key.id, chunk: index) }
            var intake = ChunkIntake(expected: expected, declared: declared)
            for try await piece in request.body { try intake.append(piece) }
            let state = try await blobs.receive(
                try intake.finish(), hash: declared, chunk: index, of: session, identity: identity,
                logger: context.logger)
            return try respond(try codec.encode(state), to: request)
        }
    }

    func handleCommit(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try await tokens.identity(authorization: request.headers[.authorization])
        let blobs = try blobService
        return try await limiter.withSlot(for: identity.subject) {
            let state = try await blobs.commit(
                context.parameters.get("id") ?? "", identity: identity, logger: context.logger)
            return try respond(try codec.encode(state), to: request)
        }
    }

    /// `HEAD` and `GET /v1/blobs/{hash}?scope=S`: the blob's headers, and for `GET` its bytes (or the range
    /// asked for), streamed part by part; 304 when `If-None-Match` names its ETag.
    func handleBlob(_ request: Request, context: SyncRequestContext, head: Bool) async throws -> Response {
        let identity = try await tokens.identity(authorization: request.headers[.authorization])
        let blobs = try blobService
        guard let hash = try? BlobHash(context.parameters.get("hash") ?? "") else {
            throw SyncProtocolError.invalid("the blob's name is its SHA-256 as 64 hex digits")
        }
        guard let scopeText = request.uri.queryParameters.get("scope"), let scope = try? Scope(scopeText) else {
            throw SyncProtocolError.invalid("the scope query parameter must name the blob's scope")
        }
        return try await limiter.withSlot(for: identity.subject) {
            let blob = try await blobs.blob(hash, in: scope, identity: identity, logger: context.logger)
            let etag = "\"\(hash.hex)\""
            var headers = HTTPFields()
            headers[.eTag] = etag
            headers[.cacheControl] = "private, max-age=31536000, immutable"
            headers[.acceptRanges] = "bytes"
            if let condition = request.headers[.ifNoneMatch], Self.matches(condition, etag: etag) {
                var response = Response(status: .notModified, headers: headers)
                response.headers[.contentLength] = nil
                return response
            }
            headers[.contentType] = blob.type
            var range = 0..<blob.size
            var status = HTTPResponse.Status.ok
            if let asked = request.headers[.range] {
                do {
                    if let satisfiable = try BlobByteRange.parse(asked, size: blob.size) {
                        range = satisfiable.range
                        status = .partialContent
                        headers[.contentRange] = satisfiable.contentRange(size: blob.size)
                    }
                } catch let error as SyncProtocolError {
                    var response = ErrorMiddleware<SyncRequestContext>.response(for: error)
                    response.headers[.contentRange] = "bytes */\(blob.size)"
                    return response
                }
            }
            headers[.contentLength] = String(range.count)
            guard !head else { return Response(status: status, headers: headers) }
            let logger = context.logger
            let sent = range
            let body = ResponseBody(contentLength: Int(sent.count)) { writer in
                try await blobs.read(blob, range: sent, logger: logger) { bytes in try await writer.write(bytes) }
                try await writer.finish(nil)
            }
            return Response(status: status, headers: headers, body: body)
        }
    }

    /// Whether an `If-None-Match` value names `etag` (weak or strong), or is `*`.
    static func matches(_ condition: String, etag: String) -> Bool {
        condition.split(separator: ",").contains { candidate in
            var tag = candidate.trimmingCharacters(in: .whitespaces)
            if tag.hasPrefix("W/") { tag.removeFirst(2) }
            return tag == "*" || tag == etag
        }
    }
}
