import Hummingbird
import Logging
import Synchronization

/// Gives each request one id and writes one access line for it.
///
/// The id is the request's `X-Request-Id` when a proxy or client sent a usable one (`RequestIdentifier`),
/// else the one Hummingbird generated. It replaces Hummingbird's `hb.request.id` in the context's logger, so
/// every line logged for the request carries it, and `context.id` returns it; every response, errors
/// included, carries it back in `X-Request-Id`.
///
/// The access line is logged at `info` with the message `request`: the method (`http.method`), the matched
/// route's pattern, not the path (`http.route`, as `/v1/uploads/{id}/chunks/{index}`; `NotFound` when none
/// matched, as in the metrics' `route` label), the status (`http.status`), the time to the response's head in milliseconds
/// (`http.duration_ms`), the request's `Content-Length` and the response's length when known
/// (`http.request.bytes`, `http.response.bytes`), and the replica when the route names one
/// (`sync.replica`, see `AccessNotes`). Nothing else of the request is written: no header, no query value,
/// no body. Below `info` the line is neither built nor written.
///
/// It runs first, outside `ErrorMiddleware`, which turns errors into responses before they reach it.
/// `GET /v1/live` streams are answered below the router (`LiveChannelHandler`), which does the same for them.
struct AccessLogMiddleware<Context: AccessLoggingContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let started = ContinuousClock.now
        var context = context
        if let id = RequestIdentifier.accepted(request.headers[RequestIdentifier.header]) {
            context.logger[metadataKey: RequestIdentifier.metadataKey] = .string(id)
        }
        let id = context.id
        let response: Response
        do {
            response = try await next(request, context)
        } catch {
            Self.log(request, status: 500, responseBytes: nil, started: started, context: context)
            throw error
        }
        var answered = response
        answered.headers[RequestIdentifier.header] = id
        Self.log(
            request, status: answered.status.code, responseBytes: answered.body.contentLength, started: started,
            context: context)
        return answered
    }

    static func log(
        _ request: Request, status: Int, responseBytes: Int?, started: ContinuousClock.Instant, context: Context
    ) {
        guard context.logger.logLevel <= .info else { return }
        let elapsed = ContinuousClock.now - started
        context.logger.info(
            "request",
            metadata: AccessLine(
                method: request.method.rawValue, route: context.endpointPath ?? "NotFound", status: status,
                elapsed: elapsed,
                requestBytes: request.headers[.contentLength].flatMap { Int($0) }, responseBytes: responseBytes,
                replica: context.access.replica
            ).metadata)
    }
}

/// A request context that carries `AccessNotes`.
protocol AccessLoggingContext: RequestContext {
    var access: AccessNotes { get }
}

extension SyncRequestContext: AccessLoggingContext {}

/// What a route learns about its request that the access line shows (the replica, once a body that names it
/// is decoded) or the admin API's latency needs. Every copy of a request's context shares it.
final class AccessNotes: Sendable {
    private let state = Mutex<(replica: String?, waits: Bool)>((nil, false))

    /// The replica the request is from (`sync.replica`), nil when it names none.
    var replica: String? {
        get { state.withLock { $0.replica } }
        set { state.withLock { $0.replica = newValue } }
    }

    /// Whether the request asked to wait for events (a long-poll): its time is then mostly the wait, and the
    /// admin API's pull latency leaves it out.
    var waits: Bool {
        get { state.withLock { $0.waits } }
        set { state.withLock { $0.waits = newValue } }
    }
}

/// The fields of an access line.
struct AccessLine {
    var method: String
    var route: String?
    var status: Int
    var elapsed: Duration
    var requestBytes: Int? = nil
    var responseBytes: Int? = nil
    var replica: String? = nil

    var metadata: Logger.Metadata {
        let microseconds = elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000
        var metadata: Logger.Metadata = [
            "http.method": .string(method),
            "http.status": .stringConvertible(status),
            "http.duration_ms": .stringConvertible(Double(microseconds) / 1000),
        ]
        if let route { metadata["http.route"] = .string(route) }
        if let requestBytes { metadata["http.request.bytes"] = .stringConvertible(requestBytes) }
        if let responseBytes { metadata["http.response.bytes"] = .stringConvertible(responseBytes) }
        if let replica { metadata["sync.replica"] = .string(replica) }
        return metadata
    }
}

/// The id of a request, as `X-Request-Id` carries it both ways.
enum RequestIdentifier {
    static let header = HTTPFields.Element.Name("X-Request-Id")!
    /// The logger metadata key Hummingbird puts its generated id under, and `RequestContext.id` reads.
    static let metadataKey = "hb.request.id"
    /// The longest id taken from a request.
    static let maxLength = 128

    /// `value` when it can serve as the request's id: 1 to 128 characters, each printable ASCII other than
    /// the space (`!` to `~`); nil otherwise, and the server makes one.
    static func accepted(_ value: String?) -> String? {
        guard let value, !value.isEmpty, value.utf8.count <= maxLength,
            value.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
        else { return nil }
        return value
    }
}
