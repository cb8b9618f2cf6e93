import JWTKit

/// A token's claims as sent, whatever their names: the payload the verifier decodes, so that the subject
/// and the scopes can be read from the claims the configuration names (`ClaimRules`).
///
/// Decoding checks nothing: `ClaimRules` does, once the signature has verified, with the audience, issuer
/// and leeway the server is configured with.
public struct TokenClaimSet: JWTPayload, Equatable {
    public var claims: [String: ClaimValue]

    public init(_ claims: [String: ClaimValue] = [:]) {
        self.claims = claims
    }

    public init(from decoder: any Decoder) throws {
        claims = try [String: ClaimValue](from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        try claims.encode(to: encoder)
    }

    /// Claims are checked by `ClaimRules`, which knows the configuration; nothing is checked here.
    public func verify(using algorithm: some JWTAlgorithm) async throws {}

    /// The claim called `name`; when there is none and `name` has dots, the value at that path through
    /// nested objects (`realm_access.roles`). A claim whose own name has dots (`https://example.com/scopes`)
    /// is found first.
    public subscript(name: String) -> ClaimValue? {
        if let value = claims[name] { return value }
        guard name.contains(".") else { return nil }
        var value: ClaimValue? = .object(claims)
        for key in name.split(separator: ".", omittingEmptySubsequences: false) {
            guard case .object(let object) = value else { return nil }
            value = object[String(key)]
        }
        return value
    }
}
