import Foundation
import SyncProtocol

/// Everything the generic server can be configured with. Values come from `SYNC_*` environment variables
/// and command-line flags; flags win (see `ServeOptions`). A domain's own settings live with the domain.
public struct ServerConfiguration: Sendable {
    /// Address to bind (`SYNC_HOST`, default 127.0.0.1; use 0.0.0.0 in containers).
    public var host: String = "127.0.0.1"
    /// Port to bind (`SYNC_PORT`, default 8080; 0 picks a free one).
    public var port: Int = 8080
    /// PostgreSQL URL, `postgres://user[:password]@host[:port]/database` (`SYNC_DATABASE_URL`).
    public var databaseURL: String = "postgres://sync@127.0.0.1:5432/sync"
    /// HS256 signing key for bearer tokens (`SYNC_JWT_SECRET`); may be left empty when an identity
    /// provider is configured.
    public var jwtSecret: String = ""
    /// The identity provider whose RS256 and ES256 tokens are accepted too: its JWKS (`SYNC_JWKS_FILE` or
    /// `SYNC_JWKS_URL`, read again every `SYNC_JWKS_REFRESH_SECONDS`, default 300) and how its tokens are
    /// read (`SYNC_JWT_SUBJECT_CLAIM`, `SYNC_JWT_SCOPES_CLAIM`, `SYNC_JWT_AUDIENCE`, `SYNC_JWT_ISSUER`,
    /// `SYNC_JWT_LEEWAY_SECONDS`). None by default.
    public var identityProvider = IdentityProviderConfiguration()
    /// Body, event and page limits (`SYNC_MAX_BODY_BYTES`, `SYNC_MAX_DECOMPRESSED_BYTES`,
    /// `SYNC_MAX_EVENTS_PER_PUSH`, `SYNC_MAX_PAYLOAD_BYTES`, `SYNC_MAX_PULL_LIMIT`, `SYNC_MAX_WAIT_SECONDS`).
    public var limits: ProtocolLimits = .standard
    /// Event-type prefixes whose events are CRDT operations and so never get a stream-version check, in
    /// addition to the types the domain declares commutative (`SYNC_COMMUTATIVE_TYPES`, comma-separated,
    /// default none).
    public var commutativeTypePrefixes: [String] = []
    /// Most requests one token subject may have in flight; past it, 429 `rate.limited`
    /// (`SYNC_MAX_CONCURRENT_PER_TOKEN`, default 64).
    public var maxConcurrentRequestsPerToken: Int = 64
    /// Most PostgreSQL connections in the pool (`SYNC_DB_POOL_SIZE`, default 16).
    public var databasePoolSize: Int = 16
    /// Connections the shared pool and each Citus worker's keep open while idle (`SYNC_DB_POOL_MIN`, default 0,
    /// at most the pool size), and the seconds a connection may stay unused before it is pinged
    /// (`SYNC_DB_KEEPALIVE_SECONDS`, default 30; 0 turns the pings off). Pings keep connections that a NAT or
    /// load balancer would drop while idle. PostgresNIO sets a timer for the ping, and above the minimum one to
    /// close the connection, whenever a connection goes back to its pool idle, and cancels them at the next
    /// lease: about 60 µs of the server's CPU per lease. So each event loop's pool (`requestsOnTheirLoops`,
    /// which serves the pushes and pulls) keeps all of its connections open, whatever the minimum, and pings
    /// its unused ones itself, from one timer per interval (`LoopPool`).
    public var databasePoolMinimum: Int = 0
    public var databaseKeepAliveSeconds: Int = 30
    /// Whether each HTTP connection's requests are served on the connection's own event loop, with a PostgreSQL
    /// pool per loop for the leases made there, and the LISTEN connection's notifications read on its loop
    /// (`SYNC_REQUESTS_ON_THEIR_LOOPS`, default true; `LoopBoundHTTP1Channel`). A one-event push one at a time
    /// then wakes 4 threads instead of 13 and costs the server about a quarter less CPU; long-polls woken
    /// together are answered sooner (Benchmarks/HISTORY.md, "Requests on their connection's loop"). Each loop's
    /// pool holds `databasePoolSize` divided among the loops, opened at start and kept (`LoopPool`), besides the
    /// shared pool, which serves the work started off the loops (the live stream's reads, compaction, start-up).
    public var requestsOnTheirLoops = true
    /// Whether `POST /v1/push` is served below Hummingbird's router, from a task on the connection's event loop
    /// (`SYNC_PUSH_BELOW_ROUTER`, default true; `PushChannelHandler`): the same answers, headers, access line and
    /// metrics, for about an eighth less of the server's CPU per one-event push (Benchmarks/HISTORY.md, "A push
    /// below the router"). Requests it does not take go through the router as before.
    public var pushesBelowRouter = true
    /// Most database operations waiting for a connection before new ones get 503 `server.unavailable`
    /// (`SYNC_DB_QUEUE_LIMIT`, default 512).
    public var databaseQueueLimit: Int = 512
    /// Group commit (docs/ARCHITECTURE.md, "Group commit"): the most events of the pushes that share one
    /// transaction (`SYNC_PUSH_GROUP_EVENTS`, default 256; 0 turns group commit off, and a larger push always runs
    /// alone) and how many such transactions may run at once (`SYNC_PUSH_GROUP_LANES`, default 2; a scope's
    /// pushes always take the same lane).
    public var pushGroupEvents: Int = 256
    public var pushGroupLanes: Int = 2
    /// gzip level for responses, 1-9 (`SYNC_GZIP_LEVEL`, default 5).
    public var gzipLevel: Int32 = 5
    /// Events that pages read ahead for replicas catching up may hold between them, about 450 bytes each
    /// (`SYNC_READ_AHEAD_EVENTS`, default 20,000; 0 turns read-ahead off). See `ReadAhead`.
    public var readAheadEvents: Int = 20_000
    /// How long a page read ahead waits for the request it was read for before it is dropped (10 s).
    public var readAheadMaxAge: Duration = .seconds(10)
    /// Seconds between heartbeats on an idle live stream (`SYNC_LIVE_HEARTBEAT_SECONDS`, default 15): well
    /// under the read timeout of any proxy in front (nginx's `proxy_read_timeout` in deploy/nginx is 45 s).
    public var liveHeartbeatSeconds: Int = 15
    /// The bytes of recent frames each scope with live subscribers keeps (`SYNC_LIVE_BUFFER_BYTES`, default
    /// 1 MiB, and at most 256 frames): a subscriber that falls further behind (it does not read) is dropped
    /// back to catch-up. What a slow subscriber can cost the server is this, shared, plus its socket's buffers.
    public var liveBufferBytes: Int = 1 << 20
    /// How long start-up keeps retrying to reach the database before giving up
    /// (`SYNC_STARTUP_TIMEOUT_SECONDS`, default 30).
    public var startupTimeoutSeconds: Int = 30
    /// How long a replica may stay silent and still hold its scopes' stable points back
    /// (`SYNC_EVICTION_HORIZON_SECONDS`, default 7 days). Past it, compaction no longer waits for it; when it
    /// comes back below what was purged, it gets 410 `reset.required`.
    public var evictionHorizonSeconds: Int = 7 * 24 * 3600
    /// How long a scope's stable point, once read, serves answers before it is read again
    /// (`SYNC_STABLE_POINT_REFRESH_MS`, default 1000): a bootstrap's pages then cost one more query per
    /// second, not one per page.
    public var stablePointRefreshMilliseconds: Int = 1000
    /// When compaction folds history by itself: `SYNC_COMPACTION_INTERVAL_SECONDS` (default 60; 0 turns
    /// the service off), `SYNC_COMPACTION_MIN_EVENTS` (default 1000), `SYNC_COMPACTION_RATIO` (foldable
    /// events per folded stream, default 1.0), `SYNC_COMPACTION_BATCH_EVENTS` (events per transaction,
    /// default 2000), `SYNC_COMPACTION_PAUSE_MS` (a pause between two transactions, default 0). Only a
    /// domain with a `StreamFolder` is compacted.
    public var compaction = CompactionPolicy()
    /// How many connections may wait to be accepted (`SYNC_LISTEN_BACKLOG`, default 4096; the kernel caps it
    /// at `net.core.somaxconn`). A burst of devices connecting at once past it waits for TCP's retransmit,
    /// a second or more.
    public var listenBacklog: Int = 4096
    /// Most client connections open at once (`SYNC_MAX_CONNECTIONS`; by default the process's open-file
    /// limit less 256 for the database pool, the listener and files). Past it, new connections wait in the
    /// listen backlog instead of failing for want of a file descriptor. Every waiting long-poll holds one.
    public var maxConnections: Int? = nil
    /// `trace`, `debug`, `info`, `notice`, `warning`, `error` (`SYNC_LOG_LEVEL`, default info).
    public var logLevel: String = "info"
    /// `text` (swift-log's lines, the default) or `json` (one JSON object per line, `JSONLogHandler`)
    /// (`SYNC_LOG_FORMAT`). `SyncServerApp.serve` applies it to the whole process.
    public var logFormat: LogFormat = .text
    /// Whether the database is a Citus coordinator whose tables the server distributes by scope after its
    /// migrations, idempotently (`SYNC_CITUS`, `true` or `false`, default false; see `CitusDistribution` and
    /// docs/SCALING.md). `sync-server distribute` does the same once.
    public var citus = false
    /// On Citus, how often the server reads the cluster's nodes (`pg_dist_node`) to reach each directly, and
    /// notices one that moved or left (`SYNC_CITUS_NODE_REFRESH_SECONDS`, 1 to 3,600, default 30; see
    /// `CitusWorkers`).
    public var citusNodeRefreshSeconds = 30
    /// Blobs (docs/PROTOCOL.md, "Blobs"): where their bytes go (`SYNC_BLOB_STORE`, `postgres` or
    /// `directory:/path`), the chunk size (`SYNC_BLOB_CHUNK_BYTES`, 4 MiB), the bytes a scope may hold
    /// (`SYNC_BLOB_QUOTA_BYTES`, 10 GiB), the largest blob (`SYNC_BLOB_MAX_BYTES`, 4 GiB) and how long an upload
    /// session lives (`SYNC_UPLOAD_EXPIRY_SECONDS`, a day). See `BlobConfiguration`.
    public var blobs = BlobConfiguration()
    /// The admin credential (`SYNC_ADMIN_TOKEN`, 16 bytes or more): with it set, the server serves the admin API
    /// (`/v1/admin/*`) and the dashboard (`/dashboard`) to requests that carry it, as `Authorization: Bearer
    /// <token>` or as the password of HTTP Basic authentication; a device's token gets 403. Unset (the default),
    /// both answer 404. It is not a JWT and grants no scope.
    public var adminToken: String? = nil

    public init() {}

    /// Defaults overridden by the `SYNC_*` variables present in `environment`.
    /// - Throws: `ConfigurationError` naming the variable whose value is not valid.
    public init(environment: [String: String]) throws {
        self.init()
        func integer(_ name: String, _ range: ClosedRange<Int> = 0...Int.max) throws -> Int? {
            guard let text = environment[name], !text.isEmpty else { return nil }
            guard let value = Int(text), range.contains(value) else {
                throw ConfigurationError(message: "\(name) must be an integer in \(range)")
            }
            return value
        }
        if let value = environment["SYNC_HOST"], !value.isEmpty { host = value }
        if let value = try integer("SYNC_PORT", 0...65535) { port = value }
        if let value = environment["SYNC_DATABASE_URL"], !value.isEmpty { databaseURL = value }
        if let value = environment["SYNC_JWT_SECRET"], !value.isEmpty { jwtSecret = value }
        if let value = environment["SYNC_JWKS_FILE"], !value.isEmpty { identityProvider.jwksFile = value }
        if let value = environment["SYNC_JWKS_URL"], !value.isEmpty { identityProvider.jwksURL = value }
        if let value = try integer("SYNC_JWKS_REFRESH_SECONDS", 0...86_400) { identityProvider.refreshSeconds = value }
        if let value = environment["SYNC_JWT_SUBJECT_CLAIM"], !value.isEmpty {
            identityProvider.claims.subjectClaim = value
        }
        if let value = environment["SYNC_JWT_SCOPES_CLAIM"], !value.isEmpty {
            identityProvider.claims.scopesClaim = value
        }
        if let value = environment["SYNC_JWT_AUDIENCE"], !value.isEmpty { identityProvider.claims.audience = value }
        if let value = environment["SYNC_JWT_ISSUER"], !value.isEmpty { identityProvider.claims.issuer = value }
        if let value = try integer("SYNC_JWT_LEEWAY_SECONDS", 0...ClaimRules.maxLeewaySeconds) {
            identityProvider.claims.leewaySeconds = value
        }
        if let value = try integer("SYNC_MAX_BODY_BYTES", 1...Int.max) { limits.maxCompressedBodyBytes = value }
        if let value = try integer("SYNC_MAX_DECOMPRESSED_BYTES", 1...Int.max) {
            limits.maxDecompressedBodyBytes = value
        }
        if let value = try integer("SYNC_MAX_EVENTS_PER_PUSH", 1...1_000_000) { limits.maxEventsPerPush = value }
        if let value = try integer("SYNC_MAX_PAYLOAD_BYTES", 1...Int.max) { limits.maxPayloadBytes = value }
        if let value = try integer("SYNC_MAX_PULL_LIMIT", 1...1_000_000) { limits.maxPullLimit = value }
        if let value = try integer("SYNC_MAX_WAIT_SECONDS", 0...3600) { limits.maxWaitSeconds = value }
        if let value = environment["SYNC_COMMUTATIVE_TYPES"] {
            commutativeTypePrefixes = value.split(separator: ",").map { String($0) }.filter { !$0.isEmpty }
        }
        if let value = try integer("SYNC_MAX_CONCURRENT_PER_TOKEN", 1...Int.max) {
            maxConcurrentRequestsPerToken = value
        }
        if let value = try integer("SYNC_DB_POOL_SIZE", 1...1000) { databasePoolSize = value }
        if let value = try integer("SYNC_DB_POOL_MIN", 0...1000) { databasePoolMinimum = value }
        if let value = try integer("SYNC_DB_KEEPALIVE_SECONDS", 0...86_400) { databaseKeepAliveSeconds = value }
        if let value = try integer("SYNC_DB_QUEUE_LIMIT", 1...Int.max) { databaseQueueLimit = value }
        if let value = try integer("SYNC_PUSH_GROUP_EVENTS", 0...1_000_000) { pushGroupEvents = value }
        if let value = try integer("SYNC_PUSH_GROUP_LANES", 1...1000) { pushGroupLanes = value }
        if let value = try integer("SYNC_GZIP_LEVEL", 1...9) { gzipLevel = Int32(value) }
        if let value = try integer("SYNC_READ_AHEAD_EVENTS", 0...100_000_000) { readAheadEvents = value }
        if let value = try integer("SYNC_LIVE_HEARTBEAT_SECONDS", 1...3600) { liveHeartbeatSeconds = value }
        if let value = try integer("SYNC_LIVE_BUFFER_BYTES", 1024...(1 << 30)) { liveBufferBytes = value }
        if let value = try integer("SYNC_STARTUP_TIMEOUT_SECONDS", 0...3600) { startupTimeoutSeconds = value }
        if let value = environment["SYNC_LOG_LEVEL"], !value.isEmpty { logLevel = value }
        if let text = environment["SYNC_LOG_FORMAT"], !text.isEmpty {
            guard let value = LogFormat(rawValue: text.lowercased()) else {
                throw ConfigurationError(message: "SYNC_LOG_FORMAT must be text or json")
            }
            logFormat = value
        }
        func boolean(_ name: String) throws -> Bool? {
            guard let text = environment[name], !text.isEmpty else { return nil }
            switch text.lowercased() {
            case "1", "true", "yes", "on": return true
            case "0", "false", "no", "off": return false
            default: throw ConfigurationError(message: "\(name) must be true or false")
            }
        }
        if let value = try boolean("SYNC_REQUESTS_ON_THEIR_LOOPS") { requestsOnTheirLoops = value }
        if let value = try boolean("SYNC_PUSH_BELOW_ROUTER") { pushesBelowRouter = value }
        if let value = try boolean("SYNC_CITUS") { citus = value }
        if let value = try integer("SYNC_CITUS_NODE_REFRESH_SECONDS", 1...3600) { citusNodeRefreshSeconds = value }
        if let value = try integer("SYNC_LISTEN_BACKLOG", 1...65535) { listenBacklog = value }
        if let value = try integer("SYNC_MAX_CONNECTIONS", 1...Int.max) { maxConnections = value }
        if let value = try integer("SYNC_EVICTION_HORIZON_SECONDS", 1...Int.max) { evictionHorizonSeconds = value }
        if let value = try integer("SYNC_STABLE_POINT_REFRESH_MS", 0...3_600_000) {
            stablePointRefreshMilliseconds = value
        }
        if let value = try integer("SYNC_COMPACTION_INTERVAL_SECONDS", 0...86_400 * 365) {
            compaction.intervalSeconds = value
        }
        if let value = try integer("SYNC_COMPACTION_MIN_EVENTS", 1...Int.max) { compaction.minEvents = Int64(value) }
        if let text = environment["SYNC_COMPACTION_RATIO"], !text.isEmpty {
            guard let value = Double(text), value >= 0, value.isFinite else {
                throw ConfigurationError(message: "SYNC_COMPACTION_RATIO must be a non-negative number")
            }
            compaction.ratio = value
        }
        if let value = try integer("SYNC_COMPACTION_BATCH_EVENTS", 1...1_000_000) { compaction.batchEvents = value }
        if let value = try integer("SYNC_COMPACTION_PAUSE_MS", 0...3_600_000) { compaction.pauseMilliseconds = value }
        if let text = environment["SYNC_BLOB_STORE"], !text.isEmpty { blobs.store = try .init(parsing: text) }
        if let value = try integer("SYNC_BLOB_CHUNK_BYTES", BlobConfiguration.chunkBytesRange) {
            blobs.chunkBytes = value
        }
        if let value = try integer("SYNC_BLOB_QUOTA_BYTES") { blobs.quotaBytes = Int64(value) }
        if let value = try integer("SYNC_BLOB_MAX_BYTES") { blobs.maxBytes = Int64(value) }
        if let value = try integer("SYNC_UPLOAD_EXPIRY_SECONDS", 60...(365 * 86_400)) {
            blobs.uploadExpirySeconds = value
        }
        if let value = try integer("SYNC_BLOB_COLLECT_AFTER_SECONDS", 0...(365 * 86_400)) {
            blobs.collectAfterSeconds = value
        }
        if let value = environment["SYNC_ADMIN_TOKEN"], !value.isEmpty { adminToken = value }
    }

    /// The pools' options (`SYNC_DB_POOL_MIN`, `SYNC_DB_KEEPALIVE_SECONDS`).
    var poolOptions: Database.PoolOptions {
        Database.PoolOptions(
            minimum: databasePoolMinimum,
            keepAlive: databaseKeepAliveSeconds > 0 ? .seconds(databaseKeepAliveSeconds) : nil)
    }

    /// Checks the values that have no safe default.
    /// - Throws: `ConfigurationError` for neither a JWT secret nor an identity provider, a JWT secret under
    ///   32 bytes, a bad identity provider setting, a bad database URL, inconsistent limits, or a pool minimum
    ///   above the pool size.
    public func validate() throws {
        guard !jwtSecret.isEmpty || identityProvider.isConfigured else {
            throw ConfigurationError(
                message:
                    "bearer tokens need a JWT secret (SYNC_JWT_SECRET or --jwt-secret, 32 bytes or more), an identity provider's JWKS (SYNC_JWKS_FILE or SYNC_JWKS_URL), or both"
            )
        }
        guard jwtSecret.isEmpty || jwtSecret.utf8.count >= 32 else {
            throw ConfigurationError(
                message:
                    "the JWT secret (SYNC_JWT_SECRET or --jwt-secret) must be 32 bytes or more (HS256 keys are at least as long as the hash)"
            )
        }
        try identityProvider.validate()
        _ = try DatabaseURL(databaseURL)
        guard limits.defaultPullLimit <= limits.maxPullLimit else {
            throw ConfigurationError(message: "the default pull limit exceeds the maximum")
        }
        if let adminToken, adminToken.utf8.count < 16 {
            throw ConfigurationError(message: "the admin token (SYNC_ADMIN_TOKEN) must be 16 bytes or more")
        }
        guard databasePoolMinimum <= databasePoolSize else {
            throw ConfigurationError(message: "SYNC_DB_POOL_MIN must not exceed SYNC_DB_POOL_SIZE")
        }
        guard BlobConfiguration.chunkBytesRange.contains(blobs.chunkBytes) else {
            throw ConfigurationError(message: "the blob chunk size must be 1 KiB to 64 MiB")
        }
    }
}

/// A configuration value that cannot be used; `message` names the setting but never echoes secrets.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { "configuration: \(message)" }

    public init(message: String) {
        self.message = message
    }
}
