import NIOCore
import NIOHTTP1

/// The control endpoint's HTTP handler: one answer per request, from ``FaultProxy/control(method:path:body:)``,
/// then the connection is closed.
final class ControlHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Bodies are specs, a few dozen bytes; anything past this is ignored.
    static let bodyLimit = 64 * 1024

    let proxy: FaultProxy
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()

    init(proxy: FaultProxy) { self.proxy = proxy }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
        case .body(var chunk):
            if body.readableBytes < Self.bodyLimit { body.writeBuffer(&chunk) }
        case .end:
            guard let head else { return }
            self.head = nil
            let answer = proxy.control(method: head.method.rawValue, path: head.uri, body: String(buffer: body))
            let bytes = ByteBuffer(string: answer.body)
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: answer.contentType)
            headers.add(name: "content-length", value: String(bytes.readableBytes))
            headers.add(name: "connection", value: "close")
            let status = HTTPResponseStatus(statusCode: answer.status)
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))),
                promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(bytes))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
