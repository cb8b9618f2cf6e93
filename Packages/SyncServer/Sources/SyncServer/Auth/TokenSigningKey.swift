import Foundation
import JWTKit

/// A private key that signs tokens the way an identity provider does (RS256 or ES256, with a `kid`), and
/// its public half as a JWKS: for `sync-server token --private-key`, `sync-server jwks`, and tests.
public struct TokenSigningKey: Sendable {
    public let algorithm: TokenAlgorithm
    /// The `kid` tokens carry and the JWKS lists.
    public let keyID: String
    /// The public key as a JWK: `kty`, `use`, `alg`, `kid` and the key's numbers.
    public let publicJWK: [String: String]
    private let keys: JWTKeyCollection

    /// An RS256 key.
    /// - Throws: jwt-kit's error when the key's numbers cannot be read.
    public init(rsa key: Insecure.RSA.PrivateKey, keyID: String) async throws {
        let numbers = try key.publicKey.getKeyPrimitives()
        let keys = JWTKeyCollection()
        await keys.add(rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: keyID))
        self.init(
            algorithm: .rs256, keyID: keyID,
            numbers: [
                "kty": "RSA", "n": Base64URL.encode(numbers.modulus), "e": Base64URL.encode(numbers.publicExponent),
            ],
            keys: keys)
    }

    /// An ES256 key (P-256).
    /// - Throws: `ConfigurationError` when the key's coordinates cannot be read.
    public init(es256 key: ES256PrivateKey, keyID: String) async throws {
        guard let point = key.publicKey.parameters else {
            throw ConfigurationError(message: "the P-256 key's public point cannot be read")
        }
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: key, kid: JWKIdentifier(string: keyID))
        self.init(
            algorithm: .es256, keyID: keyID, numbers: ["kty": "EC", "crv": "P-256", "x": point.x, "y": point.y],
            keys: keys)
    }

    /// The key of a PEM file: an RSA key (2048 bits or more) for RS256 or a P-256 key for ES256, PKCS#8 or
    /// the key type's own format.
    /// - Parameters:
    ///   - pem: the private key, PEM-encoded.
    ///   - keyID: the `kid` tokens carry and the JWKS lists.
    ///   - algorithm: the algorithm the key is for; nil: the one its type allows.
    /// - Throws: `ConfigurationError` when the PEM is not such a key (the message never quotes it).
    public init(pem: String, keyID: String, algorithm: TokenAlgorithm? = nil) async throws {
        switch algorithm {
        case .rs256?:
            guard let key = try? Insecure.RSA.PrivateKey(pem: pem) else {
                throw ConfigurationError(message: "the private key is not an RSA key of 2048 bits or more in PEM")
            }
            try await self.init(rsa: key, keyID: keyID)
        case .es256?:
            guard let key = try? ES256PrivateKey(pem: pem) else {
                throw ConfigurationError(message: "the private key is not a P-256 key in PEM")
            }
            try await self.init(es256: key, keyID: keyID)
        case .hs256?:
            throw ConfigurationError(message: "HS256 tokens are signed with the JWT secret, not a private key")
        case nil:
            if let key = try? Insecure.RSA.PrivateKey(pem: pem) {
                try await self.init(rsa: key, keyID: keyID)
            } else if let key = try? ES256PrivateKey(pem: pem) {
                try await self.init(es256: key, keyID: keyID)
            } else {
                throw ConfigurationError(
                    message: "the private key is neither an RSA key of 2048 bits or more nor a P-256 key in PEM")
            }
        }
    }

    private init(algorithm: TokenAlgorithm, keyID: String, numbers: [String: String], keys: JWTKeyCollection) {
        self.algorithm = algorithm
        self.keyID = keyID
        self.publicJWK = numbers.merging(["use": "sig", "alg": algorithm.rawValue, "kid": keyID]) { $1 }
        self.keys = keys
    }

    /// The public key as a JWKS document, `{"keys":[…]}`, what `SYNC_JWKS_FILE` or `SYNC_JWKS_URL` serves.
    public var jwks: String {
        Self.jwks([self])
    }

    /// A JWKS document listing the public keys of `keys`.
    public static func jwks(_ keys: [TokenSigningKey]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(["keys": keys.map(\.publicJWK)])) ?? Data(#"{"keys":[]}"#.utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// `claims` signed with this key, its `kid` in the header.
    public func sign(_ claims: TokenClaimSet) async throws -> String {
        try await keys.sign(claims, kid: JWKIdentifier(string: keyID))
    }

    /// A token for `subject` and `scopes`, valid for `ttl` seconds from `now`, with the claims `rules` read:
    /// the subject and scopes (an array) under the claims it names, `aud` and `iss` when it requires them,
    /// and `exp` and `iat`.
    public func mint(
        subject: String, scopes: [String], ttl: TimeInterval, rules: ClaimRules = ClaimRules(), now: Date = Date()
    ) async throws -> String {
        var claims: [String: ClaimValue] = [
            rules.subjectClaim: .string(subject), rules.scopesClaim: .array(scopes.map(ClaimValue.string)),
            "exp": .integer(Int64((now + ttl).timeIntervalSince1970)),
            "iat": .integer(Int64(now.timeIntervalSince1970)),
        ]
        if let audience = rules.audience { claims["aud"] = .string(audience) }
        if let issuer = rules.issuer { claims["iss"] = .string(issuer) }
        return try await sign(TokenClaimSet(claims))
    }
}
