import Foundation
import Hummingbird
import Logging
import Prometheus
import SyncCompression
import SyncModels
import SyncProtocol

/// The HTTP routes of protocol v1 and the operations endpoints, over the services that do the work.
struct SyncAPI: Sendable {
    let tokens: TokenVerifier
    let limiter: RequestLimiter
    let push: PushService
    let pull: PullService
    let codec: WireCodec
    let gzipLevel: Int32
    let metrics: ServerMetrics
    let registry: PrometheusCollectorRegistry
    let readiness: Readiness
    /// Pages read ahead for replicas catching up (see `ReadAhead`).
    var readAhead = ReadAhead(maxEvents: 0)
    /// The live stream's subscribers and frames (`GET /v1/live`); nil: the route answers 503.
    var live: LiveHub? = nil
    /// Upload sessions and committed blobs (`SyncAPI+Blobs.swift`); nil: the blob routes answer 503.
    var blobs: BlobService? = nil
    /// The admin API and the dashboard (`SyncAPI+Admin.swift`); nil: they answer 404.
    var admin: AdminService? = nil
    var adminCredential: AdminCredential? = nil

    /// The routes, as `"METHOD /path"`, that the OpenAPI document must describe exactly.
    func register(on router: Router<SyncRequestContext>) {
        router.post("/v1/push") { request, context in try await self.handlePush(request, context: context) }
        router.get("/v1/pull") { request, context in try await self.handlePull(request, context: context) }
        router.post("/v1/sync") { request, context in try await self.handleSync(request, context: context) }
        router.get("/v1/live") { request, context in try await self.handleLive(request, context: context) }
        router.get("/v1/checksum") { request, context in try await self.handleChecksum(request, context: context) }
        registerBlobs(on: router)
        registerAdmin(on: router)
        router.get("/healthz") { _, _ in Self.json(Data(#"{"status":"ok"}"#.utf8)) }
        router.get("/readyz") { _, context in try await self.handleReady(context: context) }
        router.get("/metrics") { _, _ in self.handleMetrics() }
        router.get("/openapi.json") { _, _ in Self.json(Data(OpenAPIDocument.json.utf8)) }
    }

    // MARK: Handlers

    func handlePush(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try await tokens.identity(authorization: request.headers[.authorization])
        return try await limiter.withSlot(for: identity.subject) {
            let body = try await readBody(request)
            let push = try codec.decode(PushRequest.self, from: body)
            context.access.replica = "\(push.replica)"
            let results = try await self.push.push(
                push.events, replica: push.replica, identity: identity, logger: context.logger)
            context.logger.debug(
                "push", metadata: ["sync.push.events": "\(push.events.count)", "sync.replica": "\(push.replica)"])
            return try respond(Data(EventJSONWriter.pushResponse(results)), to: request)
        }
    }

    func handlePull(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try await tokens.identity(authorization: request.headers[.authorization])
        return try await limiter.withSlot(for: identity.subject) {
            let query = request.uri.queryParameters.map { (name: String($0.key), value: String($0.value)) }
            let pullRequest = try PullRequest(query: query, limits: codec.limits)
            context.access.replica = pullRequest.replica.map { "\($0)" }
            context.access.waits = pullRequest.wait > 0
            let page = try await pull.pull(
                pullRequest, identity: identity, replica: pullRequest.replica, logger: context.logger)
            metrics.recordPulled(page.events.count)
            let marks = Self.marks(of: page, after: pullRequest.cursor, every: pullRequest.markEvery)
            let build: @Sendable () -> Data = {
                Data(
                    EventJSONWriter.page(
                        events: page.events, cursor: page.cursor.encoded, hasMore: page.hasMore,
                        remaining: page.remaining, stable: page.stable, othersStable: page.othersStable,
                        marks: marks, purged: page.purged))
            }
            // A page many waiters get unchanged is encoded and compressed once (marks are the asker's own).
            guard let shared = page.body, marks == nil else { return try respond(build(), to: request) }
            let acceptEncoding = request.headers[.acceptEncoding]
            let encoded = await shared.body(acceptEncoding: acceptEncoding ?? "") { [codec, gzipLevel] in
                let body = build()
                let (bytes, coding) = codec.compressIfWorthIt(body, acceptEncoding: acceptEncoding, level: gzipLevel)
                return (ByteBuffer(bytes: bytes), coding, body.count)
            }
            return respond(encoded: encoded)
        }
    }

    func handleSync(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try await tokens.identity(authorization: request.headers[.authorization])
        return try await limiter.withSlot(for: identity.subject) {
            let body = try await readBody(request)
            let sync = try codec.decode(SyncRequest.self, from: body)
            context.access.replica = "\(sync.replica)"
            let pullRequest = try sync.pullRequest(limits: codec.limits)
            context.access.waits = pullRequest.wait > 0
            // Checked before the push so that a forbidden pull changes nothing.
            let scopes = try PullService.scopes(requested: pullRequest.scopes, identity: identity)
            let results = try await push.push(
                sync.events, replica: sync.replica, identity: identity, logger: context.logger)
            let key = ReadAhead.Key(
                replica: sync.replica, scopes: scopes, cursor: pullRequest.cursor, limit: pull.limit(of: pullRequest),
                exclude: pullRequest.exclude, markEvery: pullRequest.markEvery,
                gzip: ContentCoding.acceptsGzip(request.headers[.acceptEncoding]))
            // A request that pushes events it wants back reads after its push (PROTOCOL.md, `/v1/sync`).
            let mayUseReadAhead = readAhead.isEnabled && (sync.events.isEmpty || pullRequest.exclude != nil)
            let (ready, limitBefore) = mayUseReadAhead ? await readAhead.take(key) : (nil, nil)
            if let prepared = ready {
                try await pull.recordProgress(
                    replica: sync.replica, scopes: scopes, cursor: pullRequest.cursor,
                    acknowledged: pullRequest.acknowledged, retainedFrom: prepared.page.retainedFrom,
                    logger: context.logger)
                metrics.recordReadAhead(used: true)
                metrics.recordPulled(prepared.eventCount)
                readAhead(after: prepared.page, key, limitBefore: limitBefore, logger: context.logger)
                let head = EventJSONWriter.pageHead(results: results)
                guard let segment = prepared.segment else {
                    return try respond(Data(head + prepared.tail), to: request)
                }
                let bytes = Gzip.compress(head: head, then: segment, level: gzipLevel)
                return respond(encoded: (ByteBuffer(bytes: bytes), .gzip, head.count + prepared.tail.count))
            }
            let page = try await pull.pull(
                pullRequest, identity: identity, replica: sync.replica, logger: context.logger)
            metrics.recordPulled(page.events.count)
            readAhead(after: page, key, limitBefore: limitBefore, logger: context.logger)
            let bytes = EventJSONWriter.page(
                events: page.events, cursor: page.cursor.encoded, hasMore: page.hasMore,
                remaining: page.remaining, stable: page.stable, othersStable: page.othersStable, results: results,
                marks: Self.marks(of: page, after: pullRequest.cursor, every: pullRequest.markEvery),
                purged: page.purged)
            return try respond(Data(bytes), to: request)
        }
    }

    func handleChecksum(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try await tokens.identity(authorization: request.headers[.authorization])
        return try await limiter.withSlot(for: identity.subject) {
            let query = request.uri.queryParameters.map { (name: String($0.key), value: String($0.value)) }
            let checksumRequest = try ChecksumRequest(query: query)
            let answer = try await pull.checksum(checksumRequest, identity: identity, logger: context.logger)
            return try respond(try codec.encode(answer), to: request)
        }
    }

    /// After answering `key` with `page`: when more is to pull, reads the page after it ahead, for the
    /// replica's next request (with the limit `ReadAhead.predictedLimit` expects it to ask for, from
    /// `limitBefore`, the limit of the request before this one).
    func readAhead(after page: PullService.Page, _ key: ReadAhead.Key, limitBefore: Int?, logger: Logger) {
        guard readAhead.isEnabled, page.hasMore else { return }
        var following = key
        following.cursor = page.cursor
        following.limit = ReadAhead.predictedLimit(
            asked: key.limit, before: limitBefore, max: codec.limits.maxPullLimit)
        let next = following
        let started = readAhead.start(next, askedLimit: key.limit) { [pull, codec, gzipLevel] in
            let page = try await pull.read(
                scopes: next.scopes, cursor: next.cursor, limit: next.limit, replica: next.replica, record: false,
                exclude: next.exclude, logger: logger)
            let tail = EventJSONWriter.pageTail(
                events: page.events, cursor: page.cursor.encoded, hasMore: page.hasMore, remaining: page.remaining,
                stable: page.stable, othersStable: page.othersStable,
                marks: Self.marks(of: page, after: next.cursor, every: next.markEvery), purged: page.purged)
            // Compressed as `respond` would compress the whole answer (the head is a few bytes per result).
            let segment =
                next.gzip && tail.count >= codec.limits.compressionThresholdBytes
                ? Gzip.segment(tail, level: gzipLevel) : nil
            var header = page
            header.events = []
            return ReadAhead.Prepared(page: header, eventCount: page.events.count, tail: tail, segment: segment)
        }
        if started { metrics.recordReadAhead(used: false) }
    }

    /// The page's `marks` when the request asked for them (`PullRequest.markEvery`), else nil.
    static func marks(of page: PullService.Page, after cursor: ScopeCursor, every: Int?) -> [String]? {
        guard let every else { return nil }
        return cursor.marks(through: page.events.map { (scope: $0.scope, seq: $0.seq) }, every: every)
    }

    func handleReady(context: SyncRequestContext) async throws -> Response {
        guard await readiness.check(logger: context.logger) else {
            throw SyncProtocolError(.serverUnavailable, "the database is unreachable or not migrated yet")
        }
        return Self.json(Data(#"{"status":"ready"}"#.utf8))
    }

    func handleMetrics() -> Response {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(16 * 1024)
        registry.emit(into: &buffer)
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: buffer)))
    }

    // MARK: Bodies

    /// Reads the request body up to the limit of its `Content-Encoding`, then inflates and measures it.
    /// Stops reading at the limit: an oversized body is never held in memory.
    func readBody(_ request: Request) async throws -> Data {
        let coding = try ContentCoding(header: request.headers[.contentEncoding])
        let cap = coding.maxWireBytes(codec.limits)
        if let length = request.headers[.contentLength].flatMap(Int.init), length > cap {
            throw SyncProtocolError.tooLarge("the body is larger than \(cap) bytes")
        }
        var wire = Data()
        for try await chunk in request.body {
            guard wire.count + chunk.readableBytes <= cap else {
                throw SyncProtocolError.tooLarge("the body is larger than \(cap) bytes")
            }
            chunk.withUnsafeReadableBytes { wire.append(contentsOf: $0) }
        }
        let raw = try codec.inflate(wire, coding: coding)
        metrics.recordRequestBody(wire: wire.count, raw: raw.count)
        return raw
    }

    /// A JSON `200`, gzip-compressed when the request accepts it and the body is worth it.
    func respond(_ body: Data, to request: Request) throws -> Response {
        let (bytes, coding) = codec.compressIfWorthIt(
            body, acceptEncoding: request.headers[.acceptEncoding], level: gzipLevel)
        return respond(encoded: (ByteBuffer(bytes: bytes), coding, body.count))
    }

    /// A JSON `200` of a body already encoded (`bytes` of `raw` bytes before `coding`).
    func respond(encoded body: (bytes: ByteBuffer, coding: ContentCoding, raw: Int)) -> Response {
        metrics.recordResponseBody(raw: body.raw, wire: body.bytes.readableBytes)
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        if body.coding == .gzip { headers[.contentEncoding] = "gzip" }
        headers[.vary] = "Accept-Encoding"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: body.bytes))
    }

    static func json(_ body: Data, status: HTTPResponse.Status = .ok) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}
