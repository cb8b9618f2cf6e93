/// The signature algorithms the server accepts: HS256 with the shared secret (`SYNC_JWT_SECRET`), RS256
/// and ES256 with the identity provider's public keys (`SYNC_JWKS_FILE` or `SYNC_JWKS_URL`). Any other
/// `alg`, `none` included, is refused.
public enum TokenAlgorithm: String, Sendable, Hashable, CaseIterable {
    case hs256 = "HS256"
    case rs256 = "RS256"
    case es256 = "ES256"
}
