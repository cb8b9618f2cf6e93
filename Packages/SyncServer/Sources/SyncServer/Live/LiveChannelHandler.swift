import Hummingbird
import Logging
import NIOCore
import NIOHTTPTypes
import SyncProtocol
import Synchronization

/// A parked subscriber of the live stream: a task waiting in `LiveHub.next`, or a connection whose stream is
/// written from its event loop (`LiveChannelHandler`), pumped there when it has something.
enum LiveWaiter: Sendable {
    case task(CheckedContinuation<Void, Never>)
    case connection(any LiveConnection)
}

/// A connection whose live stream is written from its event loop.
protocol LiveConnection: AnyObject, Sendable {
    var eventLoop: any EventLoop { get }
    /// Writes what the subscriber has next, until it must wait; called on `eventLoop`.
    func pump()
}

/// Serves `GET /v1/live` below Hummingbird's request handling, on the connection's event loop.
///
/// A stream holds one connection for hours; through the router it would also hold the connection's task,
/// whose async frames (the connection loop, the responder, the middleware, the handler, the body writer)
/// stay allocated as long as it runs, and wake that task for every frame. Here the request's parts are kept
/// from Hummingbird while the request is checked (`SyncAPI.liveSubscription`, off the event loop); a
/// request that passes is answered from here: the response head, the `live` message, the backfill, then
/// frames and heartbeats written straight into the pipeline whenever `LiveHub` pumps the connection, as long
/// as the socket drains (`isWritable`). Hummingbird's task for the connection stays parked waiting for a
/// first request; the connection closes when the stream ends. A request that fails the check goes on to
/// Hummingbird unchanged, whose `SyncAPI.handleLive` answers it with the protocol's JSON error; so does a
/// live request that comes while Hummingbird still answers an earlier one on the connection (pipelining).
/// A stream it answers gets an `X-Request-Id` and an access line as `AccessLogMiddleware` gives the others,
/// its duration the time to the response's head.
final class LiveChannelHandler: ChannelDuplexHandler, RemovableChannelHandler, LiveConnection, @unchecked Sendable {
    // @unchecked: `state`, `context` and `inFlight` are used on the channel's event loop only; the loop itself
    // is behind a lock (`LiveHub` reads it to pump the connection).
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private enum State {
        /// Requests go on to Hummingbird.
        case passing
        /// A live request being checked: its parts (and any that came after them), held back.
        case checking([HTTPRequestPart])
        case streaming(id: Int)
        case ended
    }

    private let api: SyncAPI
    private let live: LiveHub
    private let logger: Logger
    private var state = State.passing
    private var context: ChannelHandlerContext?
    /// Requests passed on to Hummingbird that it has not finished answering.
    private var inFlight = 0
    private let loop = Mutex<(any EventLoop)?>(nil)

    var eventLoop: any EventLoop { loop.withLock { $0! } }

    init(api: SyncAPI, live: LiveHub, logger: Logger) {
        self.api = api
        self.live = live
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        loop.withLock { $0 = context.eventLoop }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        endSubscription()
        self.context = nil
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch state {
        case .passing:
            if case .head(let head) = part {
                if inFlight == 0 && Self.isLive(head) {
                    state = .checking([part])
                    check(head, on: context.eventLoop)
                    return
                }
                inFlight += 1
            }
            context.fireChannelRead(data)
        case .checking(var parts):
            parts.append(part)
            state = .checking(parts)
        case .streaming, .ended:
            // A stream's client has nothing more to say; what it sends is dropped.
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The client closed its side (Hummingbird allows half-closure): a stream ends at once.
        if let event = event as? ChannelEvent, event == .inputClosed {
            switch state {
            case .streaming:
                finish(context: context, message: nil)
                return
            case .checking:
                // Gone before its check ended: `start` drops the subscription.
                state = .ended
                context.close(promise: nil)
                return
            case .passing, .ended:
                break
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        endSubscription()
        state = .ended
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, case .streaming = state { pump() }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // Hummingbird's answers pass here on their way out; the end of one ends its request.
        if case .end = unwrapOutboundIn(data), case .passing = state { inFlight = max(0, inFlight - 1) }
        context.write(data, promise: promise)
    }

    static func isLive(_ head: HTTPRequest) -> Bool {
        guard head.method == .get, let path = head.path else { return false }
        return path == "/v1/live" || path.hasPrefix("/v1/live?")
    }

    // MARK: Checking

    /// Authorises and subscribes off the event loop, reads the backfill, then comes back to stream, or hands
    /// the request to Hummingbird when anything is wrong with it.
    private func check(_ head: HTTPRequest, on loop: any EventLoop) {
        let started = ContinuousClock.now
        Task { [api, live] in
            do {
                let subscription = try await api.liveSubscription(
                    authorization: head.headerFields[.authorization], path: head.path ?? "")
                var backfill: [ByteBuffer] = []
                var behind = false
                for range in subscription.backfills {
                    guard let frames = try await live.frames(for: range) else {
                        behind = true
                        break
                    }
                    backfill += frames
                }
                loop.execute { [backfill, behind] in
                    self.start(subscription.id, backfill: backfill, behind: behind, request: head, started: started)
                }
            } catch {
                loop.execute { self.handOver() }
            }
        }
    }

    private func handOver() {
        guard case .checking(let parts) = state, let context else { return }
        state = .passing
        for part in parts {
            if case .head = part { inFlight += 1 }
            context.fireChannelRead(wrapInboundOut(part))
        }
        // Outside a read of the socket: the async channel passes reads on at the end of a read.
        context.fireChannelReadComplete()
    }

    private func start(
        _ id: Int, backfill: [ByteBuffer], behind: Bool, request: HTTPRequest, started: ContinuousClock.Instant
    ) {
        guard case .checking = state, let context, context.channel.isActive else {
            live.unsubscribe(id)
            return
        }
        state = .streaming(id: id)
        var head = HTTPResponse(status: .ok)
        head.headerFields[.contentType] = "text/event-stream"
        head.headerFields[.cacheControl] = "no-store"
        // nginx: pass each write on at once (deploy/nginx/sync.conf also turns buffering off).
        head.headerFields[.init("X-Accel-Buffering")!] = "no"
        // The connection ends with the stream (Hummingbird never saw this request).
        head.headerFields[.connection] = "close"
        let requestID =
            RequestIdentifier.accepted(request.headerFields[RequestIdentifier.header]) ?? RequestID().description
        head.headerFields[RequestIdentifier.header] = requestID
        if logger.logLevel <= .info {
            var metadata = AccessLine(
                method: request.method.rawValue, route: "/v1/live", status: 200, elapsed: ContinuousClock.now - started
            ).metadata
            metadata[RequestIdentifier.metadataKey] = .string(requestID)
            logger.info("request", metadata: metadata)
        }
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(live.subscribedMessage)), promise: nil)
        for frame in backfill { context.write(wrapOutboundOut(.body(frame)), promise: nil) }
        if behind {
            live.end(id, .behind)
            finish(context: context, message: SyncAPI.behind)
            return
        }
        context.flush()
        pump()
    }

    // MARK: Streaming

    /// Writes the subscriber's frames and heartbeats until it must wait (parked in `LiveHub`) or its socket
    /// stops draining (pumped again when it drains); writes the stream's last message when it ends.
    func pump() {
        guard case .streaming(let id) = state, let context else { return }
        var wrote = false
        defer { if wrote { context.flush() } }
        while context.channel.isWritable {
            switch live.next(id, connection: self) {
            case .frames(let frames):
                for frame in frames { context.write(wrapOutboundOut(.body(frame)), promise: nil) }
                wrote = true
            case .heartbeat:
                context.write(wrapOutboundOut(.body(LiveHub.heartbeat)), promise: nil)
                wrote = true
            case .end(let outcome):
                wrote = false
                finish(context: context, message: SyncAPI.lastMessage(outcome))
                return
            case .wait:
                return
            }
        }
    }

    /// Ends the stream: its last message, the end of the response, then the connection.
    private func finish(context: ChannelHandlerContext, message: ByteBuffer?) {
        endSubscription()
        state = .ended
        if let message { context.write(wrapOutboundOut(.body(message)), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    private func endSubscription() {
        guard case .streaming(let id) = state else { return }
        live.unsubscribe(id)
    }
}
