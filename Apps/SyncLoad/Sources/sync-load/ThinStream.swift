import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import SyncEngine
import SyncModels
import SyncProtocol
import Synchronization

/// A thin device's live stream on a raw SwiftNIO connection: the request is written when the connection
/// opens, the answer's status is checked, and each message is parsed and handed to `onMessage` on the
/// event loop, with no task or stream between the socket and the device's `DeliveryLog` (a message costs
/// this process the parsing and one lock). Ten thousand of them share NIO's event loops.
///
/// It ends (`closed` completes) when the server closes the stream, the connection breaks, three heartbeats
/// pass in silence, or `close()` is called; with the failure, if any.
final class ThinStream: Sendable {
    /// Where the stream connects and what it asks for.
    struct Target: Sendable {
        var host: String
        var port: Int
        /// The path of `GET /v1/live` with its query.
        var path: String
        var token: String
    }

    private let channel: any Channel
    /// Completes when the stream has ended: nil normally, else why.
    let closed: EventLoopFuture<SyncFailure?>

    private init(channel: any Channel, closed: EventLoopFuture<SyncFailure?>) {
        self.channel = channel
        self.closed = closed
    }

    /// Opens the stream on `loop` (one of `MultiThreadedEventLoopGroup.singleton`'s), where `onMessage` and
    /// `onBytes` are then called; returns once the server has answered 200 with an event stream.
    /// - Throws: the `SyncFailure` of another answer (`transportUnsupported` for a server without the
    ///   stream, as `HTTPTransport.liveFailure` says), or a retryable one when the connection fails.
    static func open(
        _ target: Target, on loop: any EventLoop, onMessage: @escaping @Sendable (LiveMessage) -> Void,
        onBytes: @escaping @Sendable (Int) -> Void
    ) async throws(SyncFailure) -> ThinStream {
        let answered = loop.makePromise(of: Void.self)
        let closed = loop.makePromise(of: SyncFailure?.self)
        let handler = ThinStreamHandler(
            target: target, answered: answered, closed: closed, onMessage: onMessage, onBytes: onBytes)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: loop)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .connectTimeout(.seconds(10))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(handler)
                    }
                }
                .connect(host: target.host, port: target.port).get()
        } catch {
            throw .retryable(reason: "network: \(error)", retryAfter: nil)
        }
        do {
            try await answered.futureResult.get()
        } catch let failure as SyncFailure {
            channel.close(promise: nil)
            throw failure
        } catch {
            channel.close(promise: nil)
            throw .retryable(reason: "network: \(error)", retryAfter: nil)
        }
        return ThinStream(channel: channel, closed: closed.futureResult)
    }

    func close() { channel.close(promise: nil) }
}

/// The pipeline's end of a `ThinStream`: writes the request, reads the answer.
private final class ThinStreamHandler: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: every mutable field is touched on the channel's event loop only.
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let target: ThinStream.Target
    private let answered: EventLoopPromise<Void>
    private let closed: EventLoopPromise<SyncFailure?>
    private let onMessage: @Sendable (LiveMessage) -> Void
    private let onBytes: @Sendable (Int) -> Void
    private var parser = ServerSentEventParser()
    private let codec = WireCodec()
    /// The status of an answer other than a stream, and its body so far.
    private var refused: (status: Int, retryAfter: String?, body: ByteBuffer)?
    private var isAnswered = false
    private var failure: SyncFailure?
    private var heartbeat = TimeAmount.seconds(30)
    private var lastHeard = NIODeadline.now()
    private var watchdog: RepeatedTask?

    init(
        target: ThinStream.Target, answered: EventLoopPromise<Void>, closed: EventLoopPromise<SyncFailure?>,
        onMessage: @escaping @Sendable (LiveMessage) -> Void, onBytes: @escaping @Sendable (Int) -> Void
    ) {
        self.target = target
        self.answered = answered
        self.closed = closed
        self.onMessage = onMessage
        self.onBytes = onBytes
    }

    func channelActive(context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: "\(target.host):\(target.port)")
        headers.add(name: "Authorization", value: "Bearer \(target.token)")
        headers.add(name: "Accept", value: "text/event-stream")
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target.path, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        // Three heartbeats of silence end the stream, as the engine's transport does.
        watchdog = context.eventLoop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) {
            [weak self] task in
            guard let self else { return task.cancel() }
            if NIODeadline.now() - self.lastHeard > self.heartbeat * 3 {
                self.failure = .retryable(
                    reason: "network: the live stream was silent for three heartbeats", retryAfter: nil)
                context.close(promise: nil)
            }
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastHeard = .now()
        switch unwrapInboundIn(data) {
        case .head(let head):
            let type = head.headers.first(name: "Content-Type") ?? ""
            if head.status == .ok && type.hasPrefix("text/event-stream") {
                isAnswered = true
                answered.succeed(())
            } else {
                refused = (Int(head.status.code), head.headers.first(name: "Retry-After"), ByteBuffer())
            }
        case .body(var buffer):
            onBytes(buffer.readableBytes)
            if refused != nil {
                refused!.body.writeBuffer(&buffer)
                return
            }
            do {
                for item in try parser.feed(buffer.readableBytesView) {
                    switch item {
                    case .comment: onMessage(.heartbeat)
                    case .event(let event):
                        guard let message = try LiveMessage(event: event.name, data: event.data, codec: codec) else {
                            continue
                        }
                        if case .subscribed(let seconds) = message { heartbeat = .seconds(Int64(max(1, seconds))) }
                        onMessage(message)
                    }
                }
            } catch {
                failure = .retryable(reason: "the live stream sent something unreadable: \(error)", retryAfter: nil)
                context.close(promise: nil)
            }
        case .end:
            if let refused {
                failure = HTTPTransport.liveFailure(
                    status: refused.status, retryAfter: refused.retryAfter, body: Data(refused.body.readableBytesView))
            }
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if failure == nil { failure = .retryable(reason: "network: \(error)", retryAfter: nil) }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        watchdog?.cancel()
        let failure = failure ?? .retryable(reason: "network: the connection closed", retryAfter: nil)
        if isAnswered {
            closed.succeed(failure)
        } else {
            answered.fail(failure)
            closed.succeed(failure)
        }
        context.fireChannelInactive()
    }
}
