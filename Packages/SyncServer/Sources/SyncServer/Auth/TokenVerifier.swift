import Foundation
import JWTKit
import SyncModels
import SyncProtocol
import Synchronization

/// The claims of a sync bearer token: `sub` (the user), `scopes` (what the bearer may read and write)
/// and `exp`.
public struct TokenClaims: JWTPayload, Equatable {
    public var sub: SubjectClaim
    public var scopes: [String]
    public var exp: ExpirationClaim

    public init(subject: String, scopes: [String], expiresAt: Date) {
        self.sub = SubjectClaim(value: subject)
        self.scopes = scopes
        self.exp = ExpirationClaim(value: expiresAt)
    }

    public func verify(using algorithm: some JWTAlgorithm) async throws {
        guard exp.value > Date() else { throw TokenExpired() }
    }
}

/// Thrown by `TokenClaims.verify` for a token past its `exp`.
struct TokenExpired: Error {}

/// Who is calling: the token's subject and the scopes it grants.
public struct TokenIdentity: Sendable, Hashable {
    public var subject: String
    public var scopes: Set<Scope>

    public init(subject: String, scopes: Set<Scope>) {
        self.subject = subject
        self.scopes = scopes
    }
}

/// Verifies and mints HS256 bearer tokens with one shared secret.
///
/// Error messages say what is wrong with a token but never contain the token or the secret.
public struct TokenVerifier: Sendable {
    private let keys: JWTKeyCollection
    /// Tokens verified lately: a device sends the same token with every request, and verifying it (HMAC,
    /// base64, JSON) is most of what a long-poll that finds nothing costs.
    private let verified = VerifiedTokens()

    /// - Parameter secret: the HS256 key (`SYNC_JWT_SECRET`).
    public init(secret: String) async {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        self.keys = keys
    }

    /// A signed token for `subject` and `scopes`, valid for `ttl` seconds from now.
    /// - Throws: `ConfigurationError` for a scope name outside the protocol's rules.
    public func mint(subject: String, scopes: [String], ttl: TimeInterval, now: Date = Date()) async throws -> String {
        for scope in scopes where !Scope.isValid(scope) {
            throw ConfigurationError(message: "scope \"\(scope)\" is not a valid scope name")
        }
        return try await keys.sign(TokenClaims(subject: subject, scopes: scopes, expiresAt: now + ttl))
    }

    /// The identity an `Authorization` header value proves.
    /// - Throws: `SyncProtocolError` `auth.missing` (no bearer token), `auth.expired`, or `auth.invalid`
    ///   (malformed, wrong signature or algorithm, bad claims).
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
        let claims: TokenClaims
        do {
            claims = try await keys.verify(token, as: TokenClaims.self)
        } catch is TokenExpired {
            throw SyncProtocolError(.authExpired, "the token has expired")
        } catch let error as JWTError where error.reason == "expired" {
            throw SyncProtocolError(.authExpired, "the token has expired")
        } catch {
            throw SyncProtocolError(.authInvalid, "the token is not valid")
        }
        var scopes: Set<Scope> = []
        for name in claims.scopes {
            guard let scope = try? Scope(name) else {
                throw SyncProtocolError(.authInvalid, "the token grants an invalid scope name")
            }
            scopes.insert(scope)
        }
        let identity = TokenIdentity(subject: claims.sub.value, scopes: scopes)
        verified.store(token, identity, expiresAt: claims.exp.value)
        return identity
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

/// Identities of tokens verified lately, until each token's expiry. Holds at most `capacity` tokens; when
/// full, it starts over (a burst of new tokens costs one verification each again, nothing more).
final class VerifiedTokens: Sendable {
    private let entries = Mutex<[String: (identity: TokenIdentity, expiresAt: Date)]>([:])
    let capacity: Int

    init(capacity: Int = 65_536) {
        self.capacity = capacity
    }

    /// The identity `token` proved, when it did so lately and has not expired since.
    func identity(for token: String, at now: Date) -> TokenIdentity? {
        entries.withLock { entries in
            guard let entry = entries[token] else { return nil }
            guard entry.expiresAt > now else {
                entries[token] = nil
                return nil
            }
            return entry.identity
        }
    }

    func store(_ token: String, _ identity: TokenIdentity, expiresAt: Date) {
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[token] = (identity, expiresAt)
        }
    }
}
