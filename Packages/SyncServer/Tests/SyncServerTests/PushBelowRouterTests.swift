import Foundation
import HTTPTypes
import NIOCore
import NIOPosix
import SyncCompression
import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Synchronization
import Testing

@testable import SyncServer

/// `POST /v1/push` served below the router (`PushChannelHandler`), over real loopback HTTP: every answer is the
/// router's answer (status, fields, body), requests pipelined behind a push or coming with it are answered in
/// order, and the end of the client's input does not cut a push's answer off.
@Suite struct PushBelowRouterTests {
    /// One request of the comparison.
    struct Exchange: Sendable {
        var name: String
        var headers: HTTPFields
        var body: Data
    }

    /// The same requests, in the same order, to a server that answers pushes below the router and to one that
    /// answers them through it, each on a new database: the same statuses, fields and bodies (but for the date
    /// and the generated request ids); and the first answered every push itself.
    @Test func answersEveryPushAsTheRouterDoes() async throws {
        let codec = WireCodec()
        let token = try await TokenVerifier(secret: TestServer.secret).mint(
            subject: "alice", scopes: ["below"], ttl: 600)
        let otherScope = try await TokenVerifier(secret: TestServer.secret).mint(
            subject: "alice", scopes: ["elsewhere"], ttl: 600)
        let auth: HTTPFields = [.authorization: "Bearer \(token)", .contentType: "application/json"]
        func body(_ events: [Event]) throws -> Data {
            try codec.encode(PushRequest(replica: EventFixtures.replica, events: events))
        }
        let first = [EventFixtures.event(scope: "below"), EventFixtures.event(scope: "below", stream: "other")]
        let stale = EventFixtures.event(scope: "below", version: 1)
        let many = (0..<60).map { _ in EventFixtures.event(scope: "below", stream: EventFixtures.stream()) }
        var gzip = auth
        gzip[.contentEncoding] = "gzip"
        var acceptsGzip = auth
        acceptsGzip[.acceptEncoding] = "gzip"
        var identified = auth
        identified[RequestIdentifier.header] = "client-chosen-id"
        var brotli = auth
        brotli[.contentEncoding] = "br"
        let exchanges = [
            Exchange(name: "a push", headers: identified, body: try body(first)),
            Exchange(name: "its retry", headers: auth, body: try body(first)),
            Exchange(name: "a stale version", headers: auth, body: try body([stale])),
            Exchange(
                name: "a gzip body", headers: gzip,
                body: Gzip.compress(try body([EventFixtures.event(scope: "below", stream: "gz")]))),
            Exchange(name: "a gzip answer", headers: acceptsGzip, body: try body(many)),
            Exchange(name: "no events", headers: auth, body: try body([])),
            Exchange(name: "malformed JSON", headers: auth, body: Data(#"{"replica":"#.utf8)),
            Exchange(name: "no token", headers: [:], body: try body(first)),
            Exchange(
                name: "another scope's token", headers: [.authorization: "Bearer \(otherScope)"],
                body: try body([EventFixtures.event(scope: "below")])),
            Exchange(name: "an unknown encoding", headers: brotli, body: try body(first)),
            Exchange(name: "a body over the limit", headers: auth, body: Data(repeating: 0x20, count: 70_000)),
        ]
        let limits: @Sendable (inout ServerConfiguration) -> Void = {
            $0.limits.maxDecompressedBodyBytes = 64 * 1024
        }
        let below = try await Self.answers(to: exchanges, configure: limits)
        let through = try await Self.answers(to: exchanges) {
            limits(&$0)
            $0.pushesBelowRouter = false
        }
        #expect(below.servedBelow == exchanges.count - 4, "every push that was not refused before it began")
        #expect(through.servedBelow == 0)
        for (index, exchange) in exchanges.enumerated() {
            let (mine, theirs) = (below.answers[index], through.answers[index])
            #expect(mine.status == theirs.status, "\(exchange.name)")
            #expect(mine.fields == theirs.fields, "\(exchange.name)")
            #expect(mine.body == theirs.body, "\(exchange.name)")
            #expect(mine.requestID != nil && mine.hasDate, "\(exchange.name)")
        }
        #expect(below.answers[0].requestID == "client-chosen-id")
        #expect(below.answers.map(\.status) == [200, 200, 200, 200, 200, 200, 400, 401, 200, 415, 413])
        #expect(below.answers[4].fields["content-encoding"] == "gzip")
    }

    /// What a server answered to `exchanges`, sent one after another, and how many pushes it answered below the
    /// router.
    static func answers(
        to exchanges: [Exchange], configure: @escaping @Sendable (inout ServerConfiguration) -> Void
    ) async throws -> (answers: [Answer], servedBelow: Int) {
        let result = Mutex<([Answer], Int)>(([], 0))
        try await TestServer.run(live: true, configure: configure) { server in
            var answers: [Answer] = []
            for exchange in exchanges {
                let response = try await server.send(
                    .post, "/v1/push", headers: exchange.headers, body: exchange.body)
                answers.append(try Answer(response.status.code, response.headers, response.body))
            }
            let metrics = try await server.send(.get, "/metrics")
            let page = String(buffer: metrics.body)
            let served =
                page.split(separator: "\n").first { $0.hasPrefix("sync_push_below_router_total ") }
                .flatMap { Int($0.split(separator: " ")[1]) } ?? 0
            let done = answers
            result.withLock { $0 = (done, served) }
        }
        let (answers, served) = result.withLock { $0 }
        return (answers, served)
    }

    /// An answer as compared: its status, its fields but the date and the request id (lowercased names), and its
    /// body, inflated and, when JSON, parsed (an object's keys come in any order).
    struct Answer: Sendable {
        var status: Int
        var fields: [String: String]
        var body: String
        var requestID: String?
        var hasDate: Bool

        init(_ status: Int, _ headers: HTTPFields, _ bytes: ByteBuffer) throws {
            self.status = status
            var fields: [String: String] = [:]
            for field in headers {
                fields[field.name.canonicalName] = field.value
            }
            requestID = fields.removeValue(forKey: "x-request-id")
            hasDate = fields.removeValue(forKey: "date") != nil
            var data = Data(buffer: bytes)
            if fields["content-encoding"] == "gzip" {
                data = try Gzip.decompress(data)
                // The compressed length may differ with nothing else.
                fields["content-length"] = nil
            }
            self.fields = fields
            if let json = try? JSONSerialization.jsonObject(with: data),
                let sorted = try? JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])
            {
                body = String(decoding: sorted, as: UTF8.self)
            } else {
                body = String(decoding: data, as: UTF8.self)
            }
        }
    }

    /// Two pushes and a health check sent at once on one connection are answered in order; the check asks to
    /// close, and the connection closes after it.
    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        try await TestServer.run(live: true) { server in
            let token = try await server.token(["pipe"])
            let pushes = try (0..<2).map { _ in
                try Self.rawPush([EventFixtures.event(scope: "pipe", stream: EventFixtures.stream())], token: token)
            }
            let health = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            let answer = try await RawExchange.send(
                pushes.joined() + health, port: server.client.port!)
            let statuses = answer.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.prefix(3) }
            #expect(statuses == ["200", "200", "200"], "\(answer)")
            #expect(answer.contains(#""seq":1"#) && answer.contains(#""seq":2"#), "\(answer)")
            #expect(answer.hasSuffix(#"{"status":"ok"}"#), "\(answer)")
            let pulled = try await server.pull(PullRequest(scopes: ["pipe"]), scopes: ["pipe"])
            #expect(pulled.events.count == 2)
        }
    }

    /// A client that closes its side once it has sent its push still gets the answer; a push that asks to close
    /// the connection is answered, then the connection closes.
    @Test func theEndOfTheClientsInputWaitsForTheAnswer() async throws {
        try await TestServer.run(live: true) { server in
            let token = try await server.token(["half"])
            let push = try Self.rawPush([EventFixtures.event(scope: "half")], token: token)
            let halfClosed = try await RawExchange.send(push, port: server.client.port!, closingOutput: true)
            #expect(halfClosed.hasPrefix("HTTP/1.1 200"), "\(halfClosed)")
            #expect(halfClosed.contains(#""status":"accepted""#), "\(halfClosed)")

            let closing = try Self.rawPush(
                [EventFixtures.event(scope: "half", stream: "closing")], token: token, extra: "Connection: close\r\n")
            let closed = try await RawExchange.send(closing, port: server.client.port!)
            #expect(closed.hasPrefix("HTTP/1.1 200"), "\(closed)")
            #expect(closed.contains(#""status":"accepted""#), "\(closed)")
        }
    }

    /// A push as raw HTTP/1.1.
    static func rawPush(_ events: [Event], token: String, extra: String = "") throws -> String {
        let body = String(
            decoding: try WireCodec().encode(PushRequest(replica: EventFixtures.replica, events: events)), as: UTF8.self
        )
        return
            "POST /v1/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\(extra)\r\n\(body)"
    }
}

/// Bytes sent on a new connection, and everything read back until the server closes it.
enum RawExchange {
    private final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        var bytes: [UInt8] = []
        let done: EventLoopPromise<String>

        init(done: EventLoopPromise<String>) { self.done = done }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            bytes += unwrapInboundIn(data).readableBytesView
        }

        func channelInactive(context: ChannelHandlerContext) {
            done.succeed(String(decoding: bytes, as: UTF8.self))
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            // The server closed its side (the client allows half-closure): it has said everything.
            if (event as? ChannelEvent) == .inputClosed { context.close(promise: nil) }
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// - Parameter closingOutput: close the connection's output once `request` is sent (a half-close).
    static func send(_ request: String, port: Int, closingOutput: Bool = false) async throws -> String {
        let group = MultiThreadedEventLoopGroup.singleton
        let done = group.any().makePromise(of: String.self)
        let channel = try await ClientBootstrap(group: group)
            .channelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Collector(done: done))
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        try await channel.writeAndFlush(ByteBuffer(string: request)).get()
        if closingOutput { try await channel.close(mode: .output).get() }
        return try await done.futureResult.get()
    }
}
