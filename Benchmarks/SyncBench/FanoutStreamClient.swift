import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import SyncEngineHTTPClient
import SyncModels
import SyncProtocol
import SyncServer
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `sync-bench fanout --stream`: every device holds one `GET /v1/live` stream instead of long-polling.
///
/// The devices are raw SwiftNIO connections on `MultiThreadedEventLoopGroup.singleton`, one
/// `FanoutStreamHandler` each: it writes the request when the connection opens, checks the answer's status,
/// undoes the chunked transfer coding and finds each `events` message's `"after"` and `"head"` by searching
/// the bytes (no JSON decoding), so that 10,000 of them cost this process little next to the server.
extension FanoutCommand {
    func runStream(
        base: String, scopeList: [Scope], tokens: [String], pusherToken: String, verifier: TokenVerifier,
        control: HTTPClient
    ) async throws {
        guard let url = URL(string: base), url.scheme == "http", let host = url.host else {
            throw ValidationError("--stream needs an http:// server URL with a host")
        }
        let port = url.port ?? 80
        let path = url.path.hasSuffix("/") ? String(url.path.dropLast()) : url.path
        let record = FanoutStreamRecord()
        let scopeIndex = Dictionary(uniqueKeysWithValues: scopeList.enumerated().map { ($0.element, $0.offset) })

        // Each device subscribes at its scope's head: an empty cursor for the fresh scopes of a run, the
        // heads read by a pull when `--scope-prefix` names scopes that may hold events already.
        var heads = ScopeCursor()
        if scopePrefix != nil {
            let reader = try await verifier.mint(subject: "fanout-reader", scopes: scopeList.map(\.name), ttl: 3600)
            heads = try await Self.heads(base: base, token: reader, http: control)
        }

        let serverBefore = serverPid.map { ProcessSample(pid: $0) }
        let started = ContinuousClock.now
        var channels: [any Channel] = []
        channels.reserveCapacity(devices)
        // Opened in batches, each waiting for its streams' first message (or failure) before the next, so
        // that the connects never all sit in the server's accept queue at once.
        for first in stride(from: 0, to: devices, by: connectBatch) {
            var batch: [(connect: EventLoopFuture<any Channel>, subscribed: EventLoopFuture<Void>)] = []
            for index in first..<min(devices, first + connectBatch) {
                let scope = scopeList[index % scopes]
                var cursor = ScopeCursor()
                if heads[scope] > 0 { cursor[scope] = heads[scope] }
                let request = Self.liveRequest(
                    path: path, host: host, port: port, token: tokens[index], scope: scope, cursor: cursor)
                batch.append(
                    Self.openStream(
                        host: host, port: port, request: request, scope: index % scopes, record: record,
                        timeout: .seconds(Int64(connectTimeout))))
            }
            for stream in batch {
                if let channel = try? await stream.connect.get() { channels.append(channel) }
                _ = try? await stream.subscribed.get()
            }
            if let refusal = record.refusal {
                for channel in channels { channel.close(promise: nil) }
                throw ValidationError("the server refused the live streams: \(refusal)")
            }
        }

        // Everyone subscribed: the server's gauge, read from /metrics (devices whose stream failed never
        // come back: no reconnects, the errors say how many). The gauge can still count streams an earlier
        // run closed (the server notices a closed stream at its next write, a heartbeat at the latest), so
        // every device must also have had its `live` message.
        var subscribed = 0
        while true {
            let metrics = try? await Self.metrics(base: base, http: control)
            subscribed = metrics.flatMap { $0["sync_live_subscribers"] }.map { Int($0) } ?? subscribed
            let timedOut = ContinuousClock.now - started > .seconds(connectTimeout)
            let target = devices - record.failedStreams
            if timedOut || (subscribed >= target && record.opened >= target) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let connected = ContinuousClock.now - started
        let serverStreaming = serverPid.map { ProcessSample(pid: $0) }
        let clientStreaming = ProcessSample(pid: getpid())
        let metricsBefore = (try? await Self.metrics(base: base, http: control)) ?? [:]

        let expected = try await pushPhase(scopeList: scopeList, start: ContinuousClock.now) { scope, seed in
            let sent = try await Self.sendPush(
                into: scope, base: base, token: pusherToken, http: control, seed: seed)
            if let seq = sent.seq, let index = scopeIndex[scope] { record.pushed(scope: index, seq: seq, at: sent.at) }
        }
        // Give the last frames time to arrive, then close the streams.
        let settle = ContinuousClock.now + .seconds(10)
        while record.delivered < expected, ContinuousClock.now < settle {
            try await Task.sleep(for: .milliseconds(50))
        }
        let serverAfter = serverPid.map { ProcessSample(pid: $0) }
        let clientAfter = ProcessSample(pid: getpid())
        let metricsAfter = (try? await Self.metrics(base: base, http: control)) ?? [:]
        record.stop()
        for channel in channels { channel.close(promise: nil) }
        for channel in channels { try? await channel.closeFuture.get() }

        var report = record.report(
            devices: devices, scopes: scopes, expected: expected, subscribed: subscribed, connectSeconds: connected,
            connectBatch: connectBatch, server: (serverBefore, serverStreaming, serverAfter),
            pushes: duration == 0 ? 1 : duration * pushScopes,
            clientCPUSeconds: clientAfter.cpuSeconds - clientStreaming.cpuSeconds)
        for (name, keyPath) in [
            ("sync_live_frames_total", \FanoutStreamReport.serverLiveFrames),
            ("sync_live_dropped_total", \FanoutStreamReport.serverLiveDropped),
        ] {
            if let before = metricsBefore[name], let after = metricsAfter[name] {
                report[keyPath: keyPath] = Int(after - before)
            }
        }
        if json {
            print(String(decoding: try JSONEncoder.sortedKeys.encode(report), as: UTF8.self))
        } else {
            print(report.text)
        }
    }

    /// Connects one device and installs its handler; the second future completes when the stream's first
    /// message (`live`) arrives, and fails when the stream fails first or `timeout` passes.
    static func openStream(
        host: String, port: Int, request: ByteBuffer, scope: Int, record: FanoutStreamRecord, timeout: TimeAmount
    ) -> (connect: EventLoopFuture<any Channel>, subscribed: EventLoopFuture<Void>) {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let subscribed = loop.makePromise(of: Void.self)
        let deadline = loop.scheduleTask(in: timeout) { subscribed.fail(FanoutStreamHandler.Failure("timeout")) }
        subscribed.futureResult.whenComplete { _ in deadline.cancel() }
        let connect = ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture(withResultOf: {
                    try channel.pipeline.syncOperations.addHandler(
                        FanoutStreamHandler(request: request, scope: scope, record: record, subscribed: subscribed))
                })
            }
            .connect(host: host, port: port)
        connect.whenFailure { error in
            record.ended(kind: "connect: \(String(describing: error).prefix(50))", refusal: nil)
            subscribed.fail(error)
        }
        return (connect, subscribed.futureResult)
    }

    /// The request of one device's stream: `GET /v1/live` for its scope, from its cursor, with its token.
    static func liveRequest(
        path: String, host: String, port: Int, token: String, scope: Scope, cursor: ScopeCursor
    ) -> ByteBuffer {
        var query = "scopes=\(scope.name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? scope.name)"
        if !cursor.positions.isEmpty { query += "&cursor=\(cursor.encoded)" }
        return ByteBuffer(
            string: "GET \(path)/v1/live?\(query) HTTP/1.1\r\nHost: \(host):\(port)\r\n"
                + "Authorization: Bearer \(token)\r\nAccept: text/event-stream\r\n\r\n")
    }

    /// The cursor at the heads of every scope `token` grants, read by pulling to the end.
    static func heads(base: String, token: String, http: HTTPClient) async throws -> ScopeCursor {
        let transport = HTTPClientTransport(baseURL: URL(string: base)!, token: token, client: http)
        var cursor = ScopeCursor()
        while true {
            let page = try await transport.pull(PullRequest(cursor: cursor))
            cursor = try ScopeCursor(encoded: page.cursor)
            if !page.hasMore { return cursor }
        }
    }

    /// The server's metrics without labels (series of one name with labels summed), from `/metrics`.
    static func metrics(base: String, http: HTTPClient) async throws -> [String: Double] {
        let response = try await http.execute(HTTPClientRequest(url: base + "/metrics"), timeout: .seconds(10))
        let text = String(buffer: try await response.body.collect(upTo: 16 << 20))
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let name = line.split(whereSeparator: { $0 == " " || $0 == "{" }).first,
                let value = line.split(separator: " ").last.flatMap({ Double($0) })
            else { continue }
            values[String(name), default: 0] += value
        }
        return values
    }
}

/// One device's live stream: writes the request when connected, then reads the answer's head (status 200),
/// de-chunks the body and scans its Server-Sent Events for `live`, `events` (the frame's `after` and `head`,
/// found by searching the bytes), `behind` and `error`; heartbeats and unknown events are skipped.
final class FanoutStreamHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Failure: Error, CustomStringConvertible {
        var description: String
        var refusal: String?

        init(_ description: String, refusal: String? = nil) {
            self.description = description
            self.refusal = refusal
        }
    }

    private enum Phase {
        /// Reading the response head.
        case head
        /// Reading a chunk's size line.
        case chunkSize
        /// Inside a chunk: its bytes left.
        case chunkData(Int)
        /// After a chunk: the bytes of its CRLF left.
        case chunkEnd(Int)
        /// A body without chunks: everything until the connection closes.
        case identity
        /// The last chunk came.
        case ended
    }

    private static let blankLine: [UInt8] = Array("\n\n".utf8)
    private static let crlf: [UInt8] = Array("\r\n".utf8)
    private static let headEnd: [UInt8] = Array("\r\n\r\n".utf8)
    private static let framePrefix: [UInt8] = Array("event: \(LiveMessage.frameEvent)\n".utf8)
    private static let subscribedPrefix: [UInt8] = Array("event: \(LiveMessage.subscribedEvent)\n".utf8)
    private static let behindPrefix: [UInt8] = Array("event: \(LiveMessage.behindEvent)\n".utf8)
    private static let errorPrefix: [UInt8] = Array("event: \(LiveMessage.errorEvent)\n".utf8)
    private static let afterKey: [UInt8] = Array(#""after":"#.utf8)
    private static let headKey: [UInt8] = Array(#""head":"#.utf8)
    private static let codeKey: [UInt8] = Array(#""code":""#.utf8)

    private let request: ByteBuffer
    private let scope: Int
    private let record: FanoutStreamRecord
    private let subscribed: EventLoopPromise<Void>
    private var phase = Phase.head
    /// Bytes read and not parsed yet.
    private var input = ByteBuffer()
    /// Body bytes (de-chunked) not parsed into messages yet.
    private var body = ByteBuffer()
    /// This device's stream has ended (and was counted).
    private var over = false

    init(request: ByteBuffer, scope: Int, record: FanoutStreamRecord, subscribed: EventLoopPromise<Void>) {
        self.request = request
        self.scope = scope
        self.record = record
        self.subscribed = subscribed
    }

    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(Self.wrapOutboundOut(request), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let now = ContinuousClock.now
        var bytes = Self.unwrapInboundIn(data)
        if input.readableBytes == 0 {
            input = bytes
        } else {
            input.writeBuffer(&bytes)
        }
        do throws(Failure) {
            try decode()
            try readMessages(at: now)
            if case .ended = phase { throw Failure("stream ended") }
        } catch {
            end(context: context, error)
        }
        if input.readableBytes == 0 { input.clear() } else { input.discardReadBytes() }
        if body.readableBytes == 0 { body.clear() } else { body.discardReadBytes() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        end(context: context, Failure("closed"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        end(context: context, Failure(String(String(describing: error).prefix(60))))
    }

    /// Moves what `input` holds into `body`: the response head first, then the chunks' data.
    private func decode() throws(Failure) {
        while true {
            switch phase {
            case .head:
                guard let end = Self.offset(of: Self.headEnd, in: input) else {
                    if input.readableBytes > 64 * 1024 { throw Failure("response head too long") }
                    return
                }
                let head = input.readString(length: end + Self.headEnd.count) ?? ""
                let statusLine = head.prefix { !$0.isNewline }
                let status = statusLine.split(separator: " ").dropFirst().first.map(String.init) ?? "?"
                guard status == "200" else {
                    let answer = input.readString(length: min(input.readableBytes, 300)) ?? ""
                    // A 4xx no retry would mend (a bad token, scope or cursor) stops the run.
                    throw Failure("HTTP \(status)", refusal: status.hasPrefix("4") ? "\(statusLine) \(answer)" : nil)
                }
                phase = head.lowercased().contains("transfer-encoding: chunked") ? .chunkSize : .identity
            case .chunkSize:
                guard let end = Self.offset(of: Self.crlf, in: input) else { return }
                let line = input.readString(length: end) ?? ""
                input.moveReaderIndex(forwardBy: Self.crlf.count)
                let hex = line.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces)
                guard let size = Int(hex, radix: 16) else { throw Failure("bad chunk size") }
                if size == 0 {
                    phase = .ended
                    return
                }
                phase = .chunkData(size)
            case .chunkData(let left):
                guard input.readableBytes > 0 else { return }
                let count = min(left, input.readableBytes)
                var slice = input.readSlice(length: count)!
                body.writeBuffer(&slice)
                phase = count == left ? .chunkEnd(Self.crlf.count) : .chunkData(left - count)
            case .chunkEnd(let left):
                guard input.readableBytes > 0 else { return }
                let count = min(left, input.readableBytes)
                input.moveReaderIndex(forwardBy: count)
                phase = count == left ? .chunkSize : .chunkEnd(left - count)
            case .identity:
                body.writeBuffer(&input)
                return
            case .ended:
                input.moveReaderIndex(forwardBy: input.readableBytes)
                return
            }
        }
    }

    /// Handles every complete message (up to a blank line) in `body`.
    private func readMessages(at now: ContinuousClock.Instant) throws(Failure) {
        while let end = Self.offset(of: Self.blankLine, in: body) {
            let message = body.readSlice(length: end + Self.blankLine.count)!
            if Self.hasPrefix(Self.framePrefix, message) {
                guard let after = Self.number(after: Self.afterKey, in: message),
                    let head = Self.number(after: Self.headKey, in: message), head >= after
                else { throw Failure("unreadable frame") }
                record.received(scope: scope, after: after, head: head, at: now)
            } else if Self.hasPrefix(Self.subscribedPrefix, message) {
                record.subscribed()
                subscribed.succeed()
            } else if Self.hasPrefix(Self.behindPrefix, message) {
                throw Failure("behind")
            } else if Self.hasPrefix(Self.errorPrefix, message) {
                var code = "error"
                if let start = Self.offset(of: Self.codeKey, in: message) {
                    let view = message.readableBytesView.dropFirst(start + Self.codeKey.count)
                    code = String(decoding: view.prefix { $0 != UInt8(ascii: "\"") }, as: UTF8.self)
                }
                throw Failure(code)
            }
            // Heartbeats (`:`) and events this version does not know: nothing to do.
        }
    }

    private func end(context: ChannelHandlerContext, _ failure: Failure) {
        guard !over else { return }
        over = true
        record.ended(kind: failure.description, refusal: failure.refusal)
        subscribed.fail(failure)
        context.close(promise: nil)
    }

    /// Where `needle` first starts in `buffer`'s readable bytes, from its reader index.
    static func offset(of needle: [UInt8], in buffer: ByteBuffer) -> Int? {
        buffer.withUnsafeReadableBytes { bytes in
            guard bytes.count >= needle.count, let first = needle.first else { return nil }
            var index = 0
            while index <= bytes.count - needle.count {
                if bytes[index] == first {
                    var match = true
                    for offset in 1..<needle.count where bytes[index + offset] != needle[offset] {
                        match = false
                        break
                    }
                    if match { return index }
                }
                index += 1
            }
            return nil
        }
    }

    static func hasPrefix(_ prefix: [UInt8], _ buffer: ByteBuffer) -> Bool {
        buffer.readableBytes >= prefix.count && buffer.readableBytesView.prefix(prefix.count).elementsEqual(prefix)
    }

    /// The non-negative integer right after the first `key` in `buffer`.
    static func number(after key: [UInt8], in buffer: ByteBuffer) -> Int64? {
        guard let start = offset(of: key, in: buffer) else { return nil }
        var value: Int64 = 0
        var digits = 0
        for byte in buffer.readableBytesView.dropFirst(start + key.count) {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { break }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            digits += 1
        }
        return digits > 0 ? value : nil
    }
}

/// What the streams saw: each push's scope, `seq` and send time; each frame's scope, range and arrival;
/// how streams ended. Latencies are joined at the end (a frame can arrive before its push is answered).
final class FanoutStreamRecord: Sendable {
    private struct Position: Hashable {
        var scope: Int
        var seq: Int64
    }
    private struct Receipt {
        var scope: Int
        var after: Int64
        var head: Int64
        var at: ContinuousClock.Instant
    }
    private struct State {
        var pushedAt: [Position: ContinuousClock.Instant] = [:]
        var receipts: [Receipt] = []
        var delivered = 0
        var subscribed = 0
        var failed = 0
        var errors: [String: Int] = [:]
        var refusal: String?
        var stopped = false
    }
    private let state = Mutex(State())

    /// The measurement is over: streams closing from now on are not errors.
    func stop() { state.withLock { $0.stopped = true } }

    func pushed(scope: Int, seq: Int64, at instant: ContinuousClock.Instant) {
        state.withLock { $0.pushedAt[Position(scope: scope, seq: seq)] = instant }
    }

    func subscribed() { state.withLock { $0.subscribed += 1 } }

    func received(scope: Int, after: Int64, head: Int64, at instant: ContinuousClock.Instant) {
        state.withLock { state in
            state.receipts.append(Receipt(scope: scope, after: after, head: head, at: instant))
            state.delivered += Int(head - after)
        }
    }

    /// A device's stream ended (before `stop`, an error of `kind`; `refusal` when the server refused it).
    func ended(kind: String, refusal: String?) {
        state.withLock { state in
            guard !state.stopped else { return }
            state.failed += 1
            state.errors[kind, default: 0] += 1
            if let refusal, state.refusal == nil { state.refusal = refusal }
        }
    }

    /// The first refusal of a stream (its status and the start of the answer), if any.
    var refusal: String? { state.withLock { $0.refusal } }
    /// Events delivered (each frame counts its events), expected or not.
    var delivered: Int { state.withLock { $0.delivered } }
    /// Streams that ended before the measurement did.
    var failedStreams: Int { state.withLock { $0.failed } }
    /// Streams whose `live` message arrived.
    var opened: Int { state.withLock { $0.subscribed } }

    func report(
        devices: Int, scopes: Int, expected: Int, subscribed: Int, connectSeconds: Duration, connectBatch: Int,
        server: (before: ProcessSample?, streaming: ProcessSample?, after: ProcessSample?), pushes: Int,
        clientCPUSeconds: Double
    ) -> FanoutStreamReport {
        state.withLock { state in
            var latencies: [Double] = []
            var unexpected = 0
            for receipt in state.receipts {
                for seq in stride(from: receipt.after + 1, through: receipt.head, by: 1) {
                    guard let sent = state.pushedAt[Position(scope: receipt.scope, seq: seq)] else {
                        unexpected += 1
                        continue
                    }
                    latencies.append(Self.milliseconds(receipt.at - sent))
                }
            }
            latencies.sort()
            var report = FanoutStreamReport(
                devices: devices, scopes: scopes, pushes: pushes, streamsSubscribedBeforePush: subscribed,
                streamsOpened: state.subscribed, streamConnectSeconds: Self.milliseconds(connectSeconds) / 1000,
                connectBatch: connectBatch, expectedDeliveries: expected, delivered: latencies.count,
                unexpected: unexpected, streamFramesReceived: state.receipts.count,
                p50Milliseconds: PushCommand.percentile(latencies, 0.5),
                p99Milliseconds: PushCommand.percentile(latencies, 0.99), maxMilliseconds: latencies.last ?? 0,
                errors: state.errors, clientPushCPUSeconds: clientCPUSeconds)
            if let before = server.before, let streaming = server.streaming {
                report.serverRSSBeforeBytes = before.rss
                report.serverRSSStreamingBytes = streaming.rss
                report.serverRSSPerStreamBytes = (streaming.rss - before.rss) / max(1, devices)
                if let after = server.after {
                    report.serverCPUSeconds = after.cpuSeconds - before.cpuSeconds
                    let push = after.cpuSeconds - streaming.cpuSeconds
                    report.serverPushCPUSeconds = push
                    if !state.receipts.isEmpty {
                        report.serverCPUMicrosecondsPerStreamFrame = push * 1e6 / Double(state.receipts.count)
                    }
                }
            }
            return report
        }
    }

    private static func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }
}

struct FanoutStreamReport: Codable, Sendable {
    var mode = "stream"
    var devices: Int
    var scopes: Int
    var pushes: Int
    /// The server's `sync_live_subscribers` when the pushes began (streams of an earlier run it has not
    /// noticed closed yet included).
    var streamsSubscribedBeforePush: Int
    /// Streams whose `live` message arrived.
    var streamsOpened: Int
    var streamConnectSeconds: Double
    var connectBatch: Int
    var expectedDeliveries: Int
    var delivered: Int
    var unexpected: Int
    /// `events` frames the devices read (a frame can carry several commits).
    var streamFramesReceived: Int
    var p50Milliseconds: Double
    var p99Milliseconds: Double
    var maxMilliseconds: Double
    var errors: [String: Int]
    /// CPU this process spent from the first push to the end (reading the frames).
    var clientPushCPUSeconds: Double
    var serverRSSBeforeBytes: Int?
    var serverRSSStreamingBytes: Int?
    /// (RSS with every device subscribed − RSS before) / devices.
    var serverRSSPerStreamBytes: Int?
    var serverCPUSeconds: Double?
    /// The server's CPU from the first push to the end (writing the frames).
    var serverPushCPUSeconds: Double?
    /// `serverPushCPUSeconds` per frame the devices read, in µs.
    var serverCPUMicrosecondsPerStreamFrame: Double?
    /// The server's `sync_live_frames_total` and `sync_live_dropped_total` over the push phase.
    var serverLiveFrames: Int?
    var serverLiveDropped: Int?

    var text: String {
        let errorList = errors.sorted { $0.key < $1.key }.map { "\($0.key) × \($0.value)" }.joined(separator: ", ")
        var lines = [
            "fanout --stream: \(devices) devices over \(scopes) scope(s), \(pushes) push(es)",
            String(
                format: "  connect (batches of %d): %d streams subscribed (%d live messages) after %.2f s",
                connectBatch, streamsSubscribedBeforePush, streamsOpened, streamConnectSeconds),
            "  streamed the event: \(delivered) of \(expectedDeliveries) in \(streamFramesReceived) frame(s)"
                + (unexpected > 0 ? " (\(unexpected) unexpected)" : ""),
            String(
                format: "  push → frame: p50 %.1f ms, p99 %.1f ms, max %.1f ms", p50Milliseconds, p99Milliseconds,
                maxMilliseconds),
            "  errors: " + (errors.isEmpty ? "none" : errorList),
        ]
        if let before = serverRSSBeforeBytes, let streaming = serverRSSStreamingBytes, let per = serverRSSPerStreamBytes
        {
            lines.append(
                String(
                    format: "  server RSS: %.1f MiB before, %.1f MiB streaming, %.1f KiB per stream",
                    Double(before) / 1_048_576, Double(streaming) / 1_048_576, Double(per) / 1024))
        }
        if let cpu = serverCPUSeconds, let pushes = serverPushCPUSeconds {
            var line = String(format: "  server CPU: %.2f s in all, %.2f s from the push on", cpu, pushes)
            if let perFrame = serverCPUMicrosecondsPerStreamFrame {
                line += String(format: ", %.1f µs per stream frame", perFrame)
            }
            lines.append(line)
        }
        if let frames = serverLiveFrames {
            lines.append("  server live frames: \(frames), dropped subscribers: \(serverLiveDropped ?? 0)")
        }
        lines.append(String(format: "  this process's CPU from the push on: %.2f s", clientPushCPUSeconds))
        return lines.joined(separator: "\n")
    }
}
