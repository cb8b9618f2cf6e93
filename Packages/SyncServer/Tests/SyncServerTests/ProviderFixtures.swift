import Foundation
import Hummingbird
import HummingbirdTesting
import JWTKit
import Logging
import Synchronization

@testable import SyncServer

/// A pretend identity provider for the tests of RS256 and ES256 tokens: its keys, JWKS files, and tokens
/// made by hand (unsigned, or signed with the wrong kind of key).
enum ProviderFixtures {
    /// RSA keys take a while to generate: two, made once for all the tests.
    static let rsaKeys: [Insecure.RSA.PrivateKey] = (0..<2).map { _ in
        try! Insecure.RSA.PrivateKey(backing: .init(keySize: .bits2048))
    }

    static func rsa(_ keyID: String, _ index: Int = 0) async throws -> TokenSigningKey {
        try await TokenSigningKey(rsa: rsaKeys[index], keyID: keyID)
    }

    static func es256(_ keyID: String) async throws -> TokenSigningKey {
        try await TokenSigningKey(es256: ES256PrivateKey(), keyID: keyID)
    }

    /// A JWKS document of `keys`, then the JWK objects `extra` as they are.
    static func jwks(_ keys: [TokenSigningKey], extra: [String] = []) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let objects = keys.map { String(decoding: try! encoder.encode($0.publicJWK), as: UTF8.self) } + extra
        return #"{"keys":["# + objects.joined(separator: ",") + "]}"
    }

    /// A fresh JWKS file of `keys` and `extra` (rewrite it with `write`).
    static func jwksFile(_ keys: [TokenSigningKey], extra: [String] = []) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("jwks.json")
        try write(keys, extra: extra, to: file)
        return file
    }

    static func write(_ keys: [TokenSigningKey], extra: [String] = [], to file: URL) throws {
        try Data(jwks(keys, extra: extra).utf8).write(to: file, options: .atomic)
    }

    /// A verifier of the provider whose JWKS is `file`, its keys read, with `secret` when given.
    static func verifier(
        file: URL, secret: String? = nil, configure: (inout IdentityProviderConfiguration) -> Void = { _ in }
    ) async throws -> TokenVerifier {
        var provider = IdentityProviderConfiguration()
        provider.jwksFile = file.path
        configure(&provider)
        let verifier = await TokenVerifier(secret: secret, identityProvider: provider, logger: logger)
        try await verifier.loadProviderKeys(logger: logger)
        return verifier
    }

    static let logger: Logger = {
        var logger = Logger(label: "jwks-test")
        logger.logLevel = .critical
        return logger
    }()

    /// Claims for `subject` with `scopes` under `scopes`, expiring `expiresIn` seconds from now, and `extra`.
    static func claims(
        _ extra: [String: ClaimValue] = [:], subject: String = "alice",
        scopes: ClaimValue = .array([.string("team-1")]),
        expiresIn: TimeInterval = 600
    ) -> TokenClaimSet {
        var claims: [String: ClaimValue] = [
            "sub": .string(subject), "scopes": scopes,
            "exp": .integer(Int64(Date().timeIntervalSince1970 + expiresIn)),
        ]
        claims.merge(extra) { $1 }
        return TokenClaimSet(claims)
    }

    /// A token made by hand: `header` and `claims` as JSON, then `signature` (base64url, empty by default).
    static func handMade(header: [String: String], claims: TokenClaimSet, signature: String = "") throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Base64URL.encode(try encoder.encode(header)) + "." + Base64URL.encode(try encoder.encode(claims)) + "."
            + signature
    }

    /// `claims` signed with HMAC-SHA256 keyed with `secret`, the header saying `alg` and `kid`.
    static func hmacSigned(
        _ claims: TokenClaimSet, secret: [UInt8], alg: String = "HS256", kid: String? = nil
    ) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        var header = JWTHeader()
        header.alg = alg
        if let kid { header.kid = kid }
        return try await keys.sign(claims, header: header)
    }
}

/// A JWKS served over HTTP on 127.0.0.1 by a Hummingbird application: its document can be replaced, and its
/// requests are counted.
final class JWKSServer: Sendable {
    private let document: Mutex<String>
    private let requests = Mutex(0)

    init(_ jwks: String) {
        document = Mutex(jwks)
    }

    /// Serves `jwks` from now on.
    func serve(_ jwks: String) {
        document.withLock { $0 = jwks }
    }

    /// How many times the JWKS was asked for.
    var requestCount: Int { requests.withLock { $0 } }

    /// Runs `body` with the URL of the JWKS while the server runs.
    func run(_ body: @Sendable (String) async throws -> Void) async throws {
        let router = Router()
        router.get("jwks") { [self] _, _ -> String in
            requests.withLock { $0 += 1 }
            return document.withLock { $0 }
        }
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            logger: ProviderFixtures.logger)
        try await app.test(.live) { client in
            try await body("http://127.0.0.1:\(client.port ?? 0)/jwks")
        }
    }
}
