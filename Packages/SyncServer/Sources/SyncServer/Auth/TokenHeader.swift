import Foundation

/// The fields of a JWT's header that decide how it is verified, read before any key is chosen: the
/// server, not the token, picks the key, and only for the algorithm that key is for.
struct TokenHeader: Sendable, Equatable {
    /// `alg`, as sent.
    var algorithm: String?
    /// `kid`, as sent.
    var keyID: String?
    /// Whether the header lists critical extensions (`crit`): the server understands none, so such a
    /// token is refused.
    var hasCriticalExtensions: Bool

    /// The header of `token`, or nil when `token` is not three base64url parts with a JSON object first.
    init?(token: String) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let data = Base64URL.decode(parts[0]),
            let fields = try? JSONDecoder().decode(Fields.self, from: data)
        else { return nil }
        algorithm = fields.alg
        keyID = fields.kid
        hasCriticalExtensions = fields.crit != nil
    }

    private struct Fields: Decodable {
        var alg: String?
        var kid: String?
        var crit: Present?
    }

    /// A member that is there, whatever its value (which is not read).
    private struct Present: Decodable {
        init(from decoder: any Decoder) throws {}
    }
}
