import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import OpenAPIKit
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Testing

@testable import SyncServer

@Suite struct ServerBasicsTests {
    @Test func healthAndReadiness() async throws {
        try await TestServer.run { server in
            let health = try await server.send(.get, "/healthz")
            #expect(health.status == .ok)
            #expect(String(buffer: health.body) == #"{"status":"ok"}"#)
            let ready = try await server.send(.get, "/readyz")
            #expect(ready.status == .ok)
            #expect(ready.headers[.init("X-Request-Id")!] != nil)
        }
    }

    @Test func servedOpenAPIDocumentValidatesAndMatchesTheRoutes() async throws {
        try await TestServer.run { server in
            let response = try await server.send(.get, "/openapi.json")
            #expect(response.status == .ok)
            let document = try JSONDecoder().decode(OpenAPI.Document.self, from: Data(buffer: response.body))
            try document.validate()
            var documented: [String] = []
            for (path, item) in document.paths {
                for endpoint in item.pathItemValue?.endpoints ?? [] {
                    documented.append("\(endpoint.method.rawValue.uppercased()) \(path.rawValue)")
                }
            }
            let router = Router(context: SyncRequestContext.self)
            try await TestServer.api().register(on: router)
            let routes = router.routes.map { "\($0.method) \($0.path)" }
            #expect(documented.sorted() == routes.sorted())
            #expect(routes.sorted() == OpenAPIDocument.operations.sorted())
        }
    }

    @Test func unknownRoutesAndMethodsGetJSONErrors() async throws {
        try await TestServer.run { server in
            let missing = try await server.send(.get, "/v2/pull")
            #expect(missing.status == .notFound)
            #expect(try server.error(missing).code == .routeNotFound)
            // A known path with a method it is not served with: 405 and the methods it is served with.
            for (method, path, allow) in [
                (HTTPRequest.Method.trace, "/v1/push", "POST"), (.delete, "/v1/push", "POST"),
                (.post, "/v1/pull", "GET"),
                (.put, "/v1/sync", "POST"), (.post, "/healthz", "GET"), (.delete, "/openapi.json", "GET"),
                (.get, "/v1/uploads", "POST"), (.delete, "/v1/uploads/abc", "GET"),
                (.get, "/v1/uploads/abc/chunks/1", "PUT"), (.put, "/v1/uploads/abc/commit", "POST"),
                (.post, "/v1/blobs/abc", "HEAD, GET"),
            ] {
                let response = try await server.send(method, path)
                #expect(response.status.code == 405, "\(method) \(path)")
                #expect(response.headers[.allow] == allow, "\(method) \(path)")
                #expect(try server.error(response).code == .methodNotAllowed)
            }
        }
    }

    /// What the OpenAPI document allows, the server accepts: a schema-driven fuzzer generating requests from
    /// it meets no refusal the document does not state.
    @Test func theOpenAPIDocumentStatesWhatTheServerAccepts() async throws {
        let document = try JSONDecoder().decode(OpenAPI.Document.self, from: Data(OpenAPIDocument.json.utf8))
        // Content-Encoding is no free header parameter (it is described with each body instead), so a generator
        // cannot send `Content-Encoding: gzip` with a body that is not gzip.
        for (_, item) in document.paths {
            for endpoint in item.pathItemValue?.endpoints ?? [] {
                for parameter in endpoint.operation.parameters {
                    guard let parameter = parameter.parameterValue, parameter.location == .header else { continue }
                    #expect(parameter.name.lowercased() != "content-encoding", "Content-Encoding is a parameter")
                }
            }
        }
        let pull = try #require(document.paths["/v1/pull"]?.pathItemValue?.get)
        let scopes = try #require(pull.parameters.compactMap(\.parameterValue).first { $0.name == "scopes" })
        let pattern = try #require(scopes.schemaOrContent.schemaValue?.stringContext?.pattern)
        let regex = try Regex(pattern)
        let values = ["a", "a,b.c_d:1-2", "", ",", "a,", "a,,b", "a b", "é", "a;b", String(repeating: "x", count: 129)]
        let cases = values.map { ($0, (try? regex.wholeMatch(in: $0)) != nil) }
        try await TestServer.run { server in
            let headers = try await server.bearer(["a", "b.c_d:1-2"])
            for (value, matches) in cases {
                var components = URLComponents()
                components.path = "/v1/pull"
                components.queryItems = [URLQueryItem(name: "scopes", value: value)]
                let response = try await server.send(.get, components.string!, headers: headers)
                // Within the pattern: served (200); outside it: 400 request.invalid, as documented.
                #expect((response.status == .ok) == matches, "scopes=\(value): \(response.status)")
                if !matches { #expect(response.status == .badRequest, "scopes=\(value)") }
            }
        }
    }

    @Test func metricsExposeRequestsEventsAndBytes() async throws {
        try await TestServer.run { server in
            _ = try await server.push([EventFixtures.event(scope: "m1")], scopes: ["m1"])
            _ = try await server.pull(PullRequest(), scopes: ["m1"])
            _ = try await server.send(.get, "/nowhere")
            let response = try await server.send(.get, "/metrics")
            #expect(response.status == .ok)
            let text = String(buffer: response.body)
            for name in [
                "sync_events_total{status=\"accepted\"}", "sync_push_batch_size", "sync_body_bytes_total",
                "sync_db_connections_in_use", "sync_longpolls_active", "sync_longpolls_parked",
                "sync_events_pulled_total",
                "sync_http_requests_total{route=\"/v1/push\",method=\"POST\",status=\"200\"}",
                "sync_http_request_duration_seconds_bucket{route=\"/v1/pull\",method=\"GET\",status=\"200\"",
                "sync_http_requests_total{route=\"NotFound\",method=\"GET\",status=\"404\"}",
            ] {
                #expect(text.contains(name), "\(name) missing from /metrics")
            }
        }
    }

    /// A database folded before `folded_events` existed: its folded rows (snapshots and lone events that
    /// `folded_streams` pointed at) move out of `events` as they are, and pulls read them as before.
    @Test func foldedRowsMoveToTheirOwnTable() async throws {
        try await TestDatabase.with { database in
            let before = Migrator(migrations: Array(Migration.generic.prefix(5)))
            _ = try await TestServer.withClient(database) { try await before.migrate($0, logger: TestDatabase.logger) }
            try await database.execute(
                """
                INSERT INTO events (scope, seq, event_id, stream, stream_version, type, schema_version, hlc,
                                    dot_replica, dot_counter, payload)
                VALUES ('m', 3, gen_random_uuid(), 'note:a', 3, 'note.snapshot', 1, '0000000000001-0000-0000000000000001',
                        '00000000000000000000000000000001', 3, '{"state":"AAA="}'),
                       ('m', 4, gen_random_uuid(), 'note:b', 1, 'note.created', 1, '0000000000002-0000-0000000000000001',
                        '00000000000000000000000000000001', 4, '{"title":"b"}'),
                       ('m', 5, gen_random_uuid(), 'note:a', 4, 'note.titleSet', 1, '0000000000003-0000-0000000000000001',
                        '00000000000000000000000000000001', 5, '{"title":"a"}')
                """)
            try await database.execute("INSERT INTO folded_streams VALUES ('m', 'note:a', 3), ('m', 'note:b', 4)")
            let all = Migrator(migrations: Array(Migration.generic.prefix(6)))
            let applied = try await TestServer.withClient(database) {
                try await all.migrate($0, logger: TestDatabase.logger)
            }
            #expect(applied == ["0006-folded-events"])
            #expect(try await database.integers("SELECT seq FROM events") == [5])
            #expect(try await database.integers("SELECT seq FROM folded_events ORDER BY seq") == [3, 4])
            let payload = try await database.connection { connection in
                try await connection.query(
                    "SELECT payload FROM folded_events WHERE seq = 3", logger: TestDatabase.logger
                ).collect().first?.decode(ByteBuffer.self)
            }
            #expect(try payload.map(FoldedPayload.json(of:)) == #"{"state":"AAA="}"#)
            #expect(
                try await database.integers("SELECT count(*) FROM pg_tables WHERE tablename = 'folded_streams'") == [0])
        }
    }

    @Test func migrationsAreIdempotentUnderConcurrentStarts() async throws {
        try await TestDatabase.with { database in
            let migrator = Migrator(migrations: Migration.generic + TestRule().migrations)
            try await withThrowingTaskGroup(of: [String].self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        try await TestServer.withClient(database) {
                            try await migrator.migrate($0, logger: TestDatabase.logger)
                        }
                    }
                }
                var applied: [String] = []
                for try await ids in group { applied += ids }
                #expect(
                    applied.sorted() == [
                        "0001-core", "0002-canonical-payloads", "0003-replica-progress-by-scope", "0004-compaction",
                        "0005-event-id-per-scope", "0006-folded-events", "0007-lock-scopes-function",
                        "0008-checksums", "0009-blobs", "0010-blob-collection", "0011-upload-part-hashes",
                        "0012-append-function", "0013-append-with-rules-function", "test-rule-0001",
                    ])
            }
            let again = try await TestServer.withClient(database) {
                try await migrator.migrate($0, logger: TestDatabase.logger)
            }
            #expect(again.isEmpty)
            let recorded = try await database.integers("SELECT count(*) FROM schema_migrations")
            #expect(recorded == [14])
        }
    }
}
