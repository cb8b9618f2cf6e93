import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A TCP proxy that injects network faults between its clients and one upstream: latency with jitter, a
/// bandwidth cap, connections reset mid-response, a black hole (see ``FaultSettings``).
///
/// Every connection is two channels on one event loop, glued by ``RelayHandler``s: bytes read from one side
/// are queued, each chunk with the time it may leave, and written to the other side in order. Reads are
/// asked for only while the queue is below a bound and the other side is writable, so a slow side slows the
/// fast one through TCP instead of filling memory. Faults can be changed at any time (``update(_:)``, or
/// `POST /fault` on the control endpoint) and apply at once to open connections. Random draws come from
/// `seed` and the connection's index, so that a run can be reproduced.
public final class FaultProxy: Sendable {
    struct State {
        var settings: FaultSettings
        var stats = FaultStats()
        var nextConnection: UInt64 = 0
    }

    public let upstreamHost: String
    public let upstreamPort: Int
    public let seed: UInt64
    let group: any EventLoopGroup
    let state: NIOLockedValueBox<State>
    let listeners = NIOLockedValueBox<[any Channel]>([])

    /// A proxy to `upstreamHost:upstreamPort`, not yet listening (``listen(host:port:)``).
    public init(
        upstreamHost: String, upstreamPort: Int, settings: FaultSettings = .none, seed: UInt64 = 1,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.upstreamHost = upstreamHost
        self.upstreamPort = upstreamPort
        self.seed = seed
        self.group = group
        self.state = NIOLockedValueBox(State(settings: settings))
    }

    /// The faults in force.
    public var settings: FaultSettings { state.withLockedValue { $0.settings } }

    /// Replaces the faults in force; open connections follow from their next chunk on.
    public func update(_ settings: FaultSettings) {
        state.withLockedValue { $0.settings = settings }
    }

    /// What the proxy did so far, with the faults in force.
    public var stats: FaultStats {
        state.withLockedValue { state in
            var stats = state.stats
            stats.fault = state.settings.description
            return stats
        }
    }

    /// Starts accepting connections on `host:port` (port 0: any free one); returns the port bound.
    public func listen(host: String = "127.0.0.1", port: Int) async throws -> Int {
        let proxy = self
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 4096)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let connection = ProxyConnection(proxy: proxy, eventLoop: channel.eventLoop)
                    try channel.pipeline.syncOperations.addHandler(RelayHandler(connection: connection, side: .client))
                }
            }
            .bind(host: host, port: port).get()
        listeners.withLockedValue { $0.append(channel) }
        return channel.localAddress?.port ?? port
    }

    /// Starts the control endpoint, plain HTTP on `host:port` (port 0: any free one); returns the port bound.
    /// `GET /stats`: ``FaultStats`` as JSON. `GET /fault`: the faults in force, as a spec. `POST /fault` with
    /// a spec as the body: replaces them (`none` lifts every fault), and answers the new spec.
    public func listenForControl(host: String = "127.0.0.1", port: Int) async throws -> Int {
        let proxy = self
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(ControlHandler(proxy: proxy))
                }
            }
            .bind(host: host, port: port).get()
        listeners.withLockedValue { $0.append(channel) }
        return channel.localAddress?.port ?? port
    }

    /// Stops accepting connections (open ones end when their peers close them).
    public func shutdown() async {
        let channels = listeners.withLockedValue { channels in
            defer { channels.removeAll() }
            return channels
        }
        for channel in channels { try? await channel.close() }
    }

    /// The control endpoint's answer to a request: its status, content type and body.
    public func control(method: String, path: String, body: String) -> (status: Int, contentType: String, body: String)
    {
        let route = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        switch (method, route) {
        case ("GET", "/stats"):
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let data = (try? encoder.encode(stats)) ?? Data("{}".utf8)
            return (200, "application/json", String(decoding: data, as: UTF8.self) + "\n")
        case ("GET", "/fault"):
            return (200, "text/plain", settings.description + "\n")
        case ("POST", "/fault"), ("PUT", "/fault"):
            do {
                let settings = try FaultSettings(spec: body)
                update(settings)
                return (200, "text/plain", settings.description + "\n")
            } catch {
                return (400, "text/plain", error.description + "\n")
            }
        default:
            return (404, "text/plain", "not found: GET /stats, GET /fault, POST /fault\n")
        }
    }

    /// A new connection: its index (for its random stream) and the faults in force.
    func admit() -> (index: UInt64, settings: FaultSettings) {
        state.withLockedValue { state in
            defer { state.nextConnection += 1 }
            state.stats.connectionsAccepted += 1
            state.stats.connectionsOpen += 1
            return (state.nextConnection, state.settings)
        }
    }

    func record(_ change: (inout FaultStats) -> Void) {
        state.withLockedValue { change(&$0.stats) }
    }
}
