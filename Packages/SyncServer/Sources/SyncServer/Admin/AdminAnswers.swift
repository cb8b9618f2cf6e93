import Foundation

/// `GET /v1/admin/status` (docs/PROTOCOL.md, "Admin API"). Durations in milliseconds; a field without a value
/// (no request of the kind yet, no resident size on the platform) is left out.
struct AdminStatus: Codable, Sendable {
    struct Server: Codable, Sendable {
        var version: String
        var domain: String
        var startedAt: Date
        var uptimeSeconds: Double
        var residentBytes: Int?
    }

    struct Route: Codable, Sendable {
        var method: String
        var route: String
        var count: Int
        var errors: Int
        var p50Ms: Double?
        var p99Ms: Double?
    }

    struct Requests: Codable, Sendable {
        var total: Int
        /// Over the last ten complete seconds.
        var perSecond: Double
        var byRoute: [Route]
    }

    struct Percentiles: Codable, Sendable {
        var count: Int
        var p50Ms: Double?
        var p90Ms: Double?
        var p99Ms: Double?

        init(_ histogram: LatencyHistogram) {
            count = histogram.count
            p50Ms = histogram.percentileMilliseconds(0.5)
            p90Ms = histogram.percentileMilliseconds(0.9)
            p99Ms = histogram.percentileMilliseconds(0.99)
        }
    }

    /// Over the last `AdminStats.latencyWindowSeconds`: pushes, and pulls that did not ask to wait.
    struct Latency: Codable, Sendable {
        var push: Percentiles
        var pull: Percentiles
    }

    struct ErrorCount: Codable, Sendable {
        var code: String
        var status: Int
        var count: Int
    }

    struct Events: Codable, Sendable {
        var accepted: Int
        var duplicate: Int
        var rejected: Int
        var pulled: Int
    }

    struct Pool: Codable, Sendable {
        var poolSize: Int
        var inUse: Int
        var admitted: Int
        var queueLimit: Int
    }

    struct Connections: Codable, Sendable {
        var liveStreams: Int
        var longPolls: Int
        var parkedLongPolls: Int
    }

    /// One second of the series (`t`: Unix seconds); seconds without a request are left out.
    struct Second: Codable, Sendable {
        var t: Int64
        var requests: Int
        var errors: Int
        var eventsAccepted: Int
        var eventsPulled: Int
        var pushP99Ms: Double?
        var pullP99Ms: Double?
    }

    var server: Server
    var requests: Requests
    var latency: Latency
    var errors: [ErrorCount]
    var events: Events
    var database: Pool
    var connections: Connections
    var series: [Second]
}

/// `GET /v1/admin/scopes`.
struct AdminScopes: Codable, Sendable {
    struct Scope: Codable, Sendable {
        var scope: String
        /// The events the scope accepted (its last seq).
        var head: Int64
        /// The rows it stores (events not folded yet, and folded streams) and their bytes as stored.
        var storedEvents: Int64
        var bytes: Int64
        var blobBytes: Int64
        /// The lowest position its active replicas acknowledged, and how far the head is ahead of it.
        var stable: Int64?
        var stableLag: Int64?
        var retainedFrom: Int64
        var compactedThrough: Int64
        var compactedAt: Date?
        var compactionRemoved: Int64
        /// Its active replicas (seen within the eviction horizon).
        var replicas: Int
        var eventsPerSecond: Double
    }

    var total: Int
    var offset: Int
    var limit: Int
    var sort: String
    var order: String
    var scopes: [Scope]
}

/// `GET /v1/admin/scopes/{scope}/replicas`.
struct AdminReplicas: Codable, Sendable {
    struct Replica: Codable, Sendable {
        var replica: String
        var acknowledged: Int64
        var behind: Int64
        var seenAt: Date
        var secondsSinceSeen: Double
        /// Seen within the eviction horizon: its position holds compaction back.
        var active: Bool
        /// Its position is the scope's stable point, below the head.
        var holdsStable: Bool
    }

    var scope: String
    var head: Int64
    var stable: Int64?
    var total: Int
    var offset: Int
    var limit: Int
    var replicas: [Replica]
}
