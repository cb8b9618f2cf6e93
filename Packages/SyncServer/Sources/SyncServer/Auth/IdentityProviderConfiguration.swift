import Foundation

/// The identity provider whose tokens (RS256, ES256) the server accepts next to those signed with the
/// shared secret: where its public keys are (a JWKS file or URL), how often they are read again, and how
/// its tokens' claims are read. Not configured (no JWKS) by default.
public struct IdentityProviderConfiguration: Sendable, Hashable {
    /// A JWKS file of the provider's public keys (`SYNC_JWKS_FILE`).
    public var jwksFile: String? = nil
    /// The provider's JWKS URL, such as `https://issuer.example.com/.well-known/jwks.json`
    /// (`SYNC_JWKS_URL`). At most one of `jwksFile` and `jwksURL` is set.
    public var jwksURL: String? = nil
    /// Seconds between two readings of the JWKS (`SYNC_JWKS_REFRESH_SECONDS`, default 300); 0 reads it
    /// again only when a token names a key it does not list.
    public var refreshSeconds = 300
    /// A token naming a key id the JWKS does not list makes the server read it again (the provider may
    /// have rotated a key in), at most once per this interval (10 s): tokens with made-up key ids cannot
    /// make the server hammer the provider.
    public var unknownKeyRefreshInterval: Duration = .seconds(10)
    /// How long one reading of a JWKS URL may take (10 s).
    public var fetchTimeout: Duration = .seconds(10)
    /// How the provider's tokens are read: subject and scopes claims, audience, issuer, leeway.
    public var claims = ClaimRules()

    public init() {}

    /// Whether a JWKS is configured.
    public var isConfigured: Bool { source != nil }

    /// Where the JWKS is read from, when configured.
    var source: JWKSSource? {
        if let jwksFile { return .file(jwksFile) }
        if let jwksURL { return .url(jwksURL) }
        return nil
    }

    /// Checks the values that the environment and flags may set out of range.
    /// - Throws: `ConfigurationError` naming the setting.
    public func validate() throws {
        if jwksFile != nil, jwksURL != nil {
            throw ConfigurationError(message: "set SYNC_JWKS_FILE or SYNC_JWKS_URL, not both")
        }
        if let jwksURL {
            guard let url = URL(string: jwksURL), let scheme = url.scheme?.lowercased(),
                scheme == "https" || scheme == "http", url.host?.isEmpty == false
            else { throw ConfigurationError(message: "SYNC_JWKS_URL must be an http or https URL") }
        }
        guard refreshSeconds >= 0 else {
            throw ConfigurationError(message: "SYNC_JWKS_REFRESH_SECONDS must not be negative")
        }
        guard (0...ClaimRules.maxLeewaySeconds).contains(claims.leewaySeconds) else {
            throw ConfigurationError(
                message: "SYNC_JWT_LEEWAY_SECONDS must be an integer in 0...\(ClaimRules.maxLeewaySeconds)")
        }
        guard !claims.subjectClaim.isEmpty, !claims.scopesClaim.isEmpty else {
            throw ConfigurationError(message: "SYNC_JWT_SUBJECT_CLAIM and SYNC_JWT_SCOPES_CLAIM must not be empty")
        }
    }
}
