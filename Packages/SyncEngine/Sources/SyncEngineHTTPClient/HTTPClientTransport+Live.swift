import AsyncHTTPClient
import Foundation
import NIOCore
import SyncEngine
import SyncProtocol
import Synchronization

extension HTTPClientTransport {
    /// Opens `GET /v1/live` and streams its messages (`SyncTransport.live`): AsyncHTTPClient's streamed body
    /// through `ServerSentEventParser`. The request's `timeout` bounds the wait for the answer's head; after
    /// it, AsyncHTTPClient's deadline no longer applies, so the transport watches the stream itself: when
    /// no byte has come for three heartbeats (`heartbeatSeconds` of the first message, 15 s until then), the
    /// connection is taken as dead and the stream throws a retryable failure. A 404 or 405 (a server without
    /// the stream) throws `SyncFailure.transportUnsupported`; other refusals the failures of a pull.
    public func live(_ request: PullRequest) async throws(SyncFailure) -> LiveMessages {
        var outgoing = HTTPClientRequest(url: HTTPTransport.liveURL(base: baseURL, request).absoluteString)
        outgoing.headers.add(name: "Accept", value: "text/event-stream")
        if let token = token.withLock({ $0 }) { outgoing.headers.add(name: "Authorization", value: "Bearer \(token)") }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(outgoing, timeout: timeout)
        } catch {
            throw .retryable(reason: "network: \(error)", retryAfter: nil)
        }
        let contentType = response.headers.first(name: "Content-Type") ?? ""
        guard response.status == .ok, contentType.lowercased().hasPrefix("text/event-stream") else {
            let body = try? await response.body.collect(upTo: 1 << 20)
            throw HTTPTransport.liveFailure(
                status: Int(response.status.code), retryAfter: response.headers.first(name: "Retry-After"),
                body: body.map { Data($0.readableBytesView) } ?? Data())
        }
        let (stream, continuation) = LiveMessages.makeStream()
        let reader = Task { [onTraffic] in
            await Self.read(response.body, into: continuation, onTraffic: onTraffic)
        }
        continuation.onTermination = { _ in reader.cancel() }
        return stream
    }

    /// When the stream last received a byte, and how often the server promised to write.
    private final class Activity: Sendable {
        struct State {
            var last = ContinuousClock.now
            var heartbeat = Duration.seconds(15)
            /// The first message has said what the heartbeat is.
            var told = false
        }
        let state = Mutex(State())
    }

    /// Reads the body into `continuation` until it ends, fails, or falls silent for three heartbeats.
    private static func read(
        _ body: HTTPClientResponse.Body, into continuation: LiveMessages.Continuation,
        onTraffic: (@Sendable (Traffic) -> Void)?
    ) async {
        let activity = Activity()
        let failure: (any Error)? = await withTaskGroup(of: (any Error)?.self) { group in
            group.addTask {
                do {
                    var parser = ServerSentEventParser()
                    let codec = WireCodec()
                    for try await buffer in body {
                        activity.state.withLock { $0.last = .now }
                        onTraffic?(Traffic(receivedRaw: buffer.readableBytes, receivedWire: buffer.readableBytes))
                        for item in try parser.feed(buffer.readableBytesView) {
                            guard let message = try liveMessage(item, codec: codec) else { continue }
                            if case .subscribed(let seconds) = message {
                                activity.state.withLock {
                                    $0.heartbeat = .seconds(max(1, seconds))
                                    $0.told = true
                                }
                            }
                            continuation.yield(message)
                        }
                    }
                    return nil
                } catch {
                    return error
                }
            }
            group.addTask {
                // The watchdog.
                while !Task.isCancelled {
                    let (last, heartbeat, told) = activity.state.withLock { ($0.last, $0.heartbeat, $0.told) }
                    let deadline = last + heartbeat * 3
                    if ContinuousClock.now >= deadline {
                        return SyncFailure.retryable(
                            reason: "network: the live stream was silent for three heartbeats", retryAfter: nil)
                    }
                    // A second at most until the first message has said what the heartbeat is.
                    let step = told ? heartbeat : .seconds(1)
                    try? await Task.sleep(until: min(deadline, .now + step), clock: .continuous)
                }
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        switch failure {
        case nil: continuation.finish()
        case let failure as SyncFailure: continuation.finish(throwing: failure)
        case is ServerSentEventParser.LineTooLong:
            continuation.finish(
                throwing: SyncFailure.retryable(reason: "the live stream sent a line too long", retryAfter: nil))
        case let failure?:
            continuation.finish(throwing: SyncFailure.retryable(reason: "network: \(failure)", retryAfter: nil))
        }
    }

    /// The message an item of the stream stands for; nil for one to skip (an event this version does not know).
    /// - Throws: a retryable `SyncFailure` for an event whose data is not what its name says.
    private static func liveMessage(_ item: ServerSentEventParser.Item, codec: WireCodec) throws(SyncFailure)
        -> LiveMessage?
    {
        switch item {
        case .comment:
            return .heartbeat
        case .event(let event):
            do {
                return try LiveMessage(event: event.name, data: event.data, codec: codec)
            } catch {
                throw .retryable(reason: "the live stream's \(event.name) message could not be read", retryAfter: nil)
            }
        }
    }
}
