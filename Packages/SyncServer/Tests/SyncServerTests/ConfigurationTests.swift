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
