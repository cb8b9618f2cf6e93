import SyncProtocol

/// One `POST /v1/sync` round trip, however it travels. Implementations classify every failure as a
/// `SyncFailure` and report the bytes they moved.
public protocol SyncTransport: Sendable {
    func sync(_ request: SyncRequest) async throws(SyncFailure) -> TransportExchange

    /// One `GET /v1/pull`. The engine uses it only to long-poll while idle (`wait` above 0,
    /// `SyncEngine.Configuration.longPoll`): it learns that the server has something new and then syncs as
    /// usual. Transports that cannot pull keep the default, which says so, and the engine then syncs on its
    /// other triggers only.
    func pull(_ request: PullRequest) async throws(SyncFailure) -> PullResponse
}

extension SyncTransport {
    public func pull(_ request: PullRequest) async throws(SyncFailure) -> PullResponse {
        throw .permanent(code: SyncFailure.transportUnsupported, message: "this transport does not pull")
    }
}

/// The answer to one round trip and what it cost on the wire.
public struct TransportExchange: Sendable {
    public var response: SyncResponse
    public var traffic: Traffic

    public init(response: SyncResponse, traffic: Traffic) {
        self.response = response
        self.traffic = traffic
    }
}

/// Bytes of one exchange, before (`raw`) and after (`wire`) compression.
public struct Traffic: Sendable, Hashable, Codable {
    public var sentRaw = 0
    public var sentWire = 0
    public var receivedRaw = 0
    public var receivedWire = 0

    public init(sentRaw: Int = 0, sentWire: Int = 0, receivedRaw: Int = 0, receivedWire: Int = 0) {
        self.sentRaw = sentRaw
        self.sentWire = sentWire
        self.receivedRaw = receivedRaw
        self.receivedWire = receivedWire
    }

    /// Adds the bytes of another exchange (for totals over many).
    public static func += (lhs: inout Traffic, rhs: Traffic) {
        lhs.sentRaw += rhs.sentRaw
        lhs.sentWire += rhs.sentWire
        lhs.receivedRaw += rhs.receivedRaw
        lhs.receivedWire += rhs.receivedWire
    }
}
