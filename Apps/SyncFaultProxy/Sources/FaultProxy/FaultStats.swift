/// What a ``FaultProxy`` did since it started: its connections, the faults it injected and the bytes it
/// forwarded. Encoded as the control endpoint's `GET /stats` and the summary printed on SIGTERM.
public struct FaultStats: Sendable, Codable, Equatable {
    /// Connections accepted from clients.
    public var connectionsAccepted = 0
    /// Connections open now (client side).
    public var connectionsOpen = 0
    /// Connections whose upstream could not be reached (closed at once).
    public var upstreamConnectFailures = 0
    /// Connections reset (RST on both sides) after part of the upstream's response went through.
    public var connectionsReset = 0
    /// Connections that a black hole held: accepted during one, or with bytes it stopped.
    public var connectionsBlackholed = 0
    /// Bytes forwarded late on purpose (latency or jitter on).
    public var bytesDelayed = 0
    /// Bytes forwarded under a bandwidth cap.
    public var bytesThrottled = 0
    /// Bytes forwarded from clients to the upstream.
    public var bytesToUpstream = 0
    /// Bytes forwarded from the upstream to clients.
    public var bytesToClients = 0
    /// The faults in force (a spec, see ``FaultSettings``).
    public var fault = "none"

    public init() {}
}
