import Foundation
import Hummingbird
import HummingbirdTesting
import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Testing

@testable import SyncServer

/// The admin API and the dashboard (docs/PROTOCOL.md, "Admin API") on a real PostgreSQL (and on the Citus
/// cluster when the suites run there).
@Suite struct AdminAPITests {
    static let adminToken = "admin-token-0123456789abcdef"

    static func run(_ test: @Sendable (TestServer) async throws -> Void) async throws {
        try await TestServer.run(
            configure: {
                $0.adminToken = adminToken
                $0.stablePointRefreshMilliseconds = 0
            }, test)
    }

    static let admin: HTTPFields = [.authorization: "Bearer \(adminToken)"]

    static let routes = [
        "/v1/admin/status", "/v1/admin/scopes", "/v1/admin/scopes/a/replicas", "/dashboard",
        "/dashboard/dashboard.js", "/dashboard/dashboard.css",
    ]

    @Test func offUnlessAnAdminTokenIsConfigured() async throws {
        try await TestServer.run { server in
            for route in Self.routes {
                let response = try await server.send(.get, route, headers: Self.admin)
                #expect(response.status == .notFound, "\(route)")
                #expect(try server.error(response).code == .routeNotFound)
            }
        }
    }

    @Test func onlyTheAdminCredentialGetsIn() async throws {
        try await Self.run { server in
            _ = try await server.push([EventFixtures.event(scope: "a")], scopes: ["a"])
            let basic = "Basic " + Data("anyone:\(Self.adminToken)".utf8).base64EncodedString()
            let wrongBasic = "Basic " + Data("anyone:not-the-token".utf8).base64EncodedString()
            for route in Self.routes {
                let none = try await server.send(.get, route)
                #expect(none.status == .unauthorized, "\(route)")
                #expect(try server.error(none).code == .authMissing)
                #expect(none.headers[.wwwAuthenticate]?.hasPrefix("Basic realm=") == true, "\(route)")
                for wrong in ["Bearer not-the-admin-token", wrongBasic, "Digest x"] {
                    let response = try await server.send(.get, route, headers: [.authorization: wrong])
                    #expect(response.status == .unauthorized, "\(route) \(wrong)")
                    #expect(try server.error(response).code == .authInvalid)
                }
                // A device's valid token, even for the scope asked about: forbidden.
                let device = try await server.send(.get, route, headers: try await server.bearer(["a"]))
                #expect(device.status == .forbidden, "\(route)")
                #expect(try server.error(device).code == .adminRequired)
                for credential in ["Bearer \(Self.adminToken)", basic] {
                    let response = try await server.send(.get, route, headers: [.authorization: credential])
                    #expect(response.status == .ok, "\(route) \(credential.prefix(6))")
                    #expect(response.headers[.cacheControl] == "no-store")
                }
            }
            // The admin token is no device token: it opens no scope.
            let push = try await server.send(.get, "/v1/pull?scopes=a", headers: Self.admin)
            #expect(push.status == .unauthorized)
        }
    }

    @Test func thePageComesWithItsFilesAndReachesNoOtherOrigin() async throws {
        try await Self.run { server in
            let page = try await server.send(.get, "/dashboard", headers: Self.admin)
            #expect(page.headers[.contentType] == "text/html; charset=utf-8")
            let policy = try #require(page.headers[.contentSecurityPolicy])
            #expect(policy.contains("default-src 'none'") && policy.contains("connect-src 'self'"))
            let html = String(buffer: page.body)
            #expect(html.contains("/dashboard/dashboard.js") && html.contains("/dashboard/dashboard.css"))
            for text in [
                html, String(buffer: try await server.send(.get, "/dashboard/dashboard.js", headers: Self.admin).body),
            ] {
                #expect(!text.contains("http://") && !text.contains("https://") && !text.contains("//cdn"))
            }
            let script = try await server.send(.get, "/dashboard/dashboard.js", headers: Self.admin)
            #expect(script.headers[.contentType] == "text/javascript; charset=utf-8")
            #expect(String(buffer: script.body).contains("/v1/admin/status"))
        }
    }

    func get<T: Decodable>(_ type: T.Type, _ server: TestServer, _ uri: String) async throws -> T {
        let response = try await server.send(.get, uri, headers: Self.admin)
        #expect(response.status == .ok, "\(uri): \(String(buffer: response.body))")
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(type, from: Data(buffer: response.body))
    }

    /// Reads `through` in `scope` as `replica`, acknowledging `acknowledged` (what its outbox holds back).
    func sync(_ server: TestServer, _ replica: ReplicaID, scope: String, through: Int64, acknowledged: Int64)
        async throws
    {
        var cursor = ScopeCursor()
        cursor.advance(try Scope(scope), to: through)
        var held = ScopeCursor()
        held.advance(try Scope(scope), to: acknowledged)
        let body = try server.codec.encode(
            SyncRequest(
                replica: replica, events: [], cursor: cursor.encoded, scopes: [try Scope(scope)],
                acknowledged: held.encoded))
        let response = try await server.send(.post, "/v1/sync", headers: try await server.bearer([scope]), body: body)
        #expect(response.status == .ok)
    }

    @Test func countsAreWhatWasPushedAndReplicasWhereTheyAre() async throws {
        try await Self.run { server in
            let first = ReplicaID(high: 1, low: 1)
            let second = ReplicaID(high: 2, low: 2)
            let counts = ["team-alpha": 7, "team-beta": 3, "other": 1]
            for (scope, count) in counts {
                let results = try await server.push(
                    (0..<count).map { _ in EventFixtures.event(scope: try Scope(scope), stream: UUID().uuidString) },
                    scopes: [scope])
                #expect(results.allSatisfy { $0.status == .accepted })
            }
            // A rejected event counts as one, not as a stored event.
            for _ in 0..<2 {
                _ = try await server.push(
                    [EventFixtures.event(scope: "other", stream: "s", version: 1, type: "order.placed")],
                    scopes: ["other"])
            }
            try await sync(server, first, scope: "team-alpha", through: 7, acknowledged: 7)
            try await sync(server, second, scope: "team-alpha", through: 7, acknowledged: 4)

            let all = try await get(AdminScopes.self, server, "/v1/admin/scopes")
            #expect(all.total == 3)
            #expect(all.scopes.map(\.scope) == ["other", "team-alpha", "team-beta"])
            let byName = Dictionary(uniqueKeysWithValues: all.scopes.map { ($0.scope, $0) })
            #expect(byName["team-alpha"]?.head == 7 && byName["team-beta"]?.head == 3 && byName["other"]?.head == 2)
            #expect(byName["team-alpha"]?.storedEvents == 7 && byName["other"]?.storedEvents == 2)
            #expect((byName["team-alpha"]?.bytes ?? 0) > 0)
            // The replicas that pushed never acknowledged anything: the fixture replica holds every scope at 0.
            #expect(byName["team-alpha"]?.replicas == 3)
            #expect(byName["team-alpha"]?.stable == 0 && byName["team-alpha"]?.stableLag == 7)

            let sorted = try await get(AdminScopes.self, server, "/v1/admin/scopes?sort=head&order=desc")
            #expect(sorted.scopes.map(\.scope) == ["team-alpha", "team-beta", "other"])
            let searched = try await get(AdminScopes.self, server, "/v1/admin/scopes?search=TEAM&limit=1&offset=1")
            #expect(searched.total == 2 && searched.scopes.map(\.scope) == ["team-beta"])
            let none = try await get(AdminScopes.self, server, "/v1/admin/scopes?search=%25")
            #expect(none.total == 0, "a search is text, not a pattern")
            for bad in ["sort=payload", "order=up", "limit=0", "limit=501", "offset=-1", "limit=x"] {
                let response = try await server.send(.get, "/v1/admin/scopes?\(bad)", headers: Self.admin)
                #expect(response.status == .badRequest, "\(bad)")
                #expect(try server.error(response).code == .requestInvalid)
            }

            let replicas = try await get(AdminReplicas.self, server, "/v1/admin/scopes/team-alpha/replicas")
            #expect(replicas.head == 7 && replicas.stable == 0 && replicas.total == 3)
            let positions = Dictionary(uniqueKeysWithValues: replicas.replicas.map { ($0.replica, $0) })
            #expect(positions[first.description]?.acknowledged == 7 && positions[first.description]?.behind == 0)
            #expect(positions[second.description]?.acknowledged == 4 && positions[second.description]?.behind == 3)
            #expect(replicas.replicas.first?.holdsStable == true, "the lowest, first, holds the stable point")
            #expect(replicas.replicas.filter(\.holdsStable).count == 1)
            // Past the eviction horizon a replica holds nothing back.
            try await server.database.execute(
                "UPDATE replica_progress SET seen_at = now() - interval '30 days' WHERE replica = \(EventFixtures.replica.description)"
            )
            let after = try await get(AdminReplicas.self, server, "/v1/admin/scopes/team-alpha/replicas")
            #expect(after.stable == 4)
            #expect(after.replicas.filter(\.holdsStable).map(\.replica) == [second.description])
            #expect(after.replicas.first { $0.replica == EventFixtures.replica.description }?.active == false)
            let paged = try await get(
                AdminReplicas.self, server, "/v1/admin/scopes/team-alpha/replicas?limit=1&offset=2")
            #expect(paged.replicas.map(\.replica) == [first.description])
            let missing = try await server.send(.get, "/v1/admin/scopes/nothing/replicas", headers: Self.admin)
            #expect(missing.status == .notFound)

            let status = try await get(AdminStatus.self, server, "/v1/admin/status")
            #expect(status.events.accepted == 12 && status.events.rejected == 1)
            let pushes = status.requests.byRoute.first { $0.method == "POST" && $0.route == "/v1/push" }
            #expect(pushes?.count == 5 && pushes?.errors == 0)
            #expect(status.latency.push.count == 5 && status.latency.push.p99Ms != nil)
            #expect(status.latency.pull.count == 2, "the two syncs")
            #expect(status.series.reduce(0) { $0 + $1.eventsAccepted } == 12)
            #expect(status.errors.contains { $0.code == "request.invalid" && $0.status == 400 && $0.count == 6 })
            #expect(status.errors.contains { $0.code == "route.notFound" && $0.count == 1 })
        }
    }
}
