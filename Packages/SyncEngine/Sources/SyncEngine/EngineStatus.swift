import Foundation

/// What the engine is doing, for a status bar or `sync-agent status`.
public struct EngineStatus: Sendable, Hashable, Codable {
    /// Local events not yet acknowledged by the server.
    public var pending = 0
    /// Events in the push now on the wire.
    public var inFlight = 0
    /// Events the server refused (kept locally, rolled back).
    public var rejected = 0
    public var lastSuccess: Date?
    public var lastError: String?
    /// True while waiting for a new token after an authentication failure.
    public var pausedForAuthentication = false
    /// True while `run()` holds the live stream (subscribed): other replicas' events arrive as they commit.
    public var liveConnected = false
    /// Whether `run()` long-polls instead because the transport or the server has no live stream (or the
    /// stream is configured off).
    public var longPolling = false
    /// Completed cycles since the engine started.
    public var cycles = 0
    /// Bytes moved since the engine started.
    public var traffic = Traffic()
    /// Events the server still had to send after the last page, as it said (`remaining`): the progress of a
    /// long pull (0 once caught up; nil before the first answer, or from a server that does not say).
    public var remainingToPull: Int?
    /// Events pulled since the engine started (logged or folded on arrival): with `remainingToPull`, how far
    /// a long pull is (done of done + remaining).
    public var pulledEvents = 0
    /// Each pulled scope's stable point as the server last said (`SyncResponse.stable`): history at or
    /// below it may be pruned here.
    public var stablePoints: [String: Int64] = [:]
    /// When the device last verified its scopes against the server's checksums (`SyncEngine.verify`).
    public var lastVerified: Date?
    /// Ranges repaired (and resets made) by verification since the engine started.
    public var repairs = 0
    /// Records holding an open conflict (values written concurrently on replicas that did not see each
    /// other, kept for review: `EventStore.streamsInConflict`) as of the last applied answer; each one
    /// opened or resolved is journaled (`conflict.open`, `conflict.resolved`).
    public var openConflicts = 0
    /// The blob queue (`BlobSync`): uploads waiting and their bytes, what the server has acknowledged, the
    /// last upload failure, and what was downloaded. Zero when the engine has no blob queue.
    public var blobs = BlobProgress()

    public init() {}
}
