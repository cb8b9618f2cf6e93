import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import SyncEngine
import SyncProtocol
import Synchronization

/// The protocol over HTTP with AsyncHTTPClient (SwiftNIO): for headless clients on servers and Linux, where
/// it is the Swift server ecosystem's client. The same wire behaviour as `HTTPTransport` (gzip request
/// bodies above 1 KiB, `Accept-Encoding: gzip`, a bearer token replaceable while running, the same failure
/// classification), without FoundationNetworking's libcurl threads and timers: on Linux a device pulling
/// through it spends less CPU per round trip and waits less between them (see `sync-bench bootstrap
/// --transport`).
///
/// Many transports can share one `HTTPClient` (its connection pool and event loops): pass `client`, as a
/// load generator with many devices does. By default they share `HTTPClientTransport.sharedClient`. A client
/// passed in should start from `clientConfiguration`: it must not decompress responses itself
/// (`HTTPClient.shared` does, and refuses bodies that inflate more than 25 times, which a note's repetitive
/// text easily does): the transport inflates gzip bodies with the protocol's own bound.
public final class HTTPClientTransport: SyncTransport {
    public let baseURL: URL
    let client: HTTPClient
    let token: Mutex<String?>
    let timeout: TimeAmount
    private let url: String
    let onTraffic: (@Sendable (Traffic) -> Void)?

    /// The process-wide client transports use unless given one: NIO's shared event loops and
    /// `clientConfiguration`.
    public static let sharedClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)

    /// What a client the transport uses needs (change the rest, e.g. the connection pool's size, as needed):
    /// - no response decompression: the transport inflates gzip bodies itself, with the protocol's bound;
    /// - a connection that cannot be made fails its requests at once (`retryConnectionEstablishment` off), so
    ///   that the engine's own backoff (`BackoffPolicy`, capped) decides when to try again. AsyncHTTPClient
    ///   otherwise retries connecting behind the request with a backoff of its own that grows past a minute
    ///   while a server is down: once a restart had taken about 20 failed attempts, a request after it waited
    ///   longer for the backoff than the connect timeout (10 s) and failed with `getConnectionFromPoolTimeout`
    ///   though the server was up again.
    public static var clientConfiguration: HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.decompression = .disabled
        configuration.connectionPool.retryConnectionEstablishment = false
        return configuration
    }

    /// - Parameters:
    ///   - baseURL: the server, e.g. `http://127.0.0.1:8080`.
    ///   - token: the bearer token, or nil; `setToken(_:)` replaces it.
    ///   - client: the `HTTPClient` requests go through (see above: it must not decompress responses).
    ///   - timeout: how long one request may take (a long-poll: this plus its `wait`; the live stream: until
    ///     its answer's head, then its heartbeats watch it).
    ///   - onTraffic: called with the bytes of every answered request, syncs and pulls alike, and of the live
    ///     stream as they arrive (for a load generator counting what its devices move, long-polls included).
    public init(
        baseURL: URL, token: String?, client: HTTPClient = HTTPClientTransport.sharedClient,
        timeout: Duration = .seconds(60), onTraffic: (@Sendable (Traffic) -> Void)? = nil
    ) {
        self.onTraffic = onTraffic
        self.baseURL = baseURL
        self.client = client
        self.token = Mutex(token)
        self.timeout = .nanoseconds(
            timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)
        self.url = baseURL.appendingPathComponent("v1/sync").absoluteString
    }

    /// Replaces the bearer token (after an authentication pause).
    public func setToken(_ newToken: String?) {
        token.withLock { $0 = newToken }
    }

    public func sync(_ request: SyncRequest) async throws(SyncFailure) -> TransportExchange {
        let (raw, body, compressed) = try HTTPTransport.body(for: request)
        let requestID = HTTPTransport.newRequestID()
        let (status, retryAfter, data) = try await post(body, compressed: compressed, to: url, requestID: requestID)
        let exchange = try HTTPTransport.exchange(
            status: status, retryAfter: retryAfter, body: data, sent: (raw, body.count), requestID: requestID)
        onTraffic?(exchange.traffic)
        return exchange
    }

    /// One `POST /v1/push`: events of one replica, stored or refused one by one, with nothing pulled. For
    /// clients that receive another way (the live stream) and so need no page in the answer.
    public func push(_ request: PushRequest) async throws(SyncFailure) -> (results: [PushResult], traffic: Traffic) {
        let (raw, body, compressed) = try HTTPTransport.body(for: request)
        let (status, retryAfter, data) = try await post(
            body, compressed: compressed, to: baseURL.appendingPathComponent("v1/push").absoluteString)
        let (response, traffic) = try HTTPTransport.pushExchange(
            status: status, retryAfter: retryAfter, body: data, sent: (raw, body.count))
        onTraffic?(traffic)
        return (response.results, traffic)
    }

    /// Posts a JSON body (gzip when `compressed`) with the bearer token.
    private func post(_ body: Data, compressed: Bool, to url: String, requestID: String? = nil)
        async throws(SyncFailure) -> (status: Int, retryAfter: String?, body: Data)
    {
        var outgoing = HTTPClientRequest(url: url)
        outgoing.method = .POST
        if let requestID { outgoing.headers.add(name: "X-Request-Id", value: requestID) }
        outgoing.headers.add(name: "Content-Type", value: "application/json")
        outgoing.headers.add(name: "Accept-Encoding", value: "gzip")
        if compressed { outgoing.headers.add(name: "Content-Encoding", value: "gzip") }
        if let token = token.withLock({ $0 }) { outgoing.headers.add(name: "Authorization", value: "Bearer \(token)") }
        outgoing.body = .bytes(ByteBuffer(bytes: body))
        return try await execute(outgoing, timeout: timeout)
    }

    public func pull(_ request: PullRequest) async throws(SyncFailure) -> PullResponse {
        var outgoing = HTTPClientRequest(url: HTTPTransport.pullURL(base: baseURL, request).absoluteString)
        outgoing.headers.add(name: "Accept-Encoding", value: "gzip")
        if let token = token.withLock({ $0 }) { outgoing.headers.add(name: "Authorization", value: "Bearer \(token)") }
        // A long-poll lasts up to `wait` seconds before the server answers.
        let (status, retryAfter, data) = try await execute(outgoing, timeout: timeout + .seconds(Int64(request.wait)))
        let (response, traffic) = try HTTPTransport.pullExchange(status: status, retryAfter: retryAfter, body: data)
        onTraffic?(traffic)
        return response
    }

    public func checksum(_ request: ChecksumRequest) async throws(SyncFailure) -> ChecksumResponse {
        var outgoing = HTTPClientRequest(url: HTTPTransport.checksumURL(base: baseURL, request).absoluteString)
        outgoing.headers.add(name: "Accept-Encoding", value: "gzip")
        if let token = token.withLock({ $0 }) { outgoing.headers.add(name: "Authorization", value: "Bearer \(token)") }
        let (status, retryAfter, data) = try await execute(outgoing, timeout: timeout)
        return try HTTPTransport.checksumResponse(status: status, retryAfter: retryAfter, body: data)
    }

    /// Sends one request and collects its answer; a failure to get one is a retryable network failure.
    private func execute(_ outgoing: HTTPClientRequest, timeout: TimeAmount) async throws(SyncFailure)
        -> (status: Int, retryAfter: String?, body: Data)
    {
        do {
            let response = try await client.execute(outgoing, timeout: timeout)
            let buffer = try await response.body.collect(upTo: 256 << 20)
            return (
                Int(response.status.code), response.headers.first(name: "Retry-After"), Data(buffer.readableBytesView)
            )
        } catch {
            throw .retryable(reason: "network: \(error)", retryAfter: nil)
        }
    }
}
