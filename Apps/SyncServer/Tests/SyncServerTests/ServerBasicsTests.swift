import Foundation
import Hummingbird
import HummingbirdTesting
import OpenAPIKit
import SyncProtocol
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
            let router = Router()
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
            let method = try await server.send(.delete, "/v1/push")
            #expect(method.status.code == 405 || method.status == .notFound)
            #expect([ErrorCode.methodNotAllowed, .routeNotFound].contains(try server.error(method).code))
        }
    }

    @Test func metricsExposeRequestsEventsAndBytes() async throws {
        try await TestServer.run { server in
            _ = try await server.push([Fixtures.event(scope: "m1")], scopes: ["m1"])
            _ = try await server.pull(PullRequest(), scopes: ["m1"])
            _ = try await server.send(.get, "/nowhere")
            let response = try await server.send(.get, "/metrics")
            #expect(response.status == .ok)
            let text = String(buffer: response.body)
            for name in [
                "sync_events_total{status=\"accepted\"}", "sync_push_batch_size", "sync_body_bytes_total",
                "sync_db_connections_in_use", "sync_longpolls_active", "sync_events_pulled_total",
                "sync_http_requests_total{route=\"/v1/push\",method=\"POST\",status=\"200\"}",
                "sync_http_request_duration_seconds_bucket{route=\"/v1/pull\",method=\"GET\",status=\"200\"",
                "sync_http_requests_total{route=\"NotFound\",method=\"GET\",status=\"404\"}",
            ] {
                #expect(text.contains(name), "\(name) missing from /metrics")
            }
        }
    }

    @Test func migrationsAreIdempotentUnderConcurrentStarts() async throws {
        try await TestDatabase.with { database in
            let migrator = Migrator(migrations: [Migration.core] + NoteQuotaRule(quota: 1).migrations)
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
                #expect(applied.sorted() == ["0001-core", "note-quota-0001"])
            }
            let again = try await TestServer.withClient(database) {
                try await migrator.migrate($0, logger: TestDatabase.logger)
            }
            #expect(again.isEmpty)
            let recorded = try await database.integers("SELECT count(*) FROM schema_migrations")
            #expect(recorded == [2])
        }
    }
}
