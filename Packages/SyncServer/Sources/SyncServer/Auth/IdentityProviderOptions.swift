import ArgumentParser

/// The `serve` flags of the identity provider, each overriding its `SYNC_*` variable (see
/// `IdentityProviderConfiguration`). A flag for one JWKS source replaces the other source's variable.
public struct IdentityProviderOptions: ParsableArguments {
    @Option(help: "JWKS file of the identity provider's public keys (SYNC_JWKS_FILE).")
    public var jwksFile: String?

    @Option(help: "JWKS URL of the identity provider (SYNC_JWKS_URL).")
    public var jwksURL: String?

    @Option(
        help:
            "Seconds between readings of the JWKS; 0: only for unknown key ids (SYNC_JWKS_REFRESH_SECONDS, default 300)."
    )
    public var jwksRefreshSeconds: Int?

    @Option(help: "Claim of provider tokens naming the user (SYNC_JWT_SUBJECT_CLAIM, default sub).")
    public var jwtSubjectClaim: String?

    @Option(
        help:
            "Claim of provider tokens listing the scopes, an array or a space-separated string (SYNC_JWT_SCOPES_CLAIM, default scopes)."
    )
    public var jwtScopesClaim: String?

    @Option(help: "Audience (aud) provider tokens must name (SYNC_JWT_AUDIENCE).")
    public var jwtAudience: String?

    @Option(help: "Issuer (iss) of provider tokens (SYNC_JWT_ISSUER).")
    public var jwtIssuer: String?

    @Option(help: "Seconds of clock skew forgiven on exp and nbf, 0-300 (SYNC_JWT_LEEWAY_SECONDS, default 30).")
    public var jwtLeewaySeconds: Int?

    public init() {}

    /// `configuration` with these flags applied.
    public func apply(to configuration: inout IdentityProviderConfiguration) {
        switch (jwksFile, jwksURL) {
        case (let file?, nil): (configuration.jwksFile, configuration.jwksURL) = (file, nil)
        case (nil, let url?): (configuration.jwksFile, configuration.jwksURL) = (nil, url)
        case (let file?, let url?): (configuration.jwksFile, configuration.jwksURL) = (file, url)
        case (nil, nil): break
        }
        if let jwksRefreshSeconds { configuration.refreshSeconds = jwksRefreshSeconds }
        if let jwtSubjectClaim { configuration.claims.subjectClaim = jwtSubjectClaim }
        if let jwtScopesClaim { configuration.claims.scopesClaim = jwtScopesClaim }
        if let jwtAudience { configuration.claims.audience = jwtAudience.isEmpty ? nil : jwtAudience }
        if let jwtIssuer { configuration.claims.issuer = jwtIssuer.isEmpty ? nil : jwtIssuer }
        if let jwtLeewaySeconds { configuration.claims.leewaySeconds = jwtLeewaySeconds }
    }
}
