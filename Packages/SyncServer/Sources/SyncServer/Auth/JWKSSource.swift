import AsyncHTTPClient
import Foundation

/// Where the identity provider's JWKS is read from: a file, or a URL fetched with the process-wide
/// `HTTPClient`.
enum JWKSSource: Sendable, Hashable {
    case file(String)
    case url(String)

    /// The largest JWKS document read (a provider's set is a few kilobytes).
    static let maxBytes = 1 << 20

    /// The JWKS document's bytes.
    /// - Throws: `JWKSUnavailable` (its message names the setting, not the URL, which may carry
    ///   credentials), or the HTTP client's error for a connection that failed.
    func load(timeout: Duration) async throws -> Data {
        switch self {
        case .file(let path):
            let data: Data
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: path))
            } catch {
                throw JWKSUnavailable(message: "SYNC_JWKS_FILE cannot be read")
            }
            guard data.count <= Self.maxBytes else {
                throw JWKSUnavailable(message: "SYNC_JWKS_FILE is larger than \(Self.maxBytes) bytes")
            }
            return data
        case .url(let url):
            var request = HTTPClientRequest(url: url)
            request.headers.add(name: "Accept", value: "application/json")
            let (seconds, attoseconds) = timeout.components
            let response = try await HTTPClient.shared.execute(
                request, timeout: .milliseconds(seconds * 1000 + attoseconds / 1_000_000_000_000_000))
            guard response.status == .ok else {
                throw JWKSUnavailable(message: "SYNC_JWKS_URL answered HTTP \(response.status.code)")
            }
            let body = try await response.body.collect(upTo: Self.maxBytes)
            return Data(body.readableBytesView)
        }
    }
}

/// The JWKS could not be read or holds no key the server can use.
struct JWKSUnavailable: Error, CustomStringConvertible {
    var message: String
    var description: String { "JWKS: \(message)" }
}
