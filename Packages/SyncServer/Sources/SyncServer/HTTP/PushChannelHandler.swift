import Hummingbird
import Logging
import NIOCore
import NIOHTTPTypes
import SyncProtocol

/// Serves `POST /v1/push` below Hummingbird's request handling, from a task on the connection's event loop
/// (`ServerConfiguration.pushesBelowRouter`).
///
/// Through the router, a push's request and answer pass through the connection's async channel (its inbound
/// sequence and outbound writer), the responder, two middlewares and the route's closure, each an async frame
/// resumed in turn: for a one-event push, about an eighth of the server's CPU (Benchmarks/HISTORY.md, "A push below
/// the router"). Here its parts are read into one buffer on the event loop, and once the request has ended
/// `SyncAPI.pushBelowRouter` decides it in a task that prefers the loop's executor (so its database lease is
/// served by the loop's pool), then the answer is written straight into the pipeline.
///
/// Anything unusual goes on to Hummingbird unchanged, whose routes and middlewares answer it as they answer every
/// request: a push asked while Hummingbird still answers an earlier request on the connection (pipelining), one
/// with `Expect` or `Connection: close`, a `Content-Encoding` the protocol does not know, a body over its limit
/// (413), and one that `pushBelowRouter` hands back because it was refused before the push began (401, 429, 400).
/// A request that comes while a push is decided here waits until it is answered, as do the end of the client's
/// input and a graceful shutdown's request to close idle connections.
final class PushChannelHandler: ChannelDuplexHandler, RemovableChannelHandler, @unchecked Sendable {
    // @unchecked: every stored property is used on the channel's event loop only.
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private enum State {
        /// Requests go on to Hummingbird.
        case passing
        /// A push whose body is being read.
        case reading(HTTPRequest, body: ByteBuffer, started: ContinuousClock.Instant)
        /// A push being decided (its parts kept for `handOver`).
        case pushing(HTTPRequest, body: ByteBuffer)
        case ended
    }

    private let api: SyncAPI
    private let logger: Logger
    private var state = State.passing
    private var context: ChannelHandlerContext?
    /// Requests passed on to Hummingbird that it has not finished answering.
    private var inFlight = 0
    /// What came while a push was read or decided here: the parts of the requests after it, and events.
    private var heldParts: [HTTPRequestPart] = []
    private var heldEvents: [Any] = []

    init(api: SyncAPI, logger: Logger) {
        self.api = api
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch state {
        case .passing:
            if case .head(let head) = part {
                if inFlight == 0, isServedHere(head) {
                    state = .reading(head, body: context.channel.allocator.buffer(capacity: 0), started: .now)
                    return
                }
                inFlight += 1
            }
            context.fireChannelRead(data)
        case .reading(let head, var body, let started):
            switch part {
            case .head:
                // Not sent by a parser before the end of the request before it.
                heldParts.append(part)
            case .body(var chunk):
                state = .passing
                body.writeBuffer(&chunk)
                state = .reading(head, body: body, started: started)
                if body.readableBytes > maxWireBytes(head) { handOver(context, head, body, ended: false) }
            case .end:
                state = .pushing(head, body: body)
                decide(head, body: body, started: started, on: context.eventLoop)
            }
        case .pushing:
            heldParts.append(part)
        case .ended:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch state {
        case .reading, .pushing:
            let isInputClosed = (event as? ChannelEvent) == .inputClosed
            if isInputClosed || event is ChannelShouldQuiesceEvent {
                heldEvents.append(event)
                return
            }
        case .passing, .ended:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        state = .ended
        context.fireChannelInactive()
    }

    // MARK: Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // Hummingbird's answers pass here on their way out; the end of one ends its request.
        if case .end = unwrapOutboundIn(data) { inFlight = max(0, inFlight - 1) }
        context.write(data, promise: promise)
    }

    // MARK: Deciding

    /// Whether `head` is a push this handler takes.
    private func isServedHere(_ head: HTTPRequest) -> Bool {
        guard head.method == .post, head.path == "/v1/push", head.headerFields[.expect] == nil else { return false }
        if let connection = head.headerFields[.connection], connection.lowercased() != "keep-alive" { return false }
        guard let coding = try? ContentCoding(header: head.headerFields[.contentEncoding]) else { return false }
        if let length = head.headerFields[.contentLength].flatMap(Int.init),
            length > coding.maxWireBytes(api.codec.limits)
        {
            return false
        }
        return true
    }

    private func maxWireBytes(_ head: HTTPRequest) -> Int {
        ((try? ContentCoding(header: head.headerFields[.contentEncoding])) ?? .identity).maxWireBytes(api.codec.limits)
    }

    private func decide(_ head: HTTPRequest, body: ByteBuffer, started: ContinuousClock.Instant, on loop: any EventLoop)
    {
        Task(executorPreference: LoopExecutors.singleton.executor(for: loop)) { [api, logger] in
            let answer = await api.pushBelowRouter(head, body: body, started: started, logger: logger)
            if loop.inEventLoop {
                self.answer(answer)
            } else {
                loop.execute { self.answer(answer) }
            }
        }
    }

    private func answer(_ answer: SyncAPI.BelowRouterAnswer) {
        guard case .pushing(let head, let body) = state, let context else { return }
        switch answer {
        case .handOver:
            handOver(context, head, body, ended: true)
        case .response(var response, let bytes):
            response.headerFields[.contentLength] = String(bytes.readableBytes)
            state = .passing
            context.write(wrapOutboundOut(.head(response)), promise: nil)
            context.write(wrapOutboundOut(.body(bytes)), promise: nil)
            let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
            replayHeld(context, after: written)
        }
    }

    /// Gives the request to Hummingbird as it came, then what came after it.
    private func handOver(_ context: ChannelHandlerContext, _ head: HTTPRequest, _ body: ByteBuffer, ended: Bool) {
        state = .passing
        inFlight += 1
        context.fireChannelRead(wrapInboundOut(.head(head)))
        if body.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(.body(body))) }
        if ended { context.fireChannelRead(wrapInboundOut(.end(nil))) }
        // Outside a read of the socket: the async channel passes reads on at the end of a read.
        context.fireChannelReadComplete()
        replayHeld(context, after: nil)
    }

    /// Reads the parts held while a push was read or decided, as if they came now, then passes on the events held
    /// (after `written`, the push's answer, so that a close they lead to does not cut it off).
    private func replayHeld(_ context: ChannelHandlerContext, after written: EventLoopFuture<Void>?) {
        let parts = heldParts
        heldParts = []
        for part in parts { channelRead(context: context, data: wrapInboundOut(part)) }
        if !parts.isEmpty { context.fireChannelReadComplete() }
        let events = heldEvents
        heldEvents = []
        guard !events.isEmpty else { return }
        let fire = { for event in events { self.userInboundEventTriggered(context: context, event: event) } }
        if let written {
            written.assumeIsolated().whenComplete { _ in fire() }
        } else {
            fire()
        }
    }
}
