import NIOCore

/// Ends a live subscription as soon as its client goes away. Hummingbird allows half-closed connections, so a
/// client's close reaches the pipeline as `ChannelEvent.inputClosed` and the channel stays open: without this
/// handler nothing notices until the next write fails, up to a heartbeat later. Added to the connection's
/// pipeline for the length of one stream.
final class LiveDisconnectHandler: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = NIOAny

    private let onClose: @Sendable () -> Void

    init(onClose: @escaping @Sendable () -> Void) {
        self.onClose = onClose
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed { onClose() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        onClose()
        context.fireChannelInactive()
    }
}
