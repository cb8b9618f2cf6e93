import ArgumentParser
import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus

/// `sync-server`: serves the sync API (the default subcommand) or mints a development token.
public struct SyncServerCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "sync-server",
        abstract: "The offline-sync HTTP server: protocol v1 over PostgreSQL.",
        subcommands: [ServeCommand.self, TokenCommand.self],
        defaultSubcommand: ServeCommand.self)

    public init() {}
}

/// Options shared by the subcommands; each flag overrides its `SYNC_*` variable.
struct CommonOptions: ParsableArguments {
    @Option(help: "HS256 key for bearer tokens (SYNC_JWT_SECRET).")
    var jwtSecret: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error (SYNC_LOG_LEVEL).")
    var logLevel: String?

    func configuration(environment: [String: String]) throws -> ServerConfiguration {
        var configuration = try ServerConfiguration(environment: environment)
        if let jwtSecret { configuration.jwtSecret = jwtSecret }
        if let logLevel { configuration.logLevel = logLevel }
        return configuration
    }
}

/// `sync-server [serve] [--port N] …`: runs until SIGINT or SIGTERM, then shuts down gracefully.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Serve the sync API.")

    @OptionGroup var common: CommonOptions

    @Option(help: "Address to bind (SYNC_HOST, default 127.0.0.1).")
    var host: String?

    @Option(help: "Port to listen on; 0 picks a free one (SYNC_PORT, default 8080).")
    var port: Int?

    @Option(help: "PostgreSQL URL postgres://user@host:port/database (SYNC_DATABASE_URL).")
    var databaseURL: String?

    @Option(help: "Most live notes per scope (SYNC_NOTE_QUOTA, default 1000).")
    var noteQuota: Int?

    @Option(help: "Largest gzip request body in bytes (SYNC_MAX_BODY_BYTES, default 8 MiB).")
    var maxBodyBytes: Int?

    @Option(help: "Largest request body after decompression (SYNC_MAX_DECOMPRESSED_BYTES, default 64 MiB).")
    var maxDecompressedBytes: Int?

    @Option(help: "Most events per push (SYNC_MAX_EVENTS_PER_PUSH, default 5000).")
    var maxEventsPerPush: Int?

    @Option(help: "Largest event payload in bytes (SYNC_MAX_PAYLOAD_BYTES, default 256 KiB).")
    var maxPayloadBytes: Int?

    @Option(help: "Most requests in flight per token subject (SYNC_MAX_CONCURRENT_PER_TOKEN, default 64).")
    var maxConcurrentPerToken: Int?

    @Option(help: "PostgreSQL connections in the pool (SYNC_DB_POOL_SIZE, default 16).")
    var dbPoolSize: Int?

    /// The configuration: defaults, then `SYNC_*` variables of `environment`, then flags.
    func configuration(environment: [String: String]) throws -> ServerConfiguration {
        var configuration = try common.configuration(environment: environment)
        if let host { configuration.host = host }
        if let port { configuration.port = port }
        if let databaseURL { configuration.databaseURL = databaseURL }
        if let noteQuota { configuration.noteQuota = noteQuota }
        if let maxBodyBytes { configuration.limits.maxCompressedBodyBytes = maxBodyBytes }
        if let maxDecompressedBytes { configuration.limits.maxDecompressedBodyBytes = maxDecompressedBytes }
        if let maxEventsPerPush { configuration.limits.maxEventsPerPush = maxEventsPerPush }
        if let maxPayloadBytes { configuration.limits.maxPayloadBytes = maxPayloadBytes }
        if let maxConcurrentPerToken { configuration.maxConcurrentRequestsPerToken = maxConcurrentPerToken }
        if let dbPoolSize { configuration.databasePoolSize = dbPoolSize }
        return configuration
    }

    func run() async throws {
        let configuration = try configuration(environment: ProcessInfo.processInfo.environment)
        var logger = Logger(label: "sync-server")
        logger.logLevel = Logger.Level(rawValue: configuration.logLevel) ?? .info
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let app = try await SyncServerApp(configuration: configuration, logger: logger, registry: registry)
            .makeApplication()
        try await app.runService()
    }
}

/// `sync-server token --sub NAME --scopes a,b --ttl SECONDS`: prints a token signed with the configured key.
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Print a bearer token for development use.")

    @OptionGroup var common: CommonOptions

    @Option(help: "The token's subject (the user).")
    var sub: String

    @Option(help: "Comma-separated scopes the token may read and write.")
    var scopes: String

    @Option(help: "Seconds until the token expires.")
    var ttl: Int = 3600

    func run() async throws {
        let configuration = try common.configuration(environment: ProcessInfo.processInfo.environment)
        guard configuration.jwtSecret.utf8.count >= 32 else {
            throw ValidationError("set SYNC_JWT_SECRET or --jwt-secret (32 bytes or more)")
        }
        let names = scopes.split(separator: ",").map(String.init)
        let token = try await TokenVerifier(secret: configuration.jwtSecret)
            .mint(subject: sub, scopes: names, ttl: TimeInterval(ttl))
        print(token)
    }
}
