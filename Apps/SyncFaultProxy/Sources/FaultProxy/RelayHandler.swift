import NIOCore

/// One side of a proxied connection, the client's channel or the upstream's: hands what it reads, and
/// the changes of its channel, to its ``ProxyConnection``, which decides when to read and what to write.
final class RelayHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let connection: ProxyConnection
    let side: ProxyConnection.Side

    init(connection: ProxyConnection, side: ProxyConnection.Side) {
        self.connection = connection
        self.side = side
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connection.attach(side, context: context)
    }

    func channelActive(context: ChannelHandlerContext) {
        connection.active(side)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection.received(unwrapInboundIn(data), from: side)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        connection.maybeRead(side)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        connection.writabilityChanged(side)
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection.inactive(side)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
