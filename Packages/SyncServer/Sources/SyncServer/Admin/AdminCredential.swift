import Crypto
import Foundation
import SyncProtocol

/// Who may read the admin API and the dashboard: requests that carry the admin token
/// (`ServerConfiguration.adminToken`) as a bearer token, or as the password of HTTP Basic authentication (what a
/// browser sends once a person typed it in its prompt). A device's valid token is refused with 403
/// `auth.adminRequired`; no credential, or a wrong one, with 401 and a Basic challenge.
struct AdminCredential: Sendable {
    private let digest: SHA256.Digest

    init(token: String) {
        digest = SHA256.hash(data: Data(token.utf8))
    }

    /// The realm of the Basic challenge.
    static let challenge = #"Basic realm="sync-server admin", charset="UTF-8""#

    /// A request the admin credential does not let through, answered with `failure`, with the Basic challenge
    /// when it is a 401.
    struct Refusal: Error {
        var failure: SyncProtocolError
    }

    /// Lets the request through when `authorization` carries the admin token.
    /// - Throws: `Refusal`: 401 with no or a wrong credential, 403 for a token `tokens` accepts (a device's).
    func check(authorization: String?, tokens: TokenVerifier) async throws(Refusal) {
        guard let authorization, !authorization.isEmpty else {
            throw Refusal(failure: SyncProtocolError(.authMissing, "the admin credential is required"))
        }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2 else {
            throw Refusal(failure: SyncProtocolError(.authInvalid, "the Authorization header is not valid"))
        }
        let value = parts[1].trimmingCharacters(in: .whitespaces)
        switch parts[0].lowercased() {
        case "bearer":
            if matches(value) { return }
            // A token the server accepts is a device's: forbidden here, whatever its scopes.
            do {
                _ = try await tokens.identity(authorization: authorization)
            } catch {
                throw Refusal(failure: SyncProtocolError(.authInvalid, "the admin credential is not valid"))
            }
            throw Refusal(failure: SyncProtocolError(.adminRequired, "this route needs the admin credential"))
        case "basic":
            guard let decoded = Data(base64Encoded: value).flatMap({ String(data: $0, encoding: .utf8) }),
                let colon = decoded.firstIndex(of: ":"), matches(String(decoded[decoded.index(after: colon)...]))
            else {
                throw Refusal(failure: SyncProtocolError(.authInvalid, "the admin credential is not valid"))
            }
        default:
            throw Refusal(failure: SyncProtocolError(.authInvalid, "the admin credential is not valid"))
        }
    }

    /// Compared as SHA-256 digests, whose comparison takes the same time wherever they differ.
    private func matches(_ candidate: String) -> Bool {
        SHA256.hash(data: Data(candidate.utf8)) == digest
    }
}
