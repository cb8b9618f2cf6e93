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
///
/// It has no live stream (`live` keeps the default, `SyncFailure.transportUnsupported`): an engine on it
/// long-polls (`SyncEngine.Configuration.longPoll`). `HTTPClientTransport` (SyncEngineHTTPClient) has the
/// stream.
public final class HTTPTransport: SyncTransport {
    public let baseURL: URL
    let session: URLSession
    let token: Mutex<String?>

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
        let (raw, body, compressed) = try Self.body(for: request)
        var urlRequest = URLRequest(url: baseURL.appendingPathComponent("v1/sync"))
        urlRequest.httpMethod = "POST"
        urlRequest.setValue("application/json", forHTTPHeaderField: "Content-Type")
        if compressed { urlRequest.setValue("gzip", forHTTPHeaderField: "Content-Encoding") }
        let requestID = Self.newRequestID()
        urlRequest.setValue(requestID, forHTTPHeaderField: "X-Request-Id")
        urlRequest.httpBody = body
        let (status, retryAfter, data) = try await send(urlRequest)
        return try Self.exchange(
            status: status, retryAfter: retryAfter, body: data, sent: (raw, body.count), requestID: requestID)
    }

    /// A new id for a request (`X-Request-Id`): 32 random hex digits, which the server keeps as the
    /// request's id in its log and answers with.
    public static func newRequestID() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<2).map { _ in
            let hex = String(generator.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }

    /// Sends one request with the bearer token; a failure to get an HTTP answer is a retryable network
    /// failure.
    func send(_ request: URLRequest) async throws(SyncFailure) -> (status: Int, retryAfter: String?, body: Data) {
        var request = request
        if let token = token.withLock({ $0 }) {
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch {
            throw .retryable(reason: "network: \(error.localizedDescription)", retryAfter: nil)
        }
        guard let http = response as? HTTPURLResponse else {
            throw .retryable(reason: "not an HTTP response", retryAfter: nil)
        }
        return (http.statusCode, http.value(forHTTPHeaderField: "Retry-After"), data)
    }

    /// The request body for `request`: the encoded bytes, gzip-compressed above 1 KiB (then `compressed`).
    public static func body(for request: SyncRequest) throws(SyncFailure) -> (raw: Int, body: Data, compressed: Bool) {
        try encodedBody(request)
    }

    /// The body of a `POST /v1/push`, as `body(for:)` makes one of `POST /v1/sync`.
    public static func body(for request: PushRequest) throws(SyncFailure) -> (raw: Int, body: Data, compressed: Bool) {
        try encodedBody(request)
    }

    /// Reads one answer of `POST /v1/push`, as `exchange` reads one of `POST /v1/sync`.
    public static func pushExchange(status: Int, retryAfter: String?, body data: Data, sent: (raw: Int, wire: Int))
        throws(SyncFailure) -> (response: PushResponse, traffic: Traffic)
    {
        let (response, plainCount) = try answer(PushResponse.self, status: status, retryAfter: retryAfter, body: data)
        return (
            response, Traffic(sentRaw: sent.raw, sentWire: sent.wire, receivedRaw: plainCount, receivedWire: data.count)
        )
    }

    private static func encodedBody<T: Encodable>(_ request: T) throws(SyncFailure) -> (
        raw: Int, body: Data, compressed: Bool
    ) {
        let raw: Data
        do {
            raw = try WireCodec().encode(request)
        } catch {
            throw .permanent(code: "request.invalid", message: "the request could not be encoded")
        }
        return raw.count > 1024 ? (raw.count, Gzip.compress(raw), true) : (raw.count, raw, false)
    }

    /// Reads one answer of `POST /v1/sync`, whichever HTTP client fetched it: inflates a gzip body, turns a
    /// status other than 200 into the protocol's `SyncFailure` (with `Retry-After`), decodes the answer and
    /// counts the bytes.
    public static func exchange(
        status: Int, retryAfter: String?, body data: Data, sent: (raw: Int, wire: Int), requestID: String? = nil
    ) throws(SyncFailure) -> TransportExchange {
        let (response, plainCount) = try answer(SyncResponse.self, status: status, retryAfter: retryAfter, body: data)
        let traffic = Traffic(
            sentRaw: sent.raw, sentWire: sent.wire, receivedRaw: plainCount, receivedWire: data.count)
        return TransportExchange(response: response, traffic: traffic, requestID: requestID)
    }

    /// Reads one answer of `GET /v1/pull`, as `exchange` reads one of `POST /v1/sync`.
    public static func pullResponse(status: Int, retryAfter: String?, body data: Data) throws(SyncFailure)
        -> PullResponse
    {
        try pullExchange(status: status, retryAfter: retryAfter, body: data).response
    }

    /// `pullResponse`, with the bytes received (before and after inflating).
    public static func pullExchange(status: Int, retryAfter: String?, body data: Data) throws(SyncFailure)
        -> (response: PullResponse, traffic: Traffic)
    {
        let (response, plainCount) = try answer(PullResponse.self, status: status, retryAfter: retryAfter, body: data)
        return (response, Traffic(receivedRaw: plainCount, receivedWire: data.count))
    }

    /// The URL of `GET /v1/pull` with `request`'s query.
    public static func pullURL(base: URL, _ request: PullRequest) -> URL {
        url(base: base, path: "v1/pull", request)
    }

    /// The URL of `GET /v1/live` with `request`'s query (the same parameters as a pull's).
    public static func liveURL(base: URL, _ request: PullRequest) -> URL {
        url(base: base, path: "v1/live", request)
    }

    private static func url(base: URL, path: String, _ request: PullRequest) -> URL {
        // By hand: `URLComponents` escapes through `NSString` on Linux, a few percent of the CPU of a process
        // that long-polls for thousands of devices.
        let query = request.queryItems.map { percentEncoded($0.name) + "=" + percentEncoded($0.value) }
        let path = base.appendingPathComponent(path).absoluteString
        return URL(string: query.isEmpty ? path : path + "?" + query.joined(separator: "&"))!
    }

    /// The failure a `GET /v1/live` answer other than a stream stands for, whichever HTTP client fetched it:
    /// a server without the route (404, 405), or a 200 that is not `text/event-stream`, has no live stream
    /// (`SyncFailure.transportUnsupported`: the engine long-polls); other answers mean what they mean for a
    /// pull (the protocol's JSON error body, `Retry-After`).
    public static func liveFailure(status: Int, retryAfter: String?, body data: Data) -> SyncFailure {
        guard status != 404, status != 405, status != 200 else {
            return .permanent(
                code: SyncFailure.transportUnsupported, message: "the server has no live stream (HTTP \(status))")
        }
        let plain = Gzip.isGzip(data) ? (try? Gzip.decompress(data, maxOutputBytes: 1 << 20)) ?? data : data
        let detail = try? WireCodec().decode(ErrorBody.self, from: plain)
        return SyncFailure.from(
            status: status, code: detail?.error.code.rawValue ?? "http.\(status)",
            message: detail?.error.message ?? "HTTP \(status)",
            retryAfter: retryAfter.flatMap(Int.init).map { Duration.seconds($0) })
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// `text` with every byte but the unreserved characters of RFC 3986 (and `,`, which separates scopes)
    /// percent-encoded.
    static func percentEncoded(_ text: String) -> String {
        func plain(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: ","):
                true
            default: false
            }
        }
        guard !text.utf8.allSatisfy(plain) else { return text }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count * 3)
        for byte in text.utf8 {
            if plain(byte) {
                bytes.append(byte)
            } else {
                bytes += [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0xF)]]
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Inflates, classifies and decodes one answer; also returns the inflated size.
    static func answer<T: Decodable>(_ type: T.Type, status: Int, retryAfter: String?, body data: Data)
        throws(SyncFailure) -> (value: T, plainCount: Int)
    {
        let codec = WireCodec()
        // Depending on the client and platform, the body may already be inflated.
        let plain: Data
        do {
            plain = Gzip.isGzip(data) ? try Gzip.decompress(data, maxOutputBytes: 256 << 20) : data
        } catch {
            throw .retryable(reason: "a corrupt response body", retryAfter: nil)
        }
        guard status == 200 else {
            let detail = try? codec.decode(ErrorBody.self, from: plain)
            throw SyncFailure.from(
                status: status, code: detail?.error.code.rawValue ?? "http.\(status)",
                message: detail?.error.message ?? "HTTP \(status)",
                retryAfter: retryAfter.flatMap(Int.init).map { Duration.seconds($0) })
        }
        do {
            return (try codec.decode(T.self, from: plain), plain.count)
        } catch {
            throw .retryable(reason: "the server's answer could not be read", retryAfter: nil)
        }
    }

    public func checksum(_ request: ChecksumRequest) async throws(SyncFailure) -> ChecksumResponse {
        let (status, retryAfter, data) = try await send(URLRequest(url: Self.checksumURL(base: baseURL, request)))
        return try Self.checksumResponse(status: status, retryAfter: retryAfter, body: data)
    }

    /// The URL of `GET /v1/checksum` for `request`.
    public static func checksumURL(base: URL, _ request: ChecksumRequest) -> URL {
        var components = URLComponents(url: base.appendingPathComponent("v1/checksum"), resolvingAgainstBaseURL: false)!
        components.queryItems = request.queryItems.map { URLQueryItem(name: $0.name, value: $0.value) }
        return components.url!
    }

    /// Classifies and decodes an answer to `GET /v1/checksum` (`checksum.unavailable` is permanent).
    public static func checksumResponse(status: Int, retryAfter: String?, body data: Data) throws(SyncFailure)
        -> ChecksumResponse
    {
        try answer(ChecksumResponse.self, status: status, retryAfter: retryAfter, body: data).value
    }

    public func pull(_ request: PullRequest) async throws(SyncFailure) -> PullResponse {
        var urlRequest = URLRequest(url: Self.pullURL(base: baseURL, request))
        // A long-poll lasts up to `wait` seconds before the server answers.
        urlRequest.timeoutInterval = session.configuration.timeoutIntervalForRequest + Double(request.wait)
        let (status, retryAfter, data) = try await send(urlRequest)
        return try Self.pullResponse(status: status, retryAfter: retryAfter, body: data)
    }
}
