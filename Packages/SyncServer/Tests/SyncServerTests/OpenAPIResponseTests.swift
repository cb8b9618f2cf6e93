import AsyncHTTPClient
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncCompression
import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Synchronization
import Testing

@testable import SyncServer

/// Every answer the server gives matches the document it serves at `/openapi.json`: real requests to every
/// operation of `OpenAPIDocument.operations`, for its success answers and its main errors, each answer held to
/// the document by `OpenAPIResponseValidator` (status, media type, JSON body against its schema, documented
/// headers). The validator also reports members a body carries that its schema does not declare, which JSON
/// Schema would let through: a field the server added without the document is drift all the same.
///
/// Not produced: 503 (the database would have to fail) and 429 (a token would need 64 requests in flight at
/// once); `reset.required` on a push (it needs compaction to have purged history).
@Suite struct OpenAPIResponseTests {
    static let adminToken = "admin-token-0123456789abcdef"
    /// The scopes of the device token: `oa` for most requests, `ck` for a checksum the server cannot give, `pg`
    /// for a scope whose compaction purged streams, `oq` for the blob quota. `zz` is in no token.
    static let scopes = ["oa", "ck", "pg", "oq"]
    static let otherReplica = ReplicaID(high: 0x0123_4567_89ab_cdef, low: 0x0123_4567_89ab_cdef)

    @Test func everyOperationAnswersAsTheDocumentSays() async throws {
        let checker = Checker(
            validator: try OpenAPIResponseValidator(
                documentJSON: Data(OpenAPIDocument.json.utf8), reportsUndeclaredProperties: true))
        try await TestServer.run(
            live: false,
            configure: {
                $0.adminToken = Self.adminToken
                // 64-KiB chunks (what `TestBlob.chunk` cuts), and blob limits a few requests pass (413).
                $0.blobs.chunkBytes = BlobTests.chunk
                $0.blobs.maxBytes = 150_000
                $0.blobs.quotaBytes = 200_000
            }
        ) { server in
            let client = RouterClient(server: server, checker: checker)
            try await Self.operations(client)
            try await Self.events(client)
            try await Self.checksums(client)
            try await Self.blobs(client)
            try await Self.liveRefusals(client)
            try await Self.undocumentedRoutes(client)
            // Last, so that its counters, errors and series hold what came before.
            try await Self.admin(client)
        }
        // The live stream is served below the router (`LiveChannelHandler`), which the router's test client
        // does not reach: its stream is read over loopback HTTP. That server has no admin token, so it also
        // answers the admin API's 404.
        try await LiveTests.withLiveClient(scopes: ["lv", "lvb"]) { client, server in
            try await Self.live(LiveServerClient(client: client, server: server, checker: checker))
        }

        // Every operation was seen succeeding, and failing when the document lists an error for it: a route
        // added without a request here fails this test.
        let seen = checker.coverage.statuses
        for operation in OpenAPIDocument.operations {
            let statuses = seen[operation] ?? []
            let (method, template) = Checker.split(operation)
            let documented = try checker.validator.documentedStatuses(method: method, pathTemplate: template) ?? []
            #expect(
                statuses.contains { (200..<300).contains($0) },
                "\(operation): no 2xx answer was validated (validated: \(statuses.sorted()))")
            if documented.contains(where: { $0.hasPrefix("4") }) {
                #expect(
                    statuses.contains { (400..<500).contains($0) },
                    "\(operation): no 4xx answer was validated (validated: \(statuses.sorted()))")
            }
        }
    }

    // MARK: Operations

    static func operations(_ client: RouterClient) async throws {
        try await client.send("GET /healthz", 200, "/healthz")
        try await client.send("GET /readyz", 200, "/readyz")
        try await client.send("GET /metrics", 200, "/metrics")
        try await client.send("GET /openapi.json", 200, "/openapi.json")
    }

    /// Push, pull and sync: every kind of push result, pages with every optional member, and their refusals.
    static func events(_ client: RouterClient) async throws {
        let server = client.server
        let device = try await server.bearer(Self.scopes)
        let forged: HTTPFields = [.authorization: "Bearer not-a-token"]
        var unsupported = device
        unsupported[.contentEncoding] = "br"
        func push(_ events: [Event]) throws -> Data {
            try server.codec.encode(PushRequest(replica: EventFixtures.replica, events: events))
        }
        func sync(_ request: SyncRequest) throws -> Data { try server.codec.encode(request) }

        let first = EventFixtures.event(scope: "oa")
        let ordered = EventFixtures.event(scope: "oa", stream: "order:1", version: 1, type: "order.placed")
        // More than 1 KiB of page, so that a pull asking for gzip gets it.
        let more = (0..<6).map { _ in EventFixtures.event(scope: "oa", stream: EventFixtures.stream()) }
        try await client.send(
            "POST /v1/push", 200, "/v1/push", headers: device, body: try push([first, ordered] + more))
        // Each result that is not `accepted`: a duplicate, a stream-version conflict (with currentVersion), the
        // test domain's rule, a scope the token lacks, a blob the scope lacks.
        let missingBlob = TestBlob(size: 10, seed: 90).reference
        let mixed = try await client.send(
            "POST /v1/push", 200, "/v1/push", headers: device,
            body: try push([
                first, EventFixtures.event(scope: "oa", stream: "order:1", version: 1, type: "order.placed"),
                EventFixtures.event(scope: "oa", type: "doc.rejected"), EventFixtures.event(scope: "zz"),
                EventFixtures.event(scope: "oa", type: "file.attached", payload: .object(["blob": missingBlob.json])),
            ]))
        let results = try server.decode(PushResponse.self, mixed).results
        #expect(results.map(\.status) == [.duplicate, .rejected, .rejected, .rejected, .rejected])
        #expect(results.map(\.code) == [nil, .conflictVersion, .validationFailed, .scopeForbidden, .blobMissing])
        try await client.send(
            "POST /v1/push", 200, "/v1/push", headers: device, body: try push([EventFixtures.event(scope: "pg")]))
        try await client.send("POST /v1/push", 400, "/v1/push", headers: device, body: Data("{not json".utf8))
        try await client.send(
            "POST /v1/push", 400, "/v1/push", headers: device, body: Data(#"{"replica":"nope","events":[]}"#.utf8))
        try await client.send("POST /v1/push", 401, "/v1/push", body: try push([first]))
        try await client.send("POST /v1/push", 401, "/v1/push", headers: forged, body: try push([first]))
        let huge = EventFixtures.event(
            scope: "oa", payload: .object(["text": .string(String(repeating: "x", count: 300 * 1024))]))
        try await client.send("POST /v1/push", 413, "/v1/push", headers: device, body: try push([huge]))
        try await client.send("POST /v1/push", 415, "/v1/push", headers: unsupported, body: try push([first]))

        // A scope whose compaction purged streams: a pull from position 0 says what they carried (`purged`).
        try await server.database.execute("INSERT INTO scope_compaction (scope, purged_checksum) VALUES ('pg', 7)")

        let ahead = ScopeCursor(["oa": 1000])
        try await client.send("GET /v1/pull", 200, TestServer.uri(PullRequest()), headers: device)
        try await client.send(
            "GET /v1/pull", 200,
            TestServer.uri(PullRequest(scopes: ["oa"], limit: 2, replica: Self.otherReplica, markEvery: 1)),
            headers: device)
        try await client.send("GET /v1/pull", 200, TestServer.uri(PullRequest(scopes: ["pg"])), headers: device)
        var gzip = device
        gzip[.acceptEncoding] = "gzip"
        let compressed = try await client.send(
            "GET /v1/pull", 200, TestServer.uri(PullRequest(scopes: ["oa"])), headers: gzip)
        #expect(compressed.headers[.contentEncoding] == "gzip", "the page was meant to be compressed")
        try await client.send("GET /v1/pull", 400, "/v1/pull?cursor=bad", headers: device)
        try await client.send("GET /v1/pull", 400, "/v1/pull?limit=0", headers: device)
        try await client.send("GET /v1/pull", 401, "/v1/pull")
        try await client.send("GET /v1/pull", 401, "/v1/pull", headers: forged)
        try await client.send("GET /v1/pull", 403, "/v1/pull?scopes=zz", headers: device)
        try await client.send("GET /v1/pull", 410, TestServer.uri(PullRequest(cursor: ahead)), headers: device)

        let replica = EventFixtures.replica
        try await client.send(
            "POST /v1/sync", 200, "/v1/sync", headers: device,
            body: try sync(
                SyncRequest(
                    replica: replica, events: [EventFixtures.event(scope: "oa")], scopes: ["oa"], limit: 3,
                    markEvery: 1)))
        try await client.send(
            "POST /v1/sync", 200, "/v1/sync", headers: device,
            body: try sync(
                SyncRequest(
                    replica: Self.otherReplica, events: [], cursor: ScopeCursor(["oa": 2]).encoded,
                    acknowledged: ScopeCursor(["oa": 1]).encoded, excludeOwn: true)))
        try await client.send(
            "POST /v1/sync", 200, "/v1/sync", headers: device,
            body: try sync(SyncRequest(replica: replica, events: [], scopes: ["pg"])))
        try await client.send("POST /v1/sync", 400, "/v1/sync", headers: device, body: Data("{not json".utf8))
        try await client.send(
            "POST /v1/sync", 400, "/v1/sync", headers: device,
            body: try sync(SyncRequest(replica: replica, events: [], cursor: "not a cursor")))
        try await client.send(
            "POST /v1/sync", 401, "/v1/sync", body: try sync(SyncRequest(replica: replica, events: [])))
        try await client.send(
            "POST /v1/sync", 403, "/v1/sync", headers: device,
            body: try sync(SyncRequest(replica: replica, events: [], scopes: ["zz"])))
        try await client.send(
            "POST /v1/sync", 410, "/v1/sync", headers: device,
            body: try sync(SyncRequest(replica: replica, events: [], cursor: ahead.encoded, scopes: ["oa"])))
        try await client.send(
            "POST /v1/sync", 413, "/v1/sync", headers: device,
            body: try sync(SyncRequest(replica: replica, events: [huge])))
        try await client.send(
            "POST /v1/sync", 415, "/v1/sync", headers: unsupported,
            body: try sync(SyncRequest(replica: replica, events: [])))
    }

    static func checksums(_ client: RouterClient) async throws {
        let server = client.server
        let device = try await server.bearer(Self.scopes)
        try await client.send("GET /v1/checksum", 200, "/v1/checksum?scope=oa&through=1", headers: device)
        try await client.send("GET /v1/checksum", 200, "/v1/checksum?scope=oa&after=0&through=2", headers: device)
        try await client.send("GET /v1/checksum", 400, "/v1/checksum?scope=oa", headers: device)
        try await client.send("GET /v1/checksum", 400, "/v1/checksum?scope=oa&through=100000", headers: device)
        try await client.send("GET /v1/checksum", 401, "/v1/checksum?scope=oa&through=1")
        try await client.send("GET /v1/checksum", 403, "/v1/checksum?scope=zz&through=0", headers: device)
        // A scope holding events from before the server kept checksums: its prefix cannot be given.
        _ = try await server.push([EventFixtures.event(scope: "ck")], scopes: ["ck"])
        try await server.database.execute("UPDATE scopes SET checksum_from = head WHERE scope = 'ck'")
        try await client.send("GET /v1/checksum", 409, "/v1/checksum?scope=ck&through=1", headers: device)
    }

    /// Upload sessions, chunks, commits and blob reads, with the refusals of each.
    static func blobs(_ client: RouterClient) async throws {
        let server = client.server
        let device = try await server.bearer(Self.scopes)
        var unsupported = device
        unsupported[.contentEncoding] = "br"
        func open(_ scope: Scope, _ reference: BlobReference) throws -> Data {
            try server.codec.encode(UploadRequest(scope: scope, reference: reference))
        }
        /// The headers of a chunk: its SHA-256 (`sha`, by default that of `bytes`), or none.
        func chunk(_ bytes: [UInt8], sha: String? = nil, hashed: Bool = true) -> HTTPFields {
            var headers = device
            headers[.contentType] = "application/octet-stream"
            if hashed { headers[.init(BlobHeader.chunkSHA256)!] = sha ?? BlobHash.sha256(of: bytes).hex }
            return headers
        }

        let blob = TestBlob(size: 2 * BlobTests.chunk + 100, seed: 70, type: "image/png")
        let opened = try await client.send(
            "POST /v1/uploads", 200, "/v1/uploads", headers: device, body: try open("oa", blob.reference))
        let id = try #require(try server.decode(UploadState.self, opened).upload)
        try await client.send("POST /v1/uploads", 400, "/v1/uploads", headers: device, body: Data("{not json".utf8))
        try await client.send(
            "POST /v1/uploads", 400, "/v1/uploads", headers: device,
            body: Data(#"{"scope": "oa", "hash": "\#(blob.hash)", "size": -1, "type": "image/png"}"#.utf8))
        try await client.send("POST /v1/uploads", 401, "/v1/uploads", body: try open("oa", blob.reference))
        try await client.send(
            "POST /v1/uploads", 403, "/v1/uploads", headers: device, body: try open("zz", blob.reference))
        let tooLarge = BlobReference(hash: try BlobHash(String(repeating: "a", count: 64)), size: 150_001, type: "a/b")
        try await client.send("POST /v1/uploads", 413, "/v1/uploads", headers: device, body: try open("oq", tooLarge))
        // Within the largest blob, but past the scope's quota together.
        for (digit, size, status) in [("b", Int64(120_000), 200), ("c", Int64(100_000), 413)] {
            let reference = BlobReference(
                hash: try BlobHash(String(repeating: digit, count: 64)), size: size, type: "a/b")
            try await client.send(
                "POST /v1/uploads", status, "/v1/uploads", headers: device, body: try open("oq", reference))
        }
        try await client.send(
            "POST /v1/uploads", 415, "/v1/uploads", headers: unsupported, body: try open("oa", blob.reference))

        try await client.send("GET /v1/uploads/{id}", 200, "/v1/uploads/\(id)", headers: device)
        try await client.send("GET /v1/uploads/{id}", 401, "/v1/uploads/\(id)")
        try await client.send("GET /v1/uploads/{id}", 404, "/v1/uploads/\(UUID())", headers: device)
        try await client.send("GET /v1/uploads/{id}", 404, "/v1/uploads/not-a-uuid", headers: device)

        let put = "PUT /v1/uploads/{id}/chunks/{index}"
        let zero = blob.chunk(0)
        try await client.send(
            put, 400, "/v1/uploads/\(id)/chunks/0", headers: chunk(zero, hashed: false), body: Data(zero))
        try await client.send(put, 400, "/v1/uploads/\(id)/chunks/7", headers: chunk(zero), body: Data(zero))
        try await client.send(
            put, 400, "/v1/uploads/\(id)/chunks/0", headers: chunk(zero, sha: BlobHash.sha256(of: [1]).hex),
            body: Data(zero))
        try await client.send(put, 401, "/v1/uploads/\(id)/chunks/0", body: Data(zero))
        try await client.send(put, 404, "/v1/uploads/\(UUID())/chunks/0", headers: chunk(zero), body: Data(zero))
        try await client.send(
            put, 413, "/v1/uploads/\(id)/chunks/0", headers: chunk(zero + [1]), body: Data(zero + [1]))
        var encoded = chunk(zero)
        encoded[.contentEncoding] = "gzip"
        try await client.send(put, 415, "/v1/uploads/\(id)/chunks/0", headers: encoded, body: Data(zero))
        for index in 0..<2 {
            try await client.send(
                put, 200, "/v1/uploads/\(id)/chunks/\(index)", headers: chunk(blob.chunk(index)),
                body: Data(blob.chunk(index)))
        }

        let commit = "POST /v1/uploads/{id}/commit"
        try await client.send(commit, 409, "/v1/uploads/\(id)/commit", headers: device)
        try await client.send(
            put, 200, "/v1/uploads/\(id)/chunks/2", headers: chunk(blob.chunk(2)), body: Data(blob.chunk(2)))
        try await client.send(commit, 200, "/v1/uploads/\(id)/commit", headers: device)
        // Again: the session answers committed until it expires.
        try await client.send(commit, 200, "/v1/uploads/\(id)/commit", headers: device)
        try await client.send(commit, 401, "/v1/uploads/\(id)/commit")
        try await client.send(commit, 404, "/v1/uploads/\(UUID())/commit", headers: device)
        // Bytes that do not match the blob's hash (each chunk matches its own).
        let real = TestBlob(size: 1000, seed: 71)
        let lying = TestBlob(bytes: real.bytes, hash: TestBlob(size: 1000, seed: 72).hash)
        let lyingID = try #require(
            try server.decode(
                UploadState.self,
                try await client.send(
                    "POST /v1/uploads", 200, "/v1/uploads", headers: device, body: try open("oa", lying.reference))
            ).upload)
        try await client.send(
            put, 200, "/v1/uploads/\(lyingID)/chunks/0", headers: chunk(lying.chunk(0)), body: Data(lying.chunk(0)))
        try await client.send(commit, 400, "/v1/uploads/\(lyingID)/commit", headers: device)
        // The scope holds the blob now: the answer is the blob, committed, without a session.
        try await client.send(
            "POST /v1/uploads", 200, "/v1/uploads", headers: device, body: try open("oa", blob.reference))

        let path = "/v1/blobs/\(blob.hash)?scope=oa"
        let absent = "/v1/blobs/\(TestBlob(size: 10, seed: 73).hash)?scope=oa"
        for operation in ["HEAD /v1/blobs/{hash}", "GET /v1/blobs/{hash}"] {
            try await client.send(operation, 200, path, headers: device)
            try await client.send(operation, 400, "/v1/blobs/xyz?scope=oa", headers: device)
            try await client.send(operation, 400, "/v1/blobs/\(blob.hash)", headers: device)
            try await client.send(operation, 401, path)
            try await client.send(operation, 403, "/v1/blobs/\(blob.hash)?scope=zz", headers: device)
            try await client.send(operation, 404, absent, headers: device)
            // A range, a condition, and a range past the end. The server applies them to HEAD as to GET.
            var ranged = device
            ranged[.range] = "bytes=100-70000"
            try await client.send(operation, 206, path, headers: ranged)
            var conditional = device
            conditional[.ifNoneMatch] = "\"\(blob.hash)\""
            try await client.send(operation, 304, path, headers: conditional)
            var past = device
            past[.range] = "bytes=\(blob.bytes.count)-"
            let unsatisfiable = try await client.send(operation, 416, path, headers: past)
            #expect(unsatisfiable.headers[.contentRange] == "bytes */\(blob.bytes.count)")
        }
    }

    /// The live stream's refusals: checked before any stream starts, they come through the router.
    static func liveRefusals(_ client: RouterClient) async throws {
        let device = try await client.server.bearer(Self.scopes)
        try await client.send("GET /v1/live", 400, "/v1/live?cursor=bad", headers: device)
        try await client.send("GET /v1/live", 401, "/v1/live")
        try await client.send("GET /v1/live", 403, "/v1/live?scopes=zz", headers: device)
    }

    /// A path the API does not have (404) and known paths with a method they are not served with (405): no
    /// operation of the document, whose description promises the Error body and the `Allow` header.
    static func undocumentedRoutes(_ client: RouterClient) async throws {
        for (method, path, status) in [
            (HTTPRequest.Method.get, "/v2/nothing", 404), (.delete, "/v1/push", 405), (.put, "/v1/sync", 405),
            (.post, "/v1/blobs/\(String(repeating: "a", count: 64))", 405), (.delete, "/dashboard", 405),
        ] {
            let response = try await client.server.send(method, path)
            #expect(response.status.code == status, "\(method) \(path)")
            #expect(response.headers[.contentType] == "application/json", "\(method) \(path)")
            if status == 405 { #expect(response.headers[.allow] != nil, "\(method) \(path)") }
            let violations = try client.checker.validator.validate(
                schemaNamed: "Error", json: Data(buffer: response.body))
            #expect(violations.isEmpty, "\(method) \(path) answered \(status): \(violations.joined(separator: "; "))")
        }
    }

    /// The admin API and the dashboard behind the admin credential; their 404 (no admin token) is the live
    /// server's, which has none.
    static func admin(_ client: RouterClient) async throws {
        let admin: HTTPFields = [.authorization: "Bearer \(Self.adminToken)"]
        let basic: HTTPFields = [
            .authorization: "Basic " + Data("anyone:\(Self.adminToken)".utf8).base64EncodedString()
        ]
        let device = try await client.server.bearer(Self.scopes)
        for (operation, path) in Self.adminRoutes {
            try await client.send(operation, 200, path, headers: admin)
            try await client.send(operation, 200, path, headers: basic)
            try await client.send(operation, 401, path)
            try await client.send(operation, 401, path, headers: [.authorization: "Bearer not-the-admin-token"])
            try await client.send(operation, 403, path, headers: device)
        }
        try await client.send(
            "GET /v1/admin/scopes", 200, "/v1/admin/scopes?search=O&sort=head&order=desc&limit=2&offset=1",
            headers: admin)
        try await client.send("GET /v1/admin/scopes", 400, "/v1/admin/scopes?sort=payload", headers: admin)
        let replicas = "GET /v1/admin/scopes/{scope}/replicas"
        try await client.send(replicas, 200, "/v1/admin/scopes/oa/replicas?limit=1&offset=1", headers: admin)
        try await client.send(replicas, 400, "/v1/admin/scopes/oa/replicas?limit=0", headers: admin)
        try await client.send(replicas, 404, "/v1/admin/scopes/nothing/replicas", headers: admin)
    }

    static let adminRoutes = [
        ("GET /v1/admin/status", "/v1/admin/status"), ("GET /v1/admin/scopes", "/v1/admin/scopes"),
        ("GET /v1/admin/scopes/{scope}/replicas", "/v1/admin/scopes/oa/replicas"), ("GET /dashboard", "/dashboard"),
        ("GET /dashboard/dashboard.js", "/dashboard/dashboard.js"),
        ("GET /dashboard/dashboard.css", "/dashboard/dashboard.css"),
    ]

    // MARK: The live stream

    /// Streams read over loopback HTTP: their answer's head, then each message's data against its schema
    /// (`live`: LiveSubscribed, `events`: LiveFrame, `error`: Error, `behind`: `{}`). Also the refusals as they
    /// come over HTTP (`LiveChannelHandler` hands a request it refuses to Hummingbird), and the admin API's 404.
    static func live(_ client: LiveServerClient) async throws {
        let token = client.client.token
        for (operation, path) in Self.adminRoutes {
            try await client.send(operation, 404, path, token: Self.adminToken)
        }
        try await client.send("GET /v1/live", 401, "/v1/live", token: nil)
        try await client.send("GET /v1/live", 403, "/v1/live?scopes=zz", token: token)

        // Two events before the stream opens (its backfill), one after (a frame as it happens).
        _ = try await client.client.push([EventFixtures.event(scope: "lv"), EventFixtures.event(scope: "lv")])
        let stream = try await client.open("/v1/live?scopes=lv", token: token)
        #expect(stream.status == 200)
        _ = try await client.client.push([EventFixtures.event(scope: "lv")])
        let followed = try await client.read(stream) { messages in
            messages.contains { message in
                guard case .frame(let frame)? = try? LiveMessage(event: message.name, data: message.data) else {
                    return false
                }
                return frame.head >= 3
            }
        }
        #expect(followed.first?.name == LiveMessage.subscribedEvent, "the stream opens with live")
        #expect(followed.contains { $0.name == LiveMessage.frameEvent }, "no frame came")

        // More than the 1,000 events a subscriber is sent from the database: `behind` at once, then the end.
        _ = try await client.client.push((0..<1001).map { _ in EventFixtures.event(scope: "lvb") })
        let behind = try await client.read(try await client.open("/v1/live?scopes=lvb", token: token)) { messages in
            messages.contains { $0.name == LiveMessage.behindEvent }
        }
        #expect(behind.map(\.name) == [LiveMessage.subscribedEvent, LiveMessage.behindEvent])

        // A token that expires: the stream ends with an `error` message. A loaded machine may deliver the request
        // after a short token expired (a 401, validated all the same); a longer one is tried then.
        var ttl: TimeInterval = 2
        var expiring = try await client.open(
            "/v1/live?scopes=lv", token: try await client.server.tokens.mint(subject: "alice", scopes: ["lv"], ttl: ttl)
        )
        while expiring.status == 401 && ttl < 16 {
            ttl *= 2
            expiring = try await client.open(
                "/v1/live?scopes=lv",
                token: try await client.server.tokens.mint(subject: "alice", scopes: ["lv"], ttl: ttl))
        }
        try #require(expiring.status == 200, "the stream did not open (\(expiring.status))")
        let expired = try await client.read(expiring) { messages in
            messages.contains { $0.name == LiveMessage.errorEvent }
        }
        #expect(expired.last?.name == LiveMessage.errorEvent, "the stream ends with error")
    }

    // MARK: Sending and checking

    /// Holds answers to the document and records which operation answered which status.
    struct Checker: Sendable {
        let validator: OpenAPIResponseValidator
        let coverage = Coverage()

        /// `"GET /v1/uploads/{id}"` → `("GET", "/v1/uploads/{id}")`.
        static func split(_ operation: String) -> (method: String, template: String) {
            let parts = operation.split(separator: " ", maxSplits: 1).map(String.init)
            return (parts[0], parts.count > 1 ? parts[1] : "")
        }

        /// Whether `uri`'s path is one of `template`'s (a `{parameter}` stands for one non-empty segment): a
        /// request sent under the wrong operation would be held to the wrong responses.
        static func matches(_ uri: String, _ template: String) -> Bool {
            let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
            let segments = path.split(separator: "/", omittingEmptySubsequences: false)
            let expected = template.split(separator: "/", omittingEmptySubsequences: false)
            guard segments.count == expected.count else { return false }
            return zip(expected, segments).allSatisfy { expected, actual in
                expected.first == "{" && expected.last == "}" ? !actual.isEmpty : expected == actual
            }
        }

        /// Validates one answer of `operation` (headers by lowercased name, body as sent) and records it.
        func check(
            _ operation: String, status: Int, headers: [String: String], body: Data, sourceLocation: SourceLocation
        ) {
            coverage.record(operation, status)
            let (method, template) = Self.split(operation)
            // The document's description promises it on every answer, errors included.
            #expect(
                headers["x-request-id"] != nil, "\(operation) answered \(status) without X-Request-Id",
                sourceLocation: sourceLocation)
            var body = body
            if headers["content-encoding"] == "gzip" {
                do {
                    body = try Gzip.decompress(body)
                } catch {
                    Issue.record(
                        "\(operation) answered \(status) with Content-Encoding gzip, but no gzip stream",
                        sourceLocation: sourceLocation)
                    return
                }
            }
            do {
                let violations = try validator.validate(
                    method: method, pathTemplate: template, status: status, contentType: headers["content-type"],
                    body: body, headers: headers)
                let listed = violations.joined(separator: "\n")
                #expect(
                    violations.isEmpty,
                    "\(operation) answered \(status), which the document does not describe:\n\(listed)",
                    sourceLocation: sourceLocation)
            } catch {
                Issue.record(
                    "\(operation) answered \(status): the document cannot check it: \(error)",
                    sourceLocation: sourceLocation)
            }
        }
    }

    /// The statuses each operation was validated with.
    final class Coverage: Sendable {
        private let seen = Mutex<[String: Set<Int>]>([:])

        func record(_ operation: String, _ status: Int) {
            seen.withLock { _ = $0[operation, default: []].insert(status) }
        }

        var statuses: [String: Set<Int>] { seen.withLock { $0 } }
    }

    /// Requests through the router of a `TestServer`.
    struct RouterClient: Sendable {
        let server: TestServer
        let checker: Checker

        /// Sends a request as `operation` (`"GET /v1/uploads/{id}"`), expects `expected`, and holds the answer to
        /// the document.
        @discardableResult
        func send(
            _ operation: String, _ expected: Int, _ uri: String, headers: HTTPFields = [:], body: Data? = nil,
            sourceLocation: SourceLocation = #_sourceLocation
        ) async throws -> TestResponse {
            let (method, template) = Checker.split(operation)
            #expect(Checker.matches(uri, template), "\(uri) is no path of \(operation)", sourceLocation: sourceLocation)
            let methods: [String: HTTPRequest.Method] = ["GET": .get, "HEAD": .head, "POST": .post, "PUT": .put]
            let response = try await server.send(
                try #require(methods[method], sourceLocation: sourceLocation), uri, headers: headers, body: body)
            let answer = String(buffer: response.body).prefix(300)
            #expect(
                response.status.code == expected,
                "\(operation) \(uri): expected \(expected), got \(response.status.code): \(answer)",
                sourceLocation: sourceLocation)
            var fields: [String: String] = [:]
            for field in response.headers {
                fields[field.name.canonicalName] =
                    fields[field.name.canonicalName].map { "\($0), \(field.value)" } ?? field.value
            }
            // HEAD answers have no body; what the router's client returns for one is not what a client gets.
            checker.check(
                operation, status: response.status.code, headers: fields,
                body: method == "HEAD" ? Data() : Data(buffer: response.body), sourceLocation: sourceLocation)
            return response
        }
    }

    /// Requests over loopback HTTP to a live `TestServer`.
    struct LiveServerClient: Sendable {
        let client: LiveTests.LiveClient
        let server: TestServer
        let checker: Checker

        /// An answer's head, and its body still to read.
        struct Stream: Sendable {
            var status: Int
            var body: HTTPClientResponse.Body
        }

        static func fields(_ response: HTTPClientResponse) -> [String: String] {
            var fields: [String: String] = [:]
            for (name, value) in response.headers {
                fields[name.lowercased()] = fields[name.lowercased()].map { "\($0), \(value)" } ?? value
            }
            return fields
        }

        /// Sends `GET uri` as `operation`, expects `expected`, and holds the whole answer to the document.
        func send(
            _ operation: String, _ expected: Int, _ uri: String, token: String?,
            sourceLocation: SourceLocation = #_sourceLocation
        ) async throws {
            var request = HTTPClientRequest(url: client.base + uri)
            if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
            let (response, body) = try await client.execute(request)
            let status = Int(response.status.code)
            #expect(
                status == expected, "\(operation) \(uri): expected \(expected), got \(status)",
                sourceLocation: sourceLocation)
            checker.check(
                operation, status: status, headers: Self.fields(response), body: Data(buffer: body),
                sourceLocation: sourceLocation)
        }

        /// Opens `GET uri` (a live stream) and holds its answer's head to the document: the body, for a stream,
        /// is read by `read`, message by message; a refusal's body is read and checked here.
        func open(_ uri: String, token: String, sourceLocation: SourceLocation = #_sourceLocation) async throws
            -> Stream
        {
            var request = HTTPClientRequest(url: client.base + uri)
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            let response = try await client.http.execute(request, timeout: .seconds(60))
            let status = Int(response.status.code)
            var body = Data()
            if status != 200 { body = Data(buffer: try await response.body.collect(upTo: 1 << 20)) }
            checker.check(
                "GET /v1/live", status: status, headers: Self.fields(response), body: body,
                sourceLocation: sourceLocation)
            return Stream(status: status, body: response.body)
        }

        /// Reads the stream's messages until `enough` holds of them, the stream ends, or a minute passes, and
        /// holds each message's data to its schema.
        func read(
            _ stream: Stream, sourceLocation: SourceLocation = #_sourceLocation,
            until enough: @escaping @Sendable ([ServerSentEventParser.Event]) -> Bool
        ) async throws -> [ServerSentEventParser.Event] {
            let messages = try await withThrowingTaskGroup(of: [ServerSentEventParser.Event]?.self) { group in
                group.addTask {
                    var parser = ServerSentEventParser()
                    var messages: [ServerSentEventParser.Event] = []
                    for try await chunk in stream.body {
                        for case .event(let message) in try parser.feed(chunk.readableBytesView) {
                            messages.append(message)
                        }
                        if enough(messages) { break }
                    }
                    return messages
                }
                // A bound on a stream that would not say what is awaited, so that it fails the test, not hangs it.
                group.addTask {
                    try await Task.sleep(for: .seconds(60))
                    return nil
                }
                let first = try await group.next() ?? nil
                group.cancelAll()
                return first
            }
            guard let messages else {
                Issue.record(
                    "GET /v1/live: the stream did not say what was awaited within a minute",
                    sourceLocation: sourceLocation)
                return []
            }
            for message in messages {
                let data = String(decoding: message.data, as: UTF8.self)
                let schema: String
                switch message.name {
                case LiveMessage.subscribedEvent: schema = "LiveSubscribed"
                case LiveMessage.frameEvent: schema = "LiveFrame"
                case LiveMessage.errorEvent: schema = "Error"
                case LiveMessage.behindEvent:
                    #expect(data == "{}", "GET /v1/live 200: behind's data is \(data)", sourceLocation: sourceLocation)
                    continue
                default:
                    Issue.record(
                        "GET /v1/live 200: a message the document does not list: \(message.name)",
                        sourceLocation: sourceLocation)
                    continue
                }
                let violations = try checker.validator.validate(schemaNamed: schema, json: message.data)
                let listed = violations.joined(separator: "\n")
                #expect(
                    violations.isEmpty,
                    "GET /v1/live 200: the \(message.name) message's data is no \(schema):\n\(listed)",
                    sourceLocation: sourceLocation)
            }
            return messages
        }
    }
}
