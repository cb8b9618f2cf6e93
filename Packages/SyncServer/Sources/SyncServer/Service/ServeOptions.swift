import ArgumentParser
import Foundation
import Logging
import Metrics
import Prometheus

/// The command-line options of a server built on this library, each overriding its `SYNC_*` variable.
///
/// An executable adds them to its `serve` command with `@OptionGroup`, next to its domain's own options,
/// and calls `SyncServerApp.serve(configuration:domain:)`:
///
/// ```swift
/// struct Serve: AsyncParsableCommand {
///     @OptionGroup var server: ServeOptions
///     func run() async throws {
///         let configuration = try server.configuration(environment: ProcessInfo.processInfo.environment)
///         try await SyncServerApp.serve(configuration: configuration, domain: MyDomain())
///     }
/// }
/// ```
public struct ServeOptions: ParsableArguments {
    @OptionGroup public var common: CommonOptions

    @Option(help: "Address to bind (SYNC_HOST, default 127.0.0.1).")
    public var host: String?

    @Option(help: "Port to listen on; 0 picks a free one (SYNC_PORT, default 8080).")
    public var port: Int?

    @Option(help: "PostgreSQL URL postgres://user@host:port/database (SYNC_DATABASE_URL).")
    public var databaseURL: String?

    @Option(help: "Largest gzip request body in bytes (SYNC_MAX_BODY_BYTES, default 4 MiB).")
    public var maxBodyBytes: Int?

    @Option(help: "Largest request body after decompression (SYNC_MAX_DECOMPRESSED_BYTES, default 64 MiB).")
    public var maxDecompressedBytes: Int?

    @Option(help: "Most events per push (SYNC_MAX_EVENTS_PER_PUSH, default 5000).")
    public var maxEventsPerPush: Int?

    @Option(help: "Largest event payload in bytes (SYNC_MAX_PAYLOAD_BYTES, default 256 KiB).")
    public var maxPayloadBytes: Int?

    @Option(help: "Most requests in flight per token subject (SYNC_MAX_CONCURRENT_PER_TOKEN, default 64).")
    public var maxConcurrentPerToken: Int?

    @Option(help: "PostgreSQL connections in the pool (SYNC_DB_POOL_SIZE, default 16).")
    public var dbPoolSize: Int?

    @Option(help: "Where blob bytes go: postgres or directory:/path (SYNC_BLOB_STORE, default postgres).")
    public var blobStore: String?

    @Option(help: "Blob chunk size in bytes (SYNC_BLOB_CHUNK_BYTES, default 8 MiB).")
    public var blobChunkBytes: Int?

    @Option(help: "Most blob bytes per scope (SYNC_BLOB_QUOTA_BYTES, default 10 GiB).")
    public var blobQuotaBytes: Int64?

    @Option(help: "Largest blob in bytes (SYNC_BLOB_MAX_BYTES, default 4 GiB).")
    public var blobMaxBytes: Int64?

    @Option(help: "Seconds an upload session lives (SYNC_UPLOAD_EXPIRY_SECONDS, default 86400).")
    public var uploadExpirySeconds: Int?

    @Option(
        help:
            "Seconds an unreferenced blob is kept before it is collected (SYNC_BLOB_COLLECT_AFTER_SECONDS, default 86400)."
    )
    public var blobCollectAfterSeconds: Int?

    @OptionGroup(title: "Identity provider")
    public var identityProvider: IdentityProviderOptions

    public init() {}

    /// The configuration: defaults, then `SYNC_*` variables of `environment`, then flags.
    /// - Throws: `ConfigurationError` naming a variable whose value is not valid.
    public func configuration(environment: [String: String]) throws -> ServerConfiguration {
        var configuration = try common.configuration(environment: environment)
        if let host { configuration.host = host }
        if let port { configuration.port = port }
        if let databaseURL { configuration.databaseURL = databaseURL }
        if let maxBodyBytes { configuration.limits.maxCompressedBodyBytes = maxBodyBytes }
        if let maxDecompressedBytes { configuration.limits.maxDecompressedBodyBytes = maxDecompressedBytes }
        if let maxEventsPerPush { configuration.limits.maxEventsPerPush = maxEventsPerPush }
        if let maxPayloadBytes { configuration.limits.maxPayloadBytes = maxPayloadBytes }
        if let maxConcurrentPerToken { configuration.maxConcurrentRequestsPerToken = maxConcurrentPerToken }
        if let dbPoolSize { configuration.databasePoolSize = dbPoolSize }
        if let blobStore { configuration.blobs.store = try .init(parsing: blobStore) }
        if let blobChunkBytes { configuration.blobs.chunkBytes = blobChunkBytes }
        if let blobQuotaBytes { configuration.blobs.quotaBytes = blobQuotaBytes }
        if let blobMaxBytes { configuration.blobs.maxBytes = blobMaxBytes }
        if let uploadExpirySeconds { configuration.blobs.uploadExpirySeconds = uploadExpirySeconds }
        if let blobCollectAfterSeconds { configuration.blobs.collectAfterSeconds = blobCollectAfterSeconds }
        identityProvider.apply(to: &configuration.identityProvider)
        return configuration
    }
}

/// Options every subcommand of a server executable shares; each flag overrides its `SYNC_*` variable.
public struct CommonOptions: ParsableArguments {
    @Option(help: "HS256 key for bearer tokens (SYNC_JWT_SECRET); optional with an identity provider's JWKS.")
    public var jwtSecret: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error (SYNC_LOG_LEVEL).")
    public var logLevel: String?

    @Option(help: "Log format: text, or json for one JSON object per line (SYNC_LOG_FORMAT, default text).")
    public var logFormat: String?

    public init() {}

    /// Defaults, then `SYNC_*` variables of `environment`, then these flags.
    public func configuration(environment: [String: String]) throws -> ServerConfiguration {
        var configuration = try ServerConfiguration(environment: environment)
        if let jwtSecret { configuration.jwtSecret = jwtSecret }
        if let logLevel { configuration.logLevel = logLevel }
        if let logFormat {
            guard let format = LogFormat(rawValue: logFormat.lowercased()) else {
                throw ConfigurationError(message: "--log-format must be text or json")
            }
            configuration.logFormat = format
        }
        return configuration
    }
}

extension SyncServerApp {
    /// Serves `domain` with `configuration` until SIGINT or SIGTERM, then shuts down gracefully: the whole
    /// `serve` command of an executable. Bootstraps the process-wide metrics system to a Prometheus registry
    /// that `/metrics` reads, and the logging system to `configuration.logFormat`.
    /// - Throws: `ConfigurationError` for invalid configuration; start-up errors (database unreachable past
    ///   the start-up timeout).
    public static func serve(configuration: ServerConfiguration, domain: any SyncDomain) async throws {
        configuration.logFormat.bootstrap()
        var logger = Logger(label: "sync-server")
        logger.logLevel = Logger.Level(rawValue: configuration.logLevel) ?? .info
        // Every waiting long-poll holds a socket: take all the descriptors the process may have.
        let files = FileLimit.raiseToHardLimit()
        logger.info("open-file limit", metadata: ["sync.files.limit": "\(files)"])
        if runsTasksOnEventLoops {
            logger.info("NIO's event loops run the process's tasks (SYNC_TASKS_ON_EVENT_LOOPS)")
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let app = try await SyncServerApp(
            configuration: configuration, domain: domain, logger: logger, registry: registry
        ).makeApplication()
        try await app.runService()
    }
}
