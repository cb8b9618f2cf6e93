import ArgumentParser
import FaultProxy
import Foundation
import NIOPosix

/// `sync-fault-proxy`: a TCP proxy on loopback that injects network faults between clients and one upstream,
/// changeable while it runs through its control endpoint.
@main
struct SyncFaultProxy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-fault-proxy",
        abstract: "A TCP proxy that injects network faults: latency, bandwidth caps, resets mid-response, black holes.",
        discussion: """
            Faults are set at start (--fault, or the options of each) and changed while it runs through the \
            control endpoint: `curl -d 'latency=300ms jitter=100ms' http://127.0.0.1:CONTROL/fault`, \
            `curl -d none …/fault` to lift them, `curl …/stats` for what was injected (JSON). On SIGTERM or \
            SIGINT it prints the same statistics on stderr and exits.
            """)

    @Option(help: "The address to listen on.") var host = "127.0.0.1"
    @Option(help: "The port to listen on (0: any free one; the ports bound are printed on stdout).") var port = 0
    @Option(help: "Where connections go, host:port (nginx, a sync-server).") var upstream: String
    @Option(help: "The control endpoint's port (GET /stats, GET /fault, POST /fault); 0: any free one.")
    var controlPort = 0
    @Option(help: "Faults at start, as a spec: latency=300ms jitter=100ms bandwidth=64KiB reset=0.2 blackhole=on.")
    var fault = "none"
    @Option(help: "Delay added to every chunk in each direction (300ms, 1s).") var latency: String?
    @Option(help: "The delay varies uniformly by up to this much either way (100ms).") var jitter: String?
    @Option(help: "Bytes per second per connection and direction (65536, 64KiB).") var bandwidth: String?
    @Option(help: "Share of connections reset (RST) after part of the upstream's response (0.2).") var reset: Double?
    @Option(help: "A reset connection lets through 1 to this many bytes of the response first.") var resetAfter: Int?
    @Flag(help: "Start with a black hole: accept and read, forward nothing.") var blackhole = false
    @Option(help: "Seed of every random draw (jitter, which connections are reset and where).") var seed: UInt64 = 1
    @Option(help: "Event-loop threads (1 keeps the order of connections, and so the draws, reproducible).")
    var threads = 1

    func validate() throws {
        guard upstreamAddress != nil else { throw ValidationError("--upstream must be host:port") }
        _ = try settings()
    }

    var upstreamAddress: (host: String, port: Int)? {
        guard let colon = upstream.lastIndex(of: ":"), let port = Int(upstream[upstream.index(after: colon)...]) else {
            return nil
        }
        return (String(upstream[..<colon]), port)
    }

    func settings() throws -> FaultSettings {
        var spec = fault
        if let latency { spec += " latency=\(latency)" }
        if let jitter { spec += " jitter=\(jitter)" }
        if let bandwidth { spec += " bandwidth=\(bandwidth)" }
        if let reset { spec += " reset=\(reset)" }
        if let resetAfter { spec += " reset-after=\(resetAfter)" }
        if blackhole { spec += " blackhole=on" }
        do {
            return try FaultSettings(spec: spec)
        } catch {
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        let settings = try settings()
        let (upstreamHost, upstreamPort) = upstreamAddress!
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads))
        let proxy = FaultProxy(
            upstreamHost: upstreamHost, upstreamPort: upstreamPort, settings: settings, seed: seed, group: group)
        let bound = try await proxy.listen(host: host, port: port)
        let control = try await proxy.listenForControl(host: host, port: controlPort)
        let banner =
            "sync-fault-proxy: \(host):\(bound) -> \(upstream), control \(host):\(control), seed \(seed), "
            + "faults: \(settings)\n"
        FileHandle.standardOutput.write(Data(banner.utf8))
        await TerminationSignal.wait()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let stats = String(decoding: try encoder.encode(proxy.stats), as: UTF8.self)
        FileHandle.standardError.write(Data("sync-fault-proxy: stopping; \(stats)\n".utf8))
        await proxy.shutdown()
        try await group.shutdownGracefully()
    }
}
