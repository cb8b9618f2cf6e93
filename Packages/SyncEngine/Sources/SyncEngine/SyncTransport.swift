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

    /// Opens the live stream (`GET /v1/live`, the query of `request` as for `GET /v1/pull`: its `cursor`,
    /// `scopes` and `replica`). Returns once the server has answered 200 (a subscription is in place); the
    /// messages then come as the server writes them, `subscribed` first, and the sequence ends when the
    /// stream does: normally when the server closes it, by throwing when the connection breaks (or says
    /// nothing for three heartbeats: the transport watches). Ending the iteration, or cancelling the task that
    /// iterates, closes the connection.
    ///
    /// The engine holds the stream while `run()` runs in the foreground (`SyncEngine.Configuration.live`).
    /// Transports without it keep the default, which throws `SyncFailure.transportUnsupported`, as a server
    /// without the route must be reported (404 or 405): the engine then long-polls.
    /// - Throws: the `SyncFailure` of an answer other than 200, as for a pull.
    func live(_ request: PullRequest) async throws(SyncFailure) -> LiveMessages

    /// One `GET /v1/checksum`: the server's checksum of a scope up to a position, or of a range
    /// (`SyncEngine.verify`). Transports without it keep the default, which throws
    /// `SyncFailure.transportUnsupported`; verification then reports the scope unavailable.
    /// - Throws: the `SyncFailure` of an answer other than 200 (`checksum.unavailable` is permanent).
    func checksum(_ request: ChecksumRequest) async throws(SyncFailure) -> ChecksumResponse

    /// Replaces the bearer token of the requests that follow (`SyncEngine.Configuration.tokenProvider`).
    /// Transports without tokens keep the default, which does nothing.
    func setToken(_ token: String?)
}

/// The messages of one live stream (`SyncTransport.live`). It throws when the connection breaks.
public typealias LiveMessages = AsyncThrowingStream<LiveMessage, any Error>

extension SyncTransport {
    public func pull(_ request: PullRequest) async throws(SyncFailure) -> PullResponse {
        throw .permanent(code: SyncFailure.transportUnsupported, message: "this transport does not pull")
    }

    public func live(_ request: PullRequest) async throws(SyncFailure) -> LiveMessages {
        throw .permanent(code: SyncFailure.transportUnsupported, message: "this transport has no live stream")
    }

    public func checksum(_ request: ChecksumRequest) async throws(SyncFailure) -> ChecksumResponse {
        throw .permanent(code: SyncFailure.transportUnsupported, message: "this transport has no checksums")
    }

    public func setToken(_ token: String?) {}
}

/// The answer to one round trip and what it cost on the wire.
public struct TransportExchange: Sendable {
    public var response: SyncResponse
    public var traffic: Traffic
    /// The id the request was sent under (`X-Request-Id`), which the server's log names it by; the engine
    /// writes it in the journal's `push.ok` and `pull.ok` lines. Nil from a transport without one.
    public var requestID: String?

    public init(response: SyncResponse, traffic: Traffic, requestID: String? = nil) {
        self.response = response
        self.traffic = traffic
        self.requestID = requestID
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
