import ArgumentParser
import Foundation
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Testing

@testable import SyncServer

@Suite struct ConfigurationTests {
    @Test func environmentOverridesDefaultsAndFlagsOverrideEnvironment() throws {
        let environment = [
            "SYNC_PORT": "9001", "SYNC_DATABASE_URL": "postgres://a@db:5433/x", "SYNC_JWT_SECRET": "s",
            "SYNC_MAX_EVENTS_PER_PUSH": "10", "SYNC_MAX_BODY_BYTES": "1000",
            "SYNC_COMMUTATIVE_TYPES": "crdt.,doc.",
        ]
        let fromEnvironment = try ServerConfiguration(environment: environment)
        #expect(fromEnvironment.port == 9001)
        #expect(fromEnvironment.limits.maxEventsPerPush == 10 && fromEnvironment.limits.maxCompressedBodyBytes == 1000)
        #expect(fromEnvironment.commutativeTypePrefixes == ["crdt.", "doc."])
        #expect(fromEnvironment.limits.maxPullLimit == ProtocolLimits.standard.maxPullLimit)

        let options = try ServeOptions.parse(["--port", "9002", "--jwt-secret", "flag"])
        let merged = try options.configuration(environment: environment)
        #expect(merged.port == 9002 && merged.jwtSecret == "flag")
        #expect(merged.databaseURL == "postgres://a@db:5433/x")
        // The library has no domain default: nothing is commutative unless the domain or SYNC_COMMUTATIVE_TYPES says so.
        #expect(ServerConfiguration().commutativeTypePrefixes.isEmpty)
    }

    @Test func badValuesAreRefusedWithoutEchoingSecrets() throws {
        #expect(throws: ConfigurationError.self) { try ServerConfiguration(environment: ["SYNC_PORT": "http"]) }
        var configuration = ServerConfiguration()
        configuration.jwtSecret = "short"
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
        configuration.jwtSecret = String(repeating: "k", count: 32)
        configuration.databaseURL = "mysql://nope:secretpassword@x/y"
        do {
            try configuration.validate()
            Issue.record("a bad URL was accepted")
        } catch {
            #expect(!"\(error)".contains("secretpassword"))
        }
    }

    /// `SYNC_CITUS` is a boolean; a server told its plain PostgreSQL is a Citus coordinator fails at start-up
    /// at once, saying so, rather than retrying as for a database not up yet.
    @Test func citusIsABooleanAndAPlainDatabaseIsRefusedAtOnce() async throws {
        #expect(try ServerConfiguration(environment: ["SYNC_CITUS": "true"]).citus)
        #expect(try !ServerConfiguration(environment: ["SYNC_CITUS": "off"]).citus)
        #expect(throws: ConfigurationError.self) { try ServerConfiguration(environment: ["SYNC_CITUS": "maybe"]) }
        let error = await #expect(throws: ConfigurationError.self) {
            try await TestServer.run(citus: false, domain: TestDomain(), configure: { $0.citus = true }) { _ in }
        }
        #expect(error?.message.contains("no Citus extension") == true)
        #expect(!SyncServerApp.isWorthRetrying(try #require(error)))
    }

    /// The pools' idle options: parsed, checked against the pool size and given to PostgresNIO as they say; a
    /// server whose whole pool stays open, without pings, serves.
    @Test func poolOptionsReachPostgresNIOAndAServerServesWithThem() async throws {
        let url = try DatabaseURL("postgres://a@db:5433/x")
        let defaults = ServerConfiguration()
        #expect(defaults.databasePoolMinimum == 0 && defaults.databaseKeepAliveSeconds == 30)
        let standard = Database.clientConfiguration(url, poolSize: 17, options: defaults.poolOptions)
        #expect(standard.options.minimumConnections == 0)
        #expect(standard.options.keepAliveBehavior?.frequency == .seconds(30))

        var direct = try ServerConfiguration(environment: [
            "SYNC_DB_POOL_SIZE": "4", "SYNC_DB_POOL_MIN": "4", "SYNC_DB_KEEPALIVE_SECONDS": "0",
            "SYNC_JWT_SECRET": String(repeating: "k", count: 32),
        ])
        try direct.validate()
        let client = Database.clientConfiguration(url, poolSize: 5, options: direct.poolOptions)
        #expect(client.options.minimumConnections == 4 && client.options.keepAliveBehavior == nil)
        direct.databasePoolMinimum = 5
        #expect(throws: ConfigurationError.self) { try direct.validate() }
        #expect(throws: ConfigurationError.self) {
            try ServerConfiguration(environment: ["SYNC_DB_KEEPALIVE_SECONDS": "-1"])
        }

        try await TestServer.run(
            domain: TestDomain(),
            configure: {
                $0.databasePoolSize = 4
                $0.databasePoolMinimum = 4
                $0.databaseKeepAliveSeconds = 0
            }
        ) { server in
            let headers = try await server.bearer(["p"])
            let push = try server.codec.encode(
                PushRequest(replica: EventFixtures.replica, events: [EventFixtures.event(scope: "p")]))
            #expect(try await server.send(.post, "/v1/push", headers: headers, body: push).status == .ok)
            #expect(try await server.send(.get, "/v1/pull?scope=p", headers: headers).status == .ok)
        }
    }

    @Test func blobSettingsFromEnvironmentAndFlags() throws {
        let defaults = ServerConfiguration().blobs
        #expect(defaults.store == .postgres && defaults.chunkBytes == 4 << 20 && defaults.quotaBytes == 10 << 30)
        #expect(defaults.maxBytes == 4 << 30 && defaults.uploadExpirySeconds == 86_400)
        let environment = [
            "SYNC_BLOB_STORE": "directory:/var/lib/sync/blobs", "SYNC_BLOB_CHUNK_BYTES": "65536",
            "SYNC_BLOB_QUOTA_BYTES": "1000000", "SYNC_BLOB_MAX_BYTES": "500000", "SYNC_UPLOAD_EXPIRY_SECONDS": "3600",
        ]
        let blobs = try ServerConfiguration(environment: environment).blobs
        #expect(blobs.store == .directory("/var/lib/sync/blobs") && blobs.chunkBytes == 65536)
        #expect(blobs.quotaBytes == 1_000_000 && blobs.maxBytes == 500_000 && blobs.uploadExpirySeconds == 3600)
        let options = try ServeOptions.parse(["--blob-store", "postgres", "--blob-chunk-bytes", "4096"])
        let merged = try options.configuration(environment: environment).blobs
        #expect(merged.store == .postgres && merged.chunkBytes == 4096 && merged.quotaBytes == 1_000_000)
        for (name, value) in [
            ("SYNC_BLOB_STORE", "s3://bucket"), ("SYNC_BLOB_STORE", "directory:"), ("SYNC_BLOB_CHUNK_BYTES", "10"),
            ("SYNC_BLOB_CHUNK_BYTES", "\(1 << 30)"), ("SYNC_UPLOAD_EXPIRY_SECONDS", "0"),
        ] {
            #expect(throws: ConfigurationError.self, "\(name)=\(value)") {
                try ServerConfiguration(environment: [name: value])
            }
        }
    }

    @Test func databaseURLs() throws {
        let url = try DatabaseURL("postgres://user:p%40ss@db.local:6543/sync")
        #expect(url.host == "db.local" && url.port == 6543 && url.username == "user")
        #expect(url.password == "p@ss" && url.database == "sync")
        #expect(try DatabaseURL("postgresql://u@h").database == "u")
        #expect(try DatabaseURL(url.with(database: "other").urlString).database == "other")
    }

    @Test func mintedTokensVerifyAndCarryTheirScopes() async throws {
        let verifier = await TokenVerifier(secret: TestServer.secret)
        let token = try await verifier.mint(subject: "carol", scopes: ["a", "b"], ttl: 60)
        let identity = try await verifier.identity(authorization: "Bearer \(token)")
        #expect(identity.subject == "carol" && identity.scopes == ["a", "b"])
        await #expect(throws: ConfigurationError.self) {
            try await verifier.mint(subject: "carol", scopes: ["bad scope"], ttl: 60)
        }
    }
}
