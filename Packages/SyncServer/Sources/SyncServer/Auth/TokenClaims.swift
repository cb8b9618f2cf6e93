import Foundation
import JWTKit

/// The claims of a bearer token signed with the shared secret: `sub` (the user), `scopes` (what the bearer
/// may read and write) and `exp`. What `TokenVerifier.mint` signs.
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
