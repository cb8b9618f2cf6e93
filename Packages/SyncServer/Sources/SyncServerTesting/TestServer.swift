import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Prometheus
import SyncCompression
import SyncModels
import SyncProtocol
import SyncServer
import SyncTestSupport

/// A running sync server on a fresh database, and helpers to talk protocol v1 to it: what a test of a
/// server built on `SyncServer` needs, whatever its domain.
///
/// ```swift
/// try await TestServer.run(domain: MyDomain()) { server in
///     let results = try await server.push([EventFixtures.event(scope: "a")], scopes: ["a"])
///     #expect(results[0].status == .accepted)
/// }
/// ```
public struct TestServer: Sendable {
    /// Whether test servers run on the Citus cluster by default (`SYNC_TEST_ON_CITUS` set and not empty).
    public static let onCitus = !(ProcessInfo.processInfo.environment["SYNC_TEST_ON_CITUS"] ?? "").isEmpty

    /// The HS256 key of every test server.
    public static let secret = "test-secret-0123456789abcdef-0123456789abcdef"

    /// The server's client: calls the router directly, or real HTTP on loopback when `live`.
    public let client: any TestClientProtocol
    /// The database the server runs on (fresh for this test, dropped after it).
    public let database: TestDatabase
    public let tokens: TokenVerifier
    public let codec = WireCodec()

    /// Starts a server on a new database, runs `test`, stops it and drops the database.
    /// - Parameters:
    ///   - live: serve real HTTP on a loopback port (`client.port`), instead of calling the router directly.
    ///   - acquireTimeout: how long a request waits for a database connection before 503; generous by default
    ///     so that a loaded machine (the whole repository's tests run at once) does not fail tests spuriously.
    ///   - configure: changes to the test configuration (pool of 4, the standard limits).
    ///   - domain: the domain plugged into the server.
    ///   - citus: on a new database of the Citus cluster of `SYNC_CITUS_URL` (`TestDatabase.citusURL`), its
    ///     tables distributed by the server at start-up (`SYNC_CITUS`). By default, when `SYNC_TEST_ON_CITUS`
    ///     is set: every suite built on this then runs on Citus.
    ///   - test: the test, given the running server.
    public static func run(
        live: Bool = false, acquireTimeout: Duration = .seconds(20), citus: Bool = TestServer.onCitus,
        domain: any SyncDomain, configure: @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ test: @Sendable (TestServer) async throws -> Void
    ) async throws {
        try await TestDatabase.with(citus: citus) { database in
            try await run(
                on: database, live: live, acquireTimeout: acquireTimeout, citus: citus, domain: domain,
                configure: configure, test)
        }
    }

    /// Starts a server on `database`, runs `test` and stops the server, leaving the database as the server left
    /// it: for tests of what survives a restart (two servers one after the other on the same database).
    public static func run(
        on database: TestDatabase, live: Bool = false, acquireTimeout: Duration = .seconds(20),
        citus: Bool = TestServer.onCitus, domain: any SyncDomain,
        configure: @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ test: @Sendable (TestServer) async throws -> Void
    ) async throws {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.databaseURL = database.url.urlString
        configuration.jwtSecret = secret
        configuration.citus = citus
        configuration.databasePoolSize = 4
        configure(&configuration)
        var logger = Logger(label: "sync-server-test")
        logger.logLevel = .warning
        var server = SyncServerApp(
            configuration: configuration, domain: domain, logger: logger, registry: PrometheusCollectorRegistry())
        server.acquireTimeout = acquireTimeout
        let app = try await server.makeApplication()
        let tokens = await TokenVerifier(secret: secret)
        try await app.test(live ? .live : .router) { client in
            try await test(TestServer(client: client, database: database, tokens: tokens))
        }
    }

    // MARK: Tokens

    public func token(_ scopes: [String], subject: String = "alice", ttl: TimeInterval = 600) async throws -> String {
        try await tokens.mint(subject: subject, scopes: scopes, ttl: ttl)
    }

    public func bearer(_ scopes: [String], subject: String = "alice") async throws -> HTTPFields {
        [.authorization: "Bearer " + (try await token(scopes, subject: subject))]
    }

    // MARK: Requests

    /// Sends a request and returns the response.
    public func send(
        _ method: HTTPRequest.Method, _ uri: String, headers: HTTPFields = [:], body: Data? = nil
    ) async throws -> TestResponse {
        try await client.executeRequest(
            uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(bytes: $0) })
    }

    /// Sends a request, again after a pause (up to 10 times) while it is answered 503: a client's retry, as the
    /// protocol tells clients to (a whole suite on two cores kept a test server's request waiting longer for a
    /// database connection than its lease allows). For the helpers that expect success; `send` shows a 503.
    func sendRetryingUnavailable(
        _ method: HTTPRequest.Method, _ uri: String, headers: HTTPFields, body: Data? = nil
    ) async throws -> TestResponse {
        var attempt = 0
        while true {
            attempt += 1
            let response = try await send(method, uri, headers: headers, body: body)
            guard response.status == .serviceUnavailable, attempt < 10 else { return response }
            try await Task.sleep(for: .milliseconds(500))
        }
    }

    /// Pushes events with a token for `scopes`; expects 200 (a 503 is sent again, as a client does).
    public func push(_ events: [Event], scopes: [String], replica: ReplicaID = EventFixtures.replica) async throws
        -> [PushResult]
    {
        let body = try codec.encode(PushRequest(replica: replica, events: events))
        let response = try await sendRetryingUnavailable(
            .post, "/v1/push", headers: try await bearer(scopes), body: body)
        guard response.status == .ok else {
            throw TestServerError("push answered \(response.status): \(String(buffer: response.body))")
        }
        return try decode(PushResponse.self, response).results
    }

    /// Pulls one page; expects 200 (a 503 is sent again, as a client does).
    public func pull(_ request: PullRequest, scopes: [String]) async throws -> PullResponse {
        let response = try await sendRetryingUnavailable(.get, Self.uri(request), headers: try await bearer(scopes))
        guard response.status == .ok else {
            throw TestServerError("pull answered \(response.status): \(String(buffer: response.body))")
        }
        return try decode(PullResponse.self, response)
    }

    public static func uri(_ request: PullRequest) -> String {
        var components = URLComponents()
        components.path = "/v1/pull"
        components.queryItems = request.queryItems.map { URLQueryItem(name: $0.name, value: $0.value) }
        return components.string ?? "/v1/pull"
    }

    public func decode<T: Decodable>(_ type: T.Type, _ response: TestResponse) throws -> T {
        var data = Data(buffer: response.body)
        if response.headers[.contentEncoding] == "gzip" { data = try Gzip.decompress(data) }
        return try codec.decode(type, from: data)
    }

    /// The error body of a failed response.
    public func error(_ response: TestResponse) throws -> ErrorBody.Detail {
        try JSONDecoder().decode(ErrorBody.self, from: Data(buffer: response.body)).error
    }
}

/// A request a test expected to succeed did not.
public struct TestServerError: Error, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
}
