import Foundation
import JWTKit

/// Bearer tokens for the devices: minted per device (its own subject, its scope) from the server's secret,
/// or one token given for all (it must grant every scope of the run; devices then share its subject and
/// the server's per-token concurrency limit).
final class Tokens: Sendable {
    private struct Claims: JWTPayload {
        var sub: SubjectClaim
        var scopes: [String]
        var exp: ExpirationClaim

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    private let keys: JWTKeyCollection?
    private let given: String?

    init(secret: String?, given: String?) async throws {
        if let given {
            self.given = given
            self.keys = nil
        } else if let secret, secret.utf8.count >= 32 {
            let keys = JWTKeyCollection()
            await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
            self.keys = keys
            self.given = nil
        } else {
            throw LoadError("give --jwt-secret (or SYNC_JWT_SECRET, 32 bytes or more) or --token")
        }
    }

    /// Whether tokens are minted here (from the secret), so that they can be short-lived and renewed.
    var mints: Bool { given == nil }

    /// A token for `subject` on `scopes`, valid for `lifetime` seconds (a day by default); the given token
    /// when there is one.
    func token(subject: String, scopes: [String], lifetime: Double = 24 * 3600) async throws -> String {
        if let given { return given }
        guard let keys else { throw LoadError("no key to mint tokens with") }
        return try await keys.sign(
            Claims(
                sub: SubjectClaim(value: subject), scopes: scopes,
                exp: ExpirationClaim(value: Date().addingTimeInterval(lifetime))))
    }
}
