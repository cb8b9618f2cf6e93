import ArgumentParser
import Foundation
import HummingbirdTesting
import JWTKit
import SyncModels
import SyncProtocol
import SyncServerTesting
import Testing

@testable import SyncServer

/// Tokens of an identity provider (RS256, ES256) verified against its JWKS, next to the shared secret's
/// HS256 tokens.
@Suite struct JWKSTokenTests {
    typealias Fixtures = ProviderFixtures

    /// The identity `token` proves to `verifier`, or the code it is refused with.
    func outcome(_ verifier: TokenVerifier, _ token: String) async -> Result<TokenIdentity, SyncProtocolError> {
        do {
            return .success(try await verifier.identity(authorization: "Bearer \(token)"))
        } catch {
            return .failure(error)
        }
    }

    func refusal(_ verifier: TokenVerifier, _ token: String) async -> ErrorCode? {
        guard case .failure(let error) = await outcome(verifier, token) else { return nil }
        #expect(!error.message.contains(token), "the message never quotes the token")
        return error.code
    }

    @Test func rs256AndES256TokensVerifyAgainstTheJWKS() async throws {
        let rsa = try await Fixtures.rsa("rsa-1")
        let ec = try await Fixtures.es256("ec-1")
        let verifier = try await Fixtures.verifier(file: try Fixtures.jwksFile([rsa, ec]))
        for key in [rsa, ec] {
            let token = try await key.mint(subject: "carol", scopes: ["team-1", "team-2"], ttl: 60)
            let identity = try await verifier.identity(authorization: "Bearer \(token)")
            #expect(identity.subject == "carol" && identity.scopes == ["team-1", "team-2"])
            #expect(identity.expiresAt.map { $0 > Date() } == true)
            // Verified once, then served from the cache.
            #expect(try await verifier.identity(authorization: "Bearer \(token)") == identity)
        }
        // A key of the JWKS signs only with its own algorithm: the RSA key's kid on an ES256 token is unknown.
        let impostor = try await TokenSigningKey(es256: ES256PrivateKey(), keyID: "rsa-1")
        #expect(
            await refusal(verifier, try await impostor.mint(subject: "eve", scopes: ["team-1"], ttl: 60))
                == .authInvalid)
        // A key that is not in the JWKS, under a kid that is.
        let stranger = try await Fixtures.es256("ec-1")
        #expect(
            await refusal(verifier, try await stranger.mint(subject: "eve", scopes: ["team-1"], ttl: 60))
                == .authInvalid)
    }

    @Test func expiryAndNotBeforeAllowForTheLeeway() async throws {
        let key = try await Fixtures.es256("ec-1")
        let file = try Fixtures.jwksFile([key])
        let verifier = try await Fixtures.verifier(file: file) { $0.claims.leewaySeconds = 30 }
        let now = Date().timeIntervalSince1970
        #expect(
            await refusal(verifier, try await key.sign(Fixtures.claims(expiresIn: -10))) == nil, "within the leeway")
        #expect(await refusal(verifier, try await key.sign(Fixtures.claims(expiresIn: -40))) == .authExpired)
        let early = Fixtures.claims(["nbf": .integer(Int64(now + 10))])
        #expect(await refusal(verifier, try await key.sign(early)) == nil, "nbf within the leeway")
        let tooEarly = Fixtures.claims(["nbf": .integer(Int64(now + 100))])
        #expect(await refusal(verifier, try await key.sign(tooEarly)) == .authInvalid)
        let noExpiry = TokenClaimSet(["sub": .string("alice"), "scopes": .array([])])
        #expect(await refusal(verifier, try await key.sign(noExpiry)) == .authInvalid)

        let strict = try await Fixtures.verifier(file: file) { $0.claims.leewaySeconds = 0 }
        #expect(await refusal(strict, try await key.sign(Fixtures.claims(expiresIn: -10))) == .authExpired)
        #expect(await refusal(strict, try await key.sign(early)) == .authInvalid)
    }

    @Test func audienceAndIssuerAreCheckedWhenConfigured() async throws {
        let key = try await Fixtures.rsa("rsa-1")
        let file = try Fixtures.jwksFile([key])
        let verifier = try await Fixtures.verifier(file: file) {
            $0.claims.audience = "sync-api"
            $0.claims.issuer = "https://idp.example.com/"
        }
        let issuer: ClaimValue = .string("https://idp.example.com/")
        func token(_ extra: [String: ClaimValue]) async throws -> String {
            try await key.sign(Fixtures.claims(extra))
        }
        #expect(await refusal(verifier, try await token(["aud": .string("sync-api"), "iss": issuer])) == nil)
        let audiences: ClaimValue = .array([.string("other"), .string("sync-api")])
        #expect(await refusal(verifier, try await token(["aud": audiences, "iss": issuer])) == nil)
        #expect(await refusal(verifier, try await token(["aud": .string("other"), "iss": issuer])) == .authInvalid)
        #expect(
            await refusal(verifier, try await token(["aud": .array([.string("other")]), "iss": issuer])) == .authInvalid
        )
        #expect(await refusal(verifier, try await token(["iss": issuer])) == .authInvalid, "no aud")
        let otherIssuer: ClaimValue = .string("https://evil.example.com/")
        #expect(
            await refusal(verifier, try await token(["aud": .string("sync-api"), "iss": otherIssuer])) == .authInvalid)
        #expect(await refusal(verifier, try await token(["aud": .string("sync-api")])) == .authInvalid, "no iss")
        // `mint` writes the audience and issuer the rules require.
        var rules = ClaimRules()
        rules.audience = "sync-api"
        rules.issuer = "https://idp.example.com/"
        #expect(await refusal(verifier, try await key.mint(subject: "a", scopes: ["b"], ttl: 60, rules: rules)) == nil)
        // Without an audience configured, any audience is accepted.
        let open = try await Fixtures.verifier(file: file)
        #expect(await refusal(open, try await token(["aud": .string("other")])) == nil)
    }

    @Test func anUnknownKidReadsTheJWKSAgainAtMostOncePerInterval() async throws {
        let old = try await Fixtures.rsa("2024", 0)
        let rotated = try await Fixtures.rsa("2025", 1)
        let file = try Fixtures.jwksFile([old])
        // An interval no test run outlasts: what happens within it does not depend on the machine's speed.
        let verifier = try await Fixtures.verifier(file: file) { $0.unknownKeyRefreshInterval = .seconds(3600) }
        let provider = try #require(verifier.provider)
        #expect(provider.readings == 0, "the first reading is the load, not a refresh")
        let token = try await rotated.mint(subject: "alice", scopes: ["team-1"], ttl: 60)

        // The provider rotates a key in: the first token that names it makes the server read the JWKS again.
        try Fixtures.write([old, rotated], to: file)
        #expect(try await verifier.identity(authorization: "Bearer \(token)").subject == "alice")
        #expect(provider.readings == 1)

        // Within the interval, unknown kids do not make the server read the JWKS again: they are refused, even
        // a key the provider has just added.
        let stranger = try await Fixtures.es256("made-up")
        try Fixtures.write([old, rotated, stranger], to: file)
        for _ in 0..<20 {
            let early = try await stranger.mint(subject: "eve", scopes: ["team-1"], ttl: 60)
            #expect(await refusal(verifier, early) == .authInvalid)
        }
        #expect(provider.readings == 1)

        // Past the interval (none here), the next unknown kid reads it again; a kid still unknown after a
        // reading is refused.
        let eager = try await Fixtures.verifier(file: file) { $0.unknownKeyRefreshInterval = .zero }
        let eagerProvider = try #require(eager.provider)
        try Fixtures.write([old], to: file)
        let later = try await Fixtures.es256("later")
        try Fixtures.write([old, later], to: file)
        #expect(await refusal(eager, try await later.mint(subject: "eve", scopes: ["team-1"], ttl: 60)) == nil)
        #expect(eagerProvider.readings == 1)
        let forged = try await Fixtures.es256("forged")
        #expect(
            await refusal(eager, try await forged.mint(subject: "eve", scopes: ["team-1"], ttl: 60)) == .authInvalid)
        #expect(eagerProvider.readings == 2)
    }

    @Test func aFloodOfMadeUpKidsReadsTheJWKSURLOnce() async throws {
        let key = try await Fixtures.es256("ec-1")
        let server = JWKSServer(Fixtures.jwks([key]))
        try await server.run { url in
            var provider = IdentityProviderConfiguration()
            provider.jwksURL = url
            // An hour between readings for unknown kids: the flood below cannot outlast it, however loaded the
            // machine (the default, 10 s, is not what this test is about).
            provider.unknownKeyRefreshInterval = .seconds(3600)
            let verifier = await TokenVerifier(secret: nil, identityProvider: provider, logger: Fixtures.logger)
            try await verifier.loadProviderKeys(logger: Fixtures.logger)
            #expect(server.requestCount == 1)
            #expect(await refusal(verifier, try await key.mint(subject: "alice", scopes: ["a"], ttl: 60)) == nil)
            let claims = Fixtures.claims()
            try await withThrowingTaskGroup(of: ErrorCode?.self) { group in
                for _ in 0..<100 {
                    let forged = try await TokenSigningKey(es256: ES256PrivateKey(), keyID: UUID().uuidString)
                    let token = try await forged.sign(claims)
                    group.addTask { await refusal(verifier, token) }
                }
                for try await code in group { #expect(code == .authInvalid) }
            }
            #expect(server.requestCount == 2, "one reading for all the unknown kids within the interval")
        }
    }

    @Test func theJWKSURLIsReadAgainOnSchedule() async throws {
        let old = try await Fixtures.es256("old")
        let new = try await Fixtures.es256("new")
        let server = JWKSServer(Fixtures.jwks([old]))
        try await server.run { url in
            var provider = IdentityProviderConfiguration()
            provider.jwksURL = url
            provider.refreshSeconds = 1
            let verifier = await TokenVerifier(secret: nil, identityProvider: provider, logger: Fixtures.logger)
            try await verifier.loadProviderKeys(logger: Fixtures.logger)
            let service = try #require(verifier.providerRefreshService)
            let token = try await old.mint(subject: "alice", scopes: ["a"], ttl: 600)
            #expect(await refusal(verifier, token) == nil)
            // The provider retires the old key: once the schedule has read the JWKS again, the token it signed
            // is refused, though it was verified (and cached) before.
            server.serve(Fixtures.jwks([new]))
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                // Within a minute: a bound against a hang, not a measure of the schedule.
                var refused = false
                let deadline = ContinuousClock.now + .seconds(60)
                while !refused && ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(100))
                    refused = await refusal(verifier, token) == .authInvalid
                }
                #expect(refused)
                group.cancelAll()
            }
            #expect(server.requestCount >= 2)
            #expect(await refusal(verifier, try await new.mint(subject: "alice", scopes: ["a"], ttl: 600)) == nil)
        }
    }

    @Test func algNoneAndOtherAlgorithmsAreRefused() async throws {
        let key = try await Fixtures.rsa("rsa-1")
        let verifier = try await Fixtures.verifier(
            file: try Fixtures.jwksFile([key]), secret: String(repeating: "s", count: 32))
        let claims = Fixtures.claims()
        for alg in ["none", "None", "NONE", "HS384", "HS512", "RS384", "PS256", "ES384", "EdDSA", ""] {
            let token = try Fixtures.handMade(header: ["alg": alg, "kid": "rsa-1", "typ": "JWT"], claims: claims)
            #expect(await refusal(verifier, token) == .authInvalid, "alg \(alg)")
        }
        #expect(
            await refusal(verifier, try Fixtures.handMade(header: ["kid": "rsa-1"], claims: claims)) == .authInvalid)
        // A real signature does not help a header that names no algorithm the server accepts.
        let signed = try await key.sign(claims)
        let signature = String(signed.split(separator: ".")[2])
        let relabelled = try Fixtures.handMade(
            header: ["alg": "none", "kid": "rsa-1"], claims: claims, signature: signature)
        #expect(await refusal(verifier, relabelled) == .authInvalid)
        // Critical extensions the server does not understand.
        let critical = try Fixtures.handMade(header: ["alg": "RS256", "kid": "rsa-1", "crit": "b64"], claims: claims)
        #expect(await refusal(verifier, critical) == .authInvalid)
        // Garbage.
        for garbage in ["", "a.b", "a.b.c", "..", "e30.e30.", "\(signed).x"] {
            #expect(await refusal(verifier, garbage) != nil, "\(garbage)")
        }
    }

    @Test func hmacAndRSAConfusionIsRefused() async throws {
        let rsa = try await Fixtures.rsa("rsa-1")
        let secret = String(repeating: "k", count: 40)
        // The JWKS also lists a symmetric key: the server never verifies with one from a JWKS.
        let octet = Base64URL.encode(Array("a-shared-key-published-by-mistake-0123456789".utf8))
        let file = try Fixtures.jwksFile(
            [rsa], extra: [#"{"kty":"oct","kid":"hmac-1","alg":"HS256","k":"\#(octet)"}"#])
        let verifier = try await Fixtures.verifier(file: file, secret: secret)
        let claims = Fixtures.claims()
        let publicPEM = Fixtures.rsaKeys[0].publicKey.pemRepresentation
        let publicDER = Array(Fixtures.rsaKeys[0].publicKey.derRepresentation)

        // HS256 signed with the RSA public key's bytes as the HMAC secret, naming the RSA key or not.
        for bytes in [Array(publicPEM.utf8), publicDER] {
            for kid in [nil, "rsa-1"] {
                let token = try await Fixtures.hmacSigned(claims, secret: bytes, kid: kid)
                #expect(await refusal(verifier, token) == .authInvalid)
            }
            // …and the same with a header that says RS256.
            let token = try await Fixtures.hmacSigned(claims, secret: bytes, alg: "RS256", kid: "rsa-1")
            #expect(await refusal(verifier, token) == .authInvalid)
        }
        // A header that says RS256 (or HS256) with the kid of the JWKS's symmetric key, signed with that key.
        let octetBytes = Array("a-shared-key-published-by-mistake-0123456789".utf8)
        for alg in ["RS256", "HS256", "ES256"] {
            let token = try await Fixtures.hmacSigned(claims, secret: octetBytes, alg: alg, kid: "hmac-1")
            #expect(await refusal(verifier, token) == .authInvalid, "\(alg) with the oct key's kid")
        }
        // A header that says RS256, signed with the shared secret (the secret is for HS256 only).
        let withSecret = try await Fixtures.hmacSigned(claims, secret: Array(secret.utf8), alg: "RS256", kid: "rsa-1")
        #expect(await refusal(verifier, withSecret) == .authInvalid)
        // The shared secret's own tokens still verify, kid or not.
        #expect(await refusal(verifier, try await Fixtures.hmacSigned(claims, secret: Array(secret.utf8))) == nil)
        let named = try await Fixtures.hmacSigned(claims, secret: Array(secret.utf8), kid: "rsa-1")
        #expect(await refusal(verifier, named) == nil)
        // Without a secret, no HS256 token is accepted, whatever it was signed with.
        let providerOnly = try await Fixtures.verifier(file: file)
        #expect(
            await refusal(providerOnly, try await Fixtures.hmacSigned(claims, secret: Array(secret.utf8)))
                == .authInvalid)
        #expect(
            await refusal(providerOnly, try await Fixtures.hmacSigned(claims, secret: octetBytes, kid: "hmac-1"))
                == .authInvalid)
        #expect(await refusal(providerOnly, try await rsa.sign(claims)) == nil)
    }

    @Test func scopesAsAnArrayOrASpaceSeparatedString() async throws {
        let key = try await Fixtures.es256("ec-1")
        let file = try Fixtures.jwksFile([key])
        let oauth = try await Fixtures.verifier(file: file) {
            $0.claims.scopesClaim = "scope"
            $0.claims.subjectClaim = "email"
        }
        let stringClaims = TokenClaimSet([
            "email": .string("carol@example.com"), "sub": .string("auth0|123"),
            "scope": .string("openid team-1  team-2 https://api.example.com/read"),
            "exp": .integer(Int64(Date().timeIntervalSince1970 + 60)),
        ])
        let identity = try await oauth.identity(authorization: "Bearer \(try await key.sign(stringClaims))")
        #expect(identity.subject == "carol@example.com" && identity.scopes == ["openid", "team-1", "team-2"])

        var arrayClaims = stringClaims
        arrayClaims.claims["scope"] = .array([.string("team-3"), .string("team-4")])
        let fromArray = try await oauth.identity(authorization: "Bearer \(try await key.sign(arrayClaims))")
        #expect(fromArray.scopes == ["team-3", "team-4"])

        // A token without the claim grants no scope; a claim of another shape makes it invalid.
        arrayClaims.claims["scope"] = nil
        let none = try await oauth.identity(authorization: "Bearer \(try await key.sign(arrayClaims))")
        #expect(none.scopes.isEmpty)
        arrayClaims.claims["scope"] = .integer(3)
        #expect(await refusal(oauth, try await key.sign(arrayClaims)) == .authInvalid)
        arrayClaims.claims["scope"] = .array([.string("a"), .integer(1)])
        #expect(await refusal(oauth, try await key.sign(arrayClaims)) == .authInvalid)
        // No subject under the configured claim.
        arrayClaims.claims["scope"] = .string("a")
        arrayClaims.claims["email"] = nil
        #expect(await refusal(oauth, try await key.sign(arrayClaims)) == .authInvalid)

        // A nested claim (Keycloak's realm roles) by its dotted path.
        let keycloak = try await Fixtures.verifier(file: file) { $0.claims.scopesClaim = "realm_access.roles" }
        let nested = Fixtures.claims(["realm_access": .object(["roles": .array([.string("team-9")])])])
        let roles = try await keycloak.identity(authorization: "Bearer \(try await key.sign(nested))")
        #expect(roles.scopes == ["team-9"])
    }

    @Test func theJWKSKeepsOnlyUsableSigningKeys() async throws {
        let rsa = try await Fixtures.rsa("rsa-1")
        let ec = try await Fixtures.es256("ec-1")
        let extra = [
            #"{"kty":"oct","kid":"hmac-1","k":"c2VjcmV0"}"#,
            #"{"kty":"EC","kid":"p384","crv":"P-384","x":"AA","y":"AA"}"#,
            #"{"kty":"RSA","kid":"enc-1","use":"enc","n":"\#(rsa.publicJWK["n"]!)","e":"AQAB"}"#,
            #"{"kty":"RSA","kid":"short","n":"AQAB","e":"AQAB"}"#,
            #"{"kty":"RSA","n":"\#(rsa.publicJWK["n"]!)","e":"AQAB"}"#,
            #"{"kty":"RSA","kid":7}"#,
            #""not a key""#,
        ]
        let ring = try await JWKSKeyRing(jwks: Data(Fixtures.jwks([rsa, ec], extra: extra).utf8))
        #expect(Set(ring.keys.keys.map(\.keyID)) == ["rsa-1", "ec-1"])
        #expect(ring.skipped == extra.count)
        await #expect(throws: JWKSUnavailable.self) { try await JWKSKeyRing(jwks: Data("[]".utf8)) }
        await #expect(throws: JWKSUnavailable.self) { try await JWKSKeyRing(jwks: Data("<html>".utf8)) }

        // A file that cannot be read, or is not a JWKS, fails the load; a later good reading works.
        let file = try Fixtures.jwksFile([rsa])
        try Data("{}".utf8).write(to: file)
        var provider = IdentityProviderConfiguration()
        provider.jwksFile = file.path
        let verifier = await TokenVerifier(secret: nil, identityProvider: provider, logger: Fixtures.logger)
        await #expect(throws: JWKSUnavailable.self) { try await verifier.loadProviderKeys(logger: Fixtures.logger) }
        try Fixtures.write([rsa], to: file)
        try await verifier.loadProviderKeys(logger: Fixtures.logger)
        #expect(await refusal(verifier, try await rsa.mint(subject: "a", scopes: ["b"], ttl: 60)) == nil)
    }

    @Test func aPEMKeyMintsTokensItsJWKSVerifies() async throws {
        let directory = try Fixtures.jwksFile([]).deletingLastPathComponent()
        let rsaPEM = directory.appendingPathComponent("rsa.pem")
        let ecPEM = directory.appendingPathComponent("ec.pem")
        try Data(Fixtures.rsaKeys[1].pemRepresentation.utf8).write(to: rsaPEM)
        try Data(ES256PrivateKey().pemRepresentation.utf8).write(to: ecPEM)
        let rsa = try await TokenSigningKey(pem: try JWKSCommand.readPEM(rsaPEM.path), keyID: "r")
        let ec = try await TokenSigningKey(pem: try JWKSCommand.readPEM(ecPEM.path), keyID: "e", algorithm: .es256)
        #expect(rsa.algorithm == .rs256 && ec.algorithm == .es256)
        #expect(rsa.publicJWK["kty"] == "RSA" && rsa.publicJWK["d"] == nil)
        #expect(ec.publicJWK["crv"] == "P-256" && ec.publicJWK["d"] == nil)
        await #expect(throws: ConfigurationError.self) {
            try await TokenSigningKey(pem: try JWKSCommand.readPEM(ecPEM.path), keyID: "e", algorithm: .rs256)
        }
        await #expect(throws: ConfigurationError.self) { try await TokenSigningKey(pem: "nonsense", keyID: "x") }
        let file = directory.appendingPathComponent("keys.json")
        try Data(TokenSigningKey.jwks([rsa, ec]).utf8).write(to: file)
        let verifier = try await Fixtures.verifier(file: file)
        for key in [rsa, ec] {
            #expect(await refusal(verifier, try await key.mint(subject: "dev", scopes: ["a", "b"], ttl: 60)) == nil)
        }
        // The commands' options.
        #expect(throws: (any Error).self) { try TokenCommand.parse(["--sub", "a", "--scopes", "b", "--kid", "k"]) }
        #expect(throws: (any Error).self) {
            try TokenCommand.parse(["--sub", "a", "--scopes", "b", "--private-key", rsaPEM.path])
        }
        _ = try TokenCommand.parse(["--sub", "a", "--scopes", "b", "--private-key", rsaPEM.path, "--kid", "r"])
        _ = try JWKSCommand.parse(["--private-key", rsaPEM.path, "--kid", "r", "--alg", "RS256"])
    }

    @Test func theCacheForgetsTokensOfRemovedKeys() {
        let cache = VerifiedTokens()
        let now = Date()
        let alice = TokenIdentity(subject: "alice", scopes: ["a"])
        cache.store("t1", alice, expiresAt: now + 60, keyID: "k1")
        cache.store("t2", alice, expiresAt: now + 60, keyID: "k2")
        cache.store("t3", alice, expiresAt: now + 60)
        cache.forget(keyIDs: ["k1"])
        #expect(cache.identity(for: "t1", at: now) == nil)
        #expect(cache.identity(for: "t2", at: now) == alice)
        #expect(cache.identity(for: "t3", at: now) == alice)
    }

    @Test func configurationFromEnvironmentAndFlags() throws {
        let environment = [
            "SYNC_JWKS_URL": "https://idp.example.com/.well-known/jwks.json", "SYNC_JWKS_REFRESH_SECONDS": "120",
            "SYNC_JWT_SUBJECT_CLAIM": "email", "SYNC_JWT_SCOPES_CLAIM": "scope", "SYNC_JWT_AUDIENCE": "sync-api",
            "SYNC_JWT_ISSUER": "https://idp.example.com/", "SYNC_JWT_LEEWAY_SECONDS": "60",
        ]
        let configuration = try ServerConfiguration(environment: environment)
        let provider = configuration.identityProvider
        #expect(provider.source == .url("https://idp.example.com/.well-known/jwks.json"))
        #expect(provider.refreshSeconds == 120 && provider.claims.leewaySeconds == 60)
        #expect(provider.claims.subjectClaim == "email" && provider.claims.scopesClaim == "scope")
        #expect(provider.claims.audience == "sync-api" && provider.claims.issuer == "https://idp.example.com/")
        // The secret may be left out when a JWKS is configured.
        #expect(configuration.jwtSecret.isEmpty)
        try configuration.validate()

        let options = try ServeOptions.parse([
            "--jwks-file", "/etc/sync/jwks.json", "--jwt-audience", "other", "--jwt-leeway-seconds", "5",
            "--jwt-scopes-claim", "scp", "--jwt-issuer", "https://other.example.com/", "--jwks-refresh-seconds", "0",
            "--jwt-subject-claim", "oid",
        ])
        let merged = try options.configuration(environment: environment).identityProvider
        #expect(merged.source == .file("/etc/sync/jwks.json"), "a flag for one source replaces the other")
        #expect(merged.claims.audience == "other" && merged.claims.leewaySeconds == 5)
        #expect(merged.claims.scopesClaim == "scp" && merged.claims.subjectClaim == "oid")
        #expect(merged.claims.issuer == "https://other.example.com/" && merged.refreshSeconds == 0)

        #expect(throws: ConfigurationError.self) {
            try ServerConfiguration(environment: ["SYNC_JWT_LEEWAY_SECONDS": "301"])
        }
        #expect(throws: ConfigurationError.self) {
            try ServerConfiguration(environment: ["SYNC_JWKS_REFRESH_SECONDS": "-1"])
        }
        #expect(ServerConfiguration().identityProvider.claims.leewaySeconds == 30)
        #expect(ServerConfiguration().identityProvider.refreshSeconds == 300)
    }

    @Test func validationNeedsASecretOrAJWKS() throws {
        var configuration = ServerConfiguration()
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
        configuration.identityProvider.jwksFile = "/etc/sync/jwks.json"
        try configuration.validate()
        configuration.jwtSecret = "short"
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
        configuration.jwtSecret = String(repeating: "k", count: 32)
        try configuration.validate()
        configuration.identityProvider.jwksURL = "https://idp.example.com/jwks"
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
        configuration.identityProvider.jwksFile = nil
        try configuration.validate()
        for bad in ["ftp://idp.example.com/jwks", "not a url", "https://"] {
            configuration.identityProvider.jwksURL = bad
            #expect(throws: ConfigurationError.self, "\(bad)") { try configuration.validate() }
        }
        configuration.identityProvider.jwksURL = "http://keycloak:8080/realms/sync/protocol/openid-connect/certs"
        try configuration.validate()
        configuration.identityProvider.claims.leewaySeconds = 301
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
        configuration.identityProvider.claims.leewaySeconds = 30
        configuration.identityProvider.claims.scopesClaim = ""
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
    }

    /// A real server on loopback with PostgreSQL, its identity provider's JWKS served over HTTP: 200 for the
    /// provider's tokens, 401 for the others.
    @Test func endToEndAgainstARunningServer() async throws {
        let key = try await Fixtures.es256("ec-1")
        let rotated = try await Fixtures.rsa("rsa-2", 1)
        let jwks = JWKSServer(Fixtures.jwks([key]))
        try await jwks.run { url in
            try await TestServer.run(
                live: true,
                configure: {
                    $0.jwtSecret = ""
                    $0.identityProvider.jwksURL = url
                    $0.identityProvider.claims.audience = "sync-api"
                    $0.identityProvider.claims.scopesClaim = "scope"
                }
            ) { server in
                var rules = ClaimRules()
                rules.audience = "sync-api"
                rules.scopesClaim = "scope"
                func pull(_ token: String, scope: String = "team-1") async throws -> TestResponse {
                    try await server.send(
                        .get, "/v1/pull?scopes=\(scope)", headers: [.authorization: "Bearer \(token)"])
                }
                func expect401(_ response: TestResponse, _ code: ErrorCode, _ comment: Comment) throws {
                    #expect(response.status.code == 401, comment)
                    #expect(try server.error(response).code == code, comment)
                }
                let good = try await key.mint(subject: "alice", scopes: ["team-1"], ttl: 60, rules: rules)
                #expect(try await pull(good).status == .ok)
                #expect(try await pull(good, scope: "team-2").status.code == 403)

                var otherAudience = rules
                otherAudience.audience = "another-app"
                try expect401(
                    try await pull(
                        try await key.mint(subject: "alice", scopes: ["team-1"], ttl: 60, rules: otherAudience)),
                    .authInvalid, "wrong audience")
                try expect401(
                    try await pull(try await key.mint(subject: "alice", scopes: ["team-1"], ttl: -60, rules: rules)),
                    .authExpired, "expired")
                let none = try Fixtures.handMade(
                    header: ["alg": "none"], claims: Fixtures.claims(["aud": .string("sync-api")]))
                try expect401(try await pull(none), .authInvalid, "alg none")
                try expect401(try await pull(try await server.token(["team-1"])), .authInvalid, "no secret, no HS256")

                // The provider rotates a key in: the server reads its JWKS again for the unknown kid.
                let fresh = try await rotated.mint(subject: "bob", scopes: ["team-1"], ttl: 60, rules: rules)
                jwks.serve(Fixtures.jwks([key, rotated]))
                #expect(try await pull(fresh).status == .ok)
            }
        }
    }
}
