import NIOCore
import NIOPosix
import SyncToolSupport

/// One client's connection through the proxy and its connection to the upstream, on one event loop: two
/// ``Flow``s, one per direction, and the decisions that concern both (when to read, the reset).
///
/// Every method runs on `eventLoop`; the handlers of both channels call in from there.
final class ProxyConnection {
    enum Side { case client, upstream }

    let proxy: FaultProxy
    let eventLoop: any EventLoop
    let index: UInt64
    /// This connection's draws: jitter, whether it is reset, after how many bytes.
    var random: SplitMix64
    /// The connection is reset while the reset probability is above this draw.
    let resetDraw: Double
    /// Where in `1...resetAfterMax` bytes of the response the reset falls.
    let resetFraction: Double
    /// The count of response bytes after which the connection is reset, once armed.
    private var resetAt: Int?
    private(set) var resetting = false
    private var blackholeCounted = false
    private var client: ChannelHandlerContext?
    private var upstream: ChannelHandlerContext?
    private var upstreamConnecting = false
    private var clientClosed = false
    private(set) var toUpstream: Flow!
    private(set) var toClient: Flow!

    init(proxy: FaultProxy, eventLoop: any EventLoop) {
        self.proxy = proxy
        self.eventLoop = eventLoop
        let (index, settings) = proxy.admit()
        self.index = index
        // One stream per connection: the seed mixed with the connection's index.
        var mixer = SplitMix64(seed: proxy.seed ^ (index &* 0xD6E8_FEB8_6659_FD93))
        var random = SplitMix64(seed: mixer.next())
        resetDraw = Double.random(in: 0..<1, using: &random)
        resetFraction = Double.random(in: 0..<1, using: &random)
        self.random = random
        toUpstream = Flow(connection: self, destination: .upstream)
        toClient = Flow(connection: self, destination: .client)
        if settings.blackhole { noteBlackholed() }
    }

    func context(_ side: Side) -> ChannelHandlerContext? {
        side == .client ? client : upstream
    }

    func flow(from side: Side) -> Flow { side == .client ? toUpstream : toClient }
    func flow(to side: Side) -> Flow { side == .client ? toClient : toUpstream }

    func attach(_ side: Side, context: ChannelHandlerContext) {
        switch side {
        case .client: client = context
        case .upstream: upstream = context
        }
    }

    func active(_ side: Side) {
        switch side {
        case .client:
            maybeRead(.client)
            connectUpstream()
        case .upstream:
            toUpstream.pump()
            maybeRead(.upstream)
        }
    }

    func received(_ buffer: ByteBuffer, from side: Side) {
        flow(from: side).enqueue(buffer)
    }

    func writabilityChanged(_ side: Side) {
        flow(to: side).pump()
        maybeRead(side == .client ? .upstream : .client)
    }

    /// One side closed: what the other side still has for it is dropped, what it sent is delivered first,
    /// then the other side is closed.
    func inactive(_ side: Side) {
        flow(to: side).discard()
        switch side {
        case .client:
            client = nil
            if !clientClosed {
                clientClosed = true
                proxy.record { $0.connectionsOpen -= 1 }
            }
        case .upstream: upstream = nil
        }
        let outgoing = flow(from: side)
        outgoing.sourceEnded = true
        outgoing.pump()
    }

    /// Asks `side` for more bytes if its flow has room and the other side can take them.
    func maybeRead(_ side: Side) {
        guard !resetting, let context = context(side), context.channel.isActive else { return }
        let flow = flow(from: side)
        guard flow.hasRoom, !flow.destinationClosed else { return }
        let other = side == .client ? Side.upstream : .client
        if let destination = self.context(other), !destination.channel.isWritable { return }
        context.read()
    }

    func noteBlackholed() {
        guard !blackholeCounted else { return }
        blackholeCounted = true
        proxy.record { $0.connectionsBlackholed += 1 }
    }

    /// The count of response bytes after which this connection is to be reset, if it is, given that
    /// `forwarded` went through so far. Armed at the first response bytes that find the fault on.
    func resetPoint(forwarded: Int, settings: FaultSettings) -> Int? {
        guard settings.resetProbability > 0, resetDraw < settings.resetProbability else {
            resetAt = nil
            return nil
        }
        if let resetAt, resetAt > forwarded { return resetAt }
        let at = forwarded + 1 + min(Int(resetFraction * Double(settings.resetAfterMax)), settings.resetAfterMax - 1)
        resetAt = at
        return at
    }

    /// Resets both sides (RST: SO_LINGER 0, then close) once `written`, the last bytes let through, left.
    func reset(after written: EventLoopFuture<Void>) {
        resetting = true
        proxy.record { $0.connectionsReset += 1 }
        written.assumeIsolated().whenComplete { _ in
            // Loopback delivers what was written at once; a moment more so that the client reads it before
            // the reset.
            self.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(5)) { self.abort() }
        }
    }

    private func abort() {
        for context in [client, upstream].compactMap({ $0 }) {
            let channel = context.channel
            guard let provider = channel as? any SocketOptionProvider else {
                channel.close(promise: nil)
                continue
            }
            provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
                channel.close(promise: nil)
            }
        }
    }

    private func connectUpstream() {
        guard !upstreamConnecting else { return }
        upstreamConnecting = true
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        ClientBootstrap(group: eventLoop)
            .channelOption(.autoRead, value: false)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        RelayHandler(connection: bound.value, side: .upstream))
                }
            }
            .connect(host: proxy.upstreamHost, port: proxy.upstreamPort)
            .assumeIsolated()
            .whenFailure { _ in
                let connection = bound.value
                connection.proxy.record { $0.upstreamConnectFailures += 1 }
                connection.toUpstream.discard()
                connection.client?.close(promise: nil)
            }
    }
}
