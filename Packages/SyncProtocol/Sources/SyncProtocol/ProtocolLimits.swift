/// The size and count limits of protocol v1. Servers may configure other values; these are the defaults.
///
/// A request past a limit gets 413 `request.tooLarge`, and the server stops reading it at the limit.
public struct ProtocolLimits: Hashable, Sendable {
    /// Largest body accepted as sent on the wire when it is gzip-encoded (8 MiB).
    public var maxCompressedBodyBytes: Int
    /// Largest body after decompression; also the largest `identity` body (64 MiB).
    public var maxDecompressedBodyBytes: Int
    /// Most events in one push (5,000).
    public var maxEventsPerPush: Int
    /// Largest JSON encoding of one event's payload (256 KiB).
    public var maxPayloadBytes: Int
    /// Events per pull page when the request gives no `limit` (500).
    public var defaultPullLimit: Int
    /// Most events per pull page (5,000).
    public var maxPullLimit: Int
    /// Longest long-poll, in seconds (30).
    public var maxWaitSeconds: Int
    /// Responses at least this large are gzip-compressed for clients that accept gzip (1 KiB).
    public var compressionThresholdBytes: Int

    public init(
        maxCompressedBodyBytes: Int = 8 << 20, maxDecompressedBodyBytes: Int = 64 << 20,
        maxEventsPerPush: Int = 5_000, maxPayloadBytes: Int = 256 << 10, defaultPullLimit: Int = 500,
        maxPullLimit: Int = 5_000, maxWaitSeconds: Int = 30, compressionThresholdBytes: Int = 1024
    ) {
        self.maxCompressedBodyBytes = maxCompressedBodyBytes
        self.maxDecompressedBodyBytes = maxDecompressedBodyBytes
        self.maxEventsPerPush = maxEventsPerPush
        self.maxPayloadBytes = maxPayloadBytes
        self.defaultPullLimit = defaultPullLimit
        self.maxPullLimit = maxPullLimit
        self.maxWaitSeconds = maxWaitSeconds
        self.compressionThresholdBytes = compressionThresholdBytes
    }

    /// The limits of PROTOCOL.md.
    public static let standard = ProtocolLimits()
}
