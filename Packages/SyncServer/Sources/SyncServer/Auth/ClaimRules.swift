import Foundation
import SyncModels
import SyncProtocol

/// How a token whose signature verified becomes an identity: which claims name the user and the scopes,
/// which audience and issuer it must carry, and how much clock skew is forgiven on `exp` and `nbf`.
///
/// Tokens of the identity provider (RS256, ES256) are read with the configured rules
/// (`IdentityProviderConfiguration.claims`); tokens signed with the shared secret (HS256) keep theirs,
/// `ClaimRules.sharedSecret`.
public struct ClaimRules: Sendable, Hashable {
    /// The claim that names the user: a non-empty string (`SYNC_JWT_SUBJECT_CLAIM`, default `sub`).
    public var subjectClaim = "sub"
    /// The claim that lists the scopes: an array of strings, or one string of names separated by spaces
    /// like OAuth's `scope` (`SYNC_JWT_SCOPES_CLAIM`, default `scopes`). A token without it grants no scope.
    /// A dotted name reaches into nested objects when no claim has that exact name (`realm_access.roles`).
    public var scopesClaim = "scopes"
    /// The audience the token must name in `aud`, a string or an array (`SYNC_JWT_AUDIENCE`); nil: not
    /// checked.
    public var audience: String? = nil
    /// The issuer the token's `iss` must equal (`SYNC_JWT_ISSUER`); nil: not checked.
    public var issuer: String? = nil
    /// Seconds of clock skew forgiven: a token is accepted until `exp` plus this, and from `nbf` less this
    /// (`SYNC_JWT_LEEWAY_SECONDS`, default 30, at most 300).
    public var leewaySeconds = 30
    /// Whether names in the scopes claim that are not valid scope names are passed over (they grant
    /// nothing) instead of making the token invalid: a provider's token often carries scopes of other
    /// applications (`openid`, `https://api.example.com/read`).
    public var ignoresInvalidScopeNames = true

    /// The most clock skew that may be forgiven, in seconds.
    public static let maxLeewaySeconds = 300

    public init() {}

    /// The rules of tokens signed with the shared secret, as `TokenVerifier.mint` makes them: `sub`,
    /// `scopes` (every name valid), `exp` with no leeway, no audience or issuer.
    public static let sharedSecret: ClaimRules = {
        var rules = ClaimRules()
        rules.leewaySeconds = 0
        rules.ignoresInvalidScopeNames = false
        return rules
    }()

    /// The identity `claims` prove at `now`, and until when.
    /// - Throws: `SyncProtocolError` `auth.expired` past `exp` (and the leeway), `auth.invalid` for any other
    ///   claim that is missing or wrong. Messages name the claim, never its value.
    func accept(_ claims: TokenClaimSet, now: Date) throws(SyncProtocolError) -> AcceptedToken {
        let leeway = TimeInterval(leewaySeconds)
        guard let expiry = claims["exp"]?.number, expiry.isFinite else {
            throw SyncProtocolError(.authInvalid, "the token has no valid exp claim")
        }
        let acceptedUntil = Date(timeIntervalSince1970: expiry + leeway)
        guard now < acceptedUntil else { throw SyncProtocolError(.authExpired, "the token has expired") }
        if let notBefore = claims["nbf"] {
            guard let seconds = notBefore.number, now >= Date(timeIntervalSince1970: seconds - leeway) else {
                throw SyncProtocolError(.authInvalid, "the token is not valid yet (nbf)")
            }
        }
        if let issuer, claims["iss"]?.string != issuer {
            throw SyncProtocolError(.authInvalid, "the token is from another issuer (iss)")
        }
        if let audience {
            let audiences: [String] =
                switch claims["aud"] {
                case .string(let single): [single]
                case .array: claims["aud"]?.strings ?? []
                default: []
                }
            guard audiences.contains(audience) else {
                throw SyncProtocolError(.authInvalid, "the token is for another audience (aud)")
            }
        }
        guard let subject = claims[subjectClaim]?.string, !subject.isEmpty else {
            throw SyncProtocolError(.authInvalid, "the token names no user (\(subjectClaim) claim)")
        }
        let identity = TokenIdentity(
            subject: subject, scopes: try scopes(claims[scopesClaim]), expiresAt: acceptedUntil)
        return AcceptedToken(identity: identity, acceptedUntil: acceptedUntil)
    }

    /// The scopes a scopes claim grants.
    private func scopes(_ claim: ClaimValue?) throws(SyncProtocolError) -> Set<Scope> {
        let names: [Substring]
        switch claim {
        case nil, .null: return []
        case .string(let text): names = text.split(separator: " ")
        case .array:
            guard let strings = claim?.strings else {
                throw SyncProtocolError(.authInvalid, "the token's \(scopesClaim) claim is not a list of names")
            }
            names = strings.map { $0[...] }
        default:
            throw SyncProtocolError(.authInvalid, "the token's \(scopesClaim) claim is not a list of names")
        }
        var scopes: Set<Scope> = []
        for name in names {
            guard let scope = try? Scope(String(name)) else {
                if ignoresInvalidScopeNames { continue }
                throw SyncProtocolError(.authInvalid, "the token grants an invalid scope name")
            }
            scopes.insert(scope)
        }
        return scopes
    }
}
