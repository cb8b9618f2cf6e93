import FaultProxy
import NIOCore
import NIOPosix
import SyncTestSupport

/// Real sockets on loopback for the proxy's tests: an echo server as the upstream, and clients that send
/// bytes and collect what comes back until enough did, the connection closed, or time ran out.
enum Loopback {
    /// What a client saw.
    struct Outcome: Sendable {
        var bytes: [UInt8]
        /// The errno of the error the connection ended with (ECONNRESET for a reset), if any.
        var errno: Int32?
        var failed: Bool
        var closed: Bool
        var timedOut: Bool
    }

    /// An echo server on a free port.
    static func echoServer() async throws -> (channel: any Channel, port: Int) {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(EchoHandler())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return (channel, channel.localAddress!.port!)
    }

    /// An echo upstream behind a proxy with `settings`, both on free ports.
    static func proxiedEcho(
        _ settings: FaultSettings = .none, seed: UInt64 = 1
    ) async throws -> (proxy: FaultProxy, port: Int, upstream: any Channel) {
        let (upstream, upstreamPort) = try await echoServer()
        let proxy = FaultProxy(upstreamHost: "127.0.0.1", upstreamPort: upstreamPort, settings: settings, seed: seed)
        let port = try await proxy.listen(port: 0)
        return (proxy, port, upstream)
    }

    /// A connection to `port` that collects up to `expecting` bytes for at most `timeout`.
    struct Client {
        let channel: any Channel
        let outcome: EventLoopFuture<Outcome>

        static func connect(port: Int, expecting: Int, timeout: TimeAmount) async throws -> Client {
            let promise = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: Outcome.self)
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            CollectingHandler(expecting: expecting, timeout: timeout, done: promise))
                    }
                }
                .connect(host: "127.0.0.1", port: port).get()
            return Client(channel: channel, outcome: promise.futureResult)
        }

        func send(_ bytes: [UInt8]) async throws {
            try await channel.writeAndFlush(ByteBuffer(bytes: bytes))
        }

        func close() async { try? await channel.close() }
    }

    /// Sends `bytes` through a new connection and collects as many back (an echo).
    static func echo(_ bytes: [UInt8], port: Int, timeout: TimeAmount = .seconds(300)) async throws -> Outcome {
        let client = try await Client.connect(port: port, expecting: bytes.count, timeout: timeout)
        try await client.send(bytes)
        let outcome = try await client.outcome.get()
        await client.close()
        return outcome
    }

    /// Seeded bytes, so that a failure can be reproduced.
    static func payload(_ count: Int, seed: UInt64) -> [UInt8] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }
}

final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.write(data, promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

final class CollectingHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    let expecting: Int
    let timeout: TimeAmount
    let done: EventLoopPromise<Loopback.Outcome>
    private var bytes: [UInt8] = []
    private var errno: Int32?
    private var failed = false
    private var finished = false

    init(expecting: Int, timeout: TimeAmount, done: EventLoopPromise<Loopback.Outcome>) {
        self.expecting = expecting
        self.timeout = timeout
        self.done = done
    }

    func handlerAdded(context: ChannelHandlerContext) {
        context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
            finish(closed: false, timedOut: true)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        bytes += unwrapInboundIn(data).readableBytesView
        if bytes.count >= expecting { finish(closed: false, timedOut: false) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failed = true
        errno = (error as? IOError)?.errnoCode
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(closed: true, timedOut: false)
    }

    private func finish(closed: Bool, timedOut: Bool) {
        guard !finished else { return }
        finished = true
        done.succeed(Loopback.Outcome(bytes: bytes, errno: errno, failed: failed, closed: closed, timedOut: timedOut))
    }
}
