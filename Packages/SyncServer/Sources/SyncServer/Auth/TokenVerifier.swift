import Foundation
import JWTKit
import Logging
import ServiceLifecycle
import SyncModels
import SyncProtocol

/// Verifies bearer tokens: HS256 tokens signed with the shared secret (`SYNC_JWT_SECRET`), and RS256 or
/// ES256 tokens of an identity provider, against the public keys of its JWKS (`SYNC_JWKS_FILE` or
/// `SYNC_JWKS_URL`). Mints HS256 tokens for development.
///
/// The verifier, not the token, chooses the key: an HS256 token is checked with the secret only, and an
/// RS256 or ES256 token only with the provider key its `kid` names for that algorithm. Any other `alg`,
/// `none` included, a token whose key is not known (after reading the JWKS again), and a header with
/// critical extensions are refused. Error messages say what is wrong with a token but never contain the
/// token or a key.
public struct TokenVerifier: Sendable {
    /// The shared secret's key, when one is configured.
    private let secretKeys: JWTKeyCollection?
    /// The identity provider's keys, when a JWKS is configured.
    let provider: ProviderKeys?
    /// How the provider's tokens are read.
    let providerRules: ClaimRules
    /// How often the provider's JWKS is read again; nil: only for unknown key ids.
    private let refreshInterval: Duration?
    /// Tokens verified lately: a device sends the same token with every request, and verifying it (HMAC or
    /// RSA, base64, JSON) is most of what a long-poll that finds nothing costs.
    private let verified: VerifiedTokens

    /// A verifier of HS256 tokens signed with `secret` (`SYNC_JWT_SECRET`), and no identity provider.
    public init(secret: String) async {
        self.init(secretKeys: await Self.keys(secret: secret), provider: nil, verified: VerifiedTokens())
    }

    /// A verifier of the tokens `secret` signs (when not nil) and of those of `identityProvider` (when it is
    /// configured). The provider's keys are read by `loadProviderKeys`, or by the first token that needs
    /// them.
    public init(secret: String?, identityProvider: IdentityProviderConfiguration, logger: Logger) async {
        let verified = VerifiedTokens()
        let provider = identityProvider.source.map { source in
            ProviderKeys(
                source: source, unknownKeyRefreshInterval: identityProvider.unknownKeyRefreshInterval,
                fetchTimeout: identityProvider.fetchTimeout, logger: logger,
                keysDropped: { keyIDs in verified.forget(keyIDs: keyIDs) })
        }
        var secretKeys: JWTKeyCollection? = nil
        if let secret, !secret.isEmpty { secretKeys = await Self.keys(secret: secret) }
        self.init(
            secretKeys: secretKeys, provider: provider, providerRules: identityProvider.claims,
            refreshInterval: identityProvider.refreshSeconds > 0 ? .seconds(identityProvider.refreshSeconds) : nil,
            verified: verified)
    }

    /// The verifier `configuration` describes: its secret and its identity provider.
    public init(configuration: ServerConfiguration, logger: Logger) async {
        await self.init(
            secret: configuration.jwtSecret, identityProvider: configuration.identityProvider, logger: logger)
    }

    private init(
        secretKeys: JWTKeyCollection?, provider: ProviderKeys?, providerRules: ClaimRules = ClaimRules(),
        refreshInterval: Duration? = nil, verified: VerifiedTokens
    ) {
        self.secretKeys = secretKeys
        self.provider = provider
        self.providerRules = providerRules
        self.refreshInterval = refreshInterval
        self.verified = verified
    }

    private static func keys(secret: String) async -> JWTKeyCollection {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        return keys
    }

    /// A signed token for `subject` and `scopes`, valid for `ttl` seconds from now (HS256, with the secret).
    /// - Throws: `ConfigurationError` for a scope name outside the protocol's rules, or when the verifier
    ///   has no secret.
    public func mint(subject: String, scopes: [String], ttl: TimeInterval, now: Date = Date()) async throws -> String {
        for scope in scopes where !Scope.isValid(scope) {
            throw ConfigurationError(message: "scope \"\(scope)\" is not a valid scope name")
        }
        guard let secretKeys else {
            throw ConfigurationError(message: "minting a token needs the JWT secret (SYNC_JWT_SECRET or --jwt-secret)")
        }
        return try await secretKeys.sign(TokenClaims(subject: subject, scopes: scopes, expiresAt: now + ttl))
    }

    /// The identity an `Authorization` header value proves.
    /// - Throws: `SyncProtocolError` `auth.missing` (no bearer token), `auth.expired`, or `auth.invalid`
    ///   (malformed, wrong signature, algorithm or key, bad claims).
    public func identity(authorization: String?) async throws(SyncProtocolError) -> TokenIdentity {
        guard let authorization, !authorization.isEmpty else {
            throw SyncProtocolError(.authMissing, "an Authorization: Bearer <token> header is required")
        }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw SyncProtocolError(.authMissing, "the Authorization header must be Bearer <token>")
        }
        let token = Self.trimmingBlanks(parts[1])
        let now = Date()
        if let identity = verified.identity(for: token, at: now) { return identity }
        let accepted = try await verify(token, now: now)
        verified.store(token, accepted.identity, expiresAt: accepted.acceptedUntil, keyID: accepted.keyID)
        return accepted.identity
    }

    /// Verifies `token`'s signature with the key its header leads to, then its claims.
    func verify(_ token: String, now: Date) async throws(SyncProtocolError) -> AcceptedToken {
        guard let header = TokenHeader(token: token) else {
            throw SyncProtocolError(.authInvalid, "the token is not valid")
        }
        guard !header.hasCriticalExtensions else {
            throw SyncProtocolError(.authInvalid, "the token's header has critical extensions (crit)")
        }
        switch header.algorithm.flatMap(TokenAlgorithm.init(rawValue:)) {
        case .hs256:
            guard let secretKeys else {
                throw SyncProtocolError(.authInvalid, "tokens signed with a shared secret (HS256) are not accepted")
            }
            return try ClaimRules.sharedSecret.accept(try await Self.claims(of: token, with: secretKeys), now: now)
        case .some(let algorithm):
            guard let provider else {
                throw SyncProtocolError(.authInvalid, "tokens signed with \(algorithm.rawValue) are not accepted")
            }
            guard let keyID = header.keyID else {
                throw SyncProtocolError(.authInvalid, "the token does not name its key (kid)")
            }
            guard let key = await provider.key(keyID, algorithm) else {
                throw SyncProtocolError(.authInvalid, "the token's key is not one of the identity provider's")
            }
            var accepted = try providerRules.accept(try await Self.claims(of: token, with: key.collection), now: now)
            accepted.keyID = keyID
            return accepted
        case nil:
            throw SyncProtocolError(.authInvalid, "the token's algorithm is not accepted")
        }
    }

    /// The claims of `token` once its signature verifies with the one key of `keys`.
    private static func claims(of token: String, with keys: JWTKeyCollection) async throws(SyncProtocolError)
        -> TokenClaimSet
    {
        do {
            return try await keys.verify(token, as: TokenClaimSet.self)
        } catch {
            throw SyncProtocolError(.authInvalid, "the token is not valid")
        }
    }

    /// Reads the identity provider's JWKS (nothing without one), retrying while it cannot be read for up
    /// to `timeoutSeconds` (a provider starting along with the server).
    /// - Throws: the last error once the time is up.
    public func loadProviderKeys(timeoutSeconds: Int = 0, logger: Logger) async throws {
        guard let provider else { return }
        let deadline = ContinuousClock.now + .seconds(timeoutSeconds)
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await provider.load()
            } catch {
                guard ContinuousClock.now < deadline else { throw error }
                logger.warning(
                    "identity provider keys not readable yet; retrying",
                    metadata: ["sync.startup.attempt": "\(attempt)", "error": "\(error)"])
                try await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// The service that reads the provider's JWKS again on schedule, when there is a provider and a
    /// schedule.
    var providerRefreshService: (any Service)? {
        guard let provider, let refreshInterval else { return nil }
        return JWKSRefreshService(keys: provider, interval: refreshInterval)
    }
}

extension TokenVerifier {
    /// `text` without leading and trailing spaces and tabs (Foundation's `trimmingCharacters` bridges
    /// through `NSString`, a cost on every request).
    static func trimmingBlanks(_ text: Substring) -> String {
        let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
        let bytes = text.utf8
        guard let first = bytes.firstIndex(where: { !blank($0) }), let last = bytes.lastIndex(where: { !blank($0) })
        else { return "" }
        return String(text[first...last])
    }
}
