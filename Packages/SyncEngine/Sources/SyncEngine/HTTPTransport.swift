import Foundation
import SyncCompression
import SyncModels
import SyncProtocol
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The protocol over HTTP with URLSession (FoundationNetworking on Linux): gzip request bodies above 1 KiB,
/// `Accept-Encoding: gzip`, a bearer token that can be replaced while running.
public final class HTTPTransport: SyncTransport {
    public let baseURL: URL
    private let session: URLSession
    private let token: Mutex<String?>
    private let codec = WireCodec()

    public init(baseURL: URL, token: String?, timeout: TimeInterval = 60) {
        self.baseURL = baseURL
        self.token = Mutex(token)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.httpAdditionalHeaders = ["Accept-Encoding": "gzip"]
        self.session = URLSession(configuration: configuration)
    }

    /// Replaces the bearer token (after an authentication pause).
    public func setToken(_ newToken: String?) {
        token.withLock { $0 = newToken }
    }

    public func sync(_ request: SyncRequest) async throws(SyncFailure) -> TransportExchange {
        let raw: Data
        do {
            raw = try codec.encode(request)
        } catch {
            throw .permanent(code: "request.invalid", message: "the request could not be encoded")
        }
        var urlRequest = URLRequest(url: baseURL.appendingPathComponent("v1/sync"))
        urlRequest.httpMethod = "POST"
        urlRequest.setValue("application/json", forHTTPHeaderField: "Content-Type")
        if let token = token.withLock({ $0 }) {
            urlRequest.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        }
        var body = raw
        if raw.count > 1024 {
            body = Gzip.compress(raw)
            urlRequest.setValue("gzip", forHTTPHeaderField: "Content-Encoding")
        }
        urlRequest.httpBody = body

        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: urlRequest)
        } catch {
            throw .retryable(reason: "network: \(error.localizedDescription)", retryAfter: nil)
        }
        guard let http = response as? HTTPURLResponse else {
            throw .retryable(reason: "not an HTTP response", retryAfter: nil)
        }
        // Depending on the platform, URLSession may already have inflated the body.
        let plain: Data
        do {
            plain = Gzip.isGzip(data) ? try Gzip.decompress(data, maxOutputBytes: 256 << 20) : data
        } catch {
            throw .retryable(reason: "a corrupt response body", retryAfter: nil)
        }
        let traffic = Traffic(
            sentRaw: raw.count, sentWire: body.count, receivedRaw: plain.count, receivedWire: data.count)
        guard http.statusCode == 200 else {
            let retryAfter = (http.value(forHTTPHeaderField: "Retry-After")).flatMap(Int.init).map {
                Duration.seconds($0)
            }
            let detail = try? codec.decode(ErrorBody.self, from: plain)
            throw SyncFailure.from(
                status: http.statusCode, code: detail?.error.code.rawValue ?? "http.\(http.statusCode)",
                message: detail?.error.message ?? "HTTP \(http.statusCode)", retryAfter: retryAfter)
        }
        do {
            return TransportExchange(response: try codec.decode(SyncResponse.self, from: plain), traffic: traffic)
        } catch {
            throw .retryable(reason: "the server's answer could not be read", retryAfter: nil)
        }
    }
}
