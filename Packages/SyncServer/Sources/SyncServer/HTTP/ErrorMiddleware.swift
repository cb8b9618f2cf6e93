import Foundation
import Hummingbird
import Logging
import SyncProtocol

/// Turns every error into the protocol's JSON error body (`{"error": {"code", "message"}}`) with its
/// status, logs failures without payloads or tokens (with the request's id, `AccessLogMiddleware`), and records
/// each request's count and latency by route template and status. A known path asked with a method it is not
/// served with gets 405 `route.methodNotAllowed` with an `Allow` header (the router alone would say 404).
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let started = ContinuousClock.now
        var response: Response
        do {
            if let allowed = OpenAPIDocument.allowedMethods(path: request.uri.path),
                !allowed.contains(request.method.rawValue)
            {
                throw MethodNotAllowed(allowed: allowed)
            }
            response = try await next(request, context)
        } catch let error as MethodNotAllowed {
            response = Self.response(
                for: SyncProtocolError(.methodNotAllowed, "this route does not accept that method"))
            response.headers[.allow] = error.allowed.joined(separator: ", ")
            metrics.recordError(code: ErrorCode.methodNotAllowed.rawValue, status: 405)
        } catch let refusal as AdminCredential.Refusal {
            response = Self.response(for: refusal.failure)
            if refusal.failure.httpStatus == 401 {
                response.headers[.wwwAuthenticate] = AdminCredential.challenge
            }
            metrics.recordError(code: refusal.failure.code.rawValue, status: refusal.failure.httpStatus)
        } catch {
            let failure = Self.protocolError(for: error)
            Self.log(failure, cause: error, logger: context.logger)
            response = Self.response(for: failure)
            metrics.recordError(code: failure.code.rawValue, status: failure.httpStatus)
        }
        let elapsed = ContinuousClock.now - started
        let route = context.endpointPath ?? "NotFound"
        metrics.recordRequest(
            route: route, method: request.method.rawValue, status: response.status.code,
            nanoseconds: elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000,
            kind: Self.latencyKind(route: route, context: context))
        return response
    }

    /// What the request's latency counts as in the admin API's status.
    static func latencyKind(route: String, context: Context) -> AdminStats.LatencyKind {
        switch route {
        case "/v1/push": return .push
        case "/v1/pull", "/v1/sync":
            let waits = (context as? any AccessLoggingContext)?.access.waits ?? false
            return waits ? .other : .pull
        default: return .other
        }
    }

    /// The protocol error an error is answered with.
    static func protocolError(for error: any Error) -> SyncProtocolError {
        switch Database.classify(error) {
        case let error as SyncProtocolError:
            return error
        case let error as HTTPError where error.status == .notFound:
            return SyncProtocolError(.routeNotFound, "no such route")
        case let error as HTTPError where error.status == .methodNotAllowed:
            return SyncProtocolError(.methodNotAllowed, "this route does not accept that method")
        case let error as HTTPError where error.status == .contentTooLarge:
            return SyncProtocolError(.requestTooLarge, "the body is too large")
        case let error as HTTPError where (400..<500).contains(error.status.code):
            return SyncProtocolError(.requestInvalid, "the request is not valid")
        default:
            return SyncProtocolError(.serverInternal, "internal error")
        }
    }

    static func response(for error: SyncProtocolError) -> Response {
        let (head, body) = answer(for: error)
        return Response(
            status: head.status, headers: head.headerFields, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// The head and JSON body of the answer to `error`.
    static func answer(for error: SyncProtocolError) -> (head: HTTPResponse, body: Data) {
        let body = (try? WireCodec().encode(error.body)) ?? Data()
        var head = HTTPResponse(status: .init(code: error.httpStatus))
        head.headerFields[.contentType] = "application/json"
        if error.code == .rateLimited { head.headerFields[.init("Retry-After")!] = "1" }
        // A refusal under load: spread the retries over 1–3 s, so that the devices refused together (a
        // burst of connections, a restart) do not all come back together.
        if error.code == .serverUnavailable {
            head.headerFields[.init("Retry-After")!] = String(Int.random(in: 1...3))
        }
        return (head, body)
    }

    /// Logs a failed request as `handle` does: a 5xx at `error`, without payloads or tokens, else at `debug`.
    static func log(_ failure: SyncProtocolError, cause error: any Error, logger: Logger) {
        if failure.httpStatus >= 500 {
            logger.error(
                "request failed",
                metadata: [
                    "sync.error.code": "\(failure.code)", "error.type": "\(String(reflecting: type(of: error)))",
                ])
        } else {
            logger.debug("request refused", metadata: ["sync.error.code": "\(failure.code)"])
        }
    }
}

/// A request to a known path with a method it is not served with.
struct MethodNotAllowed: Error {
    var allowed: [String]
}
