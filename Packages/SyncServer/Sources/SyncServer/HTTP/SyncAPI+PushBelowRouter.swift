import Foundation
import Hummingbird
import Logging
import NIOCore
import SyncProtocol
import Synchronization

extension SyncAPI {
    /// What `pushBelowRouter` made of a request.
    enum BelowRouterAnswer: Sendable {
        /// The answer to write: its head (every field but `Content-Length`) and body.
        case response(HTTPResponse, ByteBuffer)
        /// Refused before anything was done (no or a bad token, no free slot, a body that does not decode):
        /// Hummingbird's route answers it, with the protocol's error, exactly as it answers any request.
        case handOver
    }

    /// `POST /v1/push` served below the router (`PushChannelHandler`): what `handlePush` does with what the access
    /// and error middlewares add to it (the request id, the access line, the request's metrics, the protocol's
    /// JSON error for what the push throws). A request refused before the push starts is handed over instead, so
    /// that every refusal has one answer, Hummingbird's.
    func pushBelowRouter(
        _ head: HTTPRequest, body: ByteBuffer, started: ContinuousClock.Instant, logger: Logger
    ) async -> BelowRouterAnswer {
        guard let identity = try? await tokens.identity(authorization: head.headerFields[.authorization]) else {
            return .handOver
        }
        guard limiter.acquire(identity.subject) else { return .handOver }
        defer { limiter.release(identity.subject) }
        let request: PushRequest
        let wireBytes = body.readableBytes
        let raw: Data
        do {
            let coding = try ContentCoding(header: head.headerFields[.contentEncoding])
            guard wireBytes <= coding.maxWireBytes(codec.limits) else { return .handOver }
            raw = try codec.inflate(body.withUnsafeReadableBytes { Data($0) }, coding: coding)
            request = try codec.decode(PushRequest.self, from: raw)
        } catch {
            return .handOver
        }
        metrics.recordRequestBody(wire: wireBytes, raw: raw.count)
        let requestID =
            RequestIdentifier.accepted(head.headerFields[RequestIdentifier.header]) ?? RequestID().description
        var logger = logger
        logger[metadataKey: RequestIdentifier.metadataKey] = .string(requestID)

        var answer: HTTPResponse
        let bytes: Data
        do {
            let results = try await push.push(
                request.events, replica: request.replica, identity: identity, logger: logger)
            logger.debug(
                "push",
                metadata: ["sync.push.events": "\(request.events.count)", "sync.replica": "\(request.replica)"])
            let json = Data(EventJSONWriter.pushResponse(results))
            let (encoded, coding) = codec.compressIfWorthIt(
                json, acceptEncoding: head.headerFields[.acceptEncoding], level: gzipLevel)
            metrics.recordResponseBody(raw: json.count, wire: encoded.count)
            answer = HTTPResponse(status: .ok)
            answer.headerFields[.contentType] = "application/json"
            if coding == .gzip { answer.headerFields[.contentEncoding] = "gzip" }
            answer.headerFields[.vary] = "Accept-Encoding"
            bytes = encoded
        } catch {
            let failure = ErrorMiddleware<SyncRequestContext>.protocolError(for: error)
            ErrorMiddleware<SyncRequestContext>.log(failure, cause: error, logger: logger)
            metrics.recordError(code: failure.code.rawValue, status: failure.httpStatus)
            (answer, bytes) = ErrorMiddleware<SyncRequestContext>.answer(for: failure)
        }
        answer.headerFields[RequestIdentifier.header] = requestID
        answer.headerFields[.date] = HTTPDate.now
        let elapsed = ContinuousClock.now - started
        metrics.pushesBelowRouter.increment()
        metrics.recordRequest(
            route: "/v1/push", method: "POST", status: answer.status.code,
            nanoseconds: elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000,
            kind: .push)
        if logger.logLevel <= .info {
            logger.info(
                "request",
                metadata: AccessLine(
                    method: "POST", route: "/v1/push", status: answer.status.code, elapsed: elapsed,
                    requestBytes: head.headerFields[.contentLength].flatMap { Int($0) }, responseBytes: bytes.count,
                    replica: "\(request.replica)"
                ).metadata)
        }
        return .response(answer, ByteBuffer(bytes: bytes))
    }
}

/// The value of an HTTP `Date` header (RFC 9110's IMF-fixdate) for now, made once a second.
enum HTTPDate {
    private static let cached = Mutex<(second: Int, text: String)>((-1, ""))

    static var now: String {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        let second = time.tv_sec
        return cached.withLock { cached in
            if cached.second != second {
                cached = (second, format(second))
            }
            return cached.text
        }
    }

    /// `seconds` since 1970 as `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func format(_ seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return
            "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
