import ArgumentParser
import Foundation

/// `token --sub NAME --scopes a,b --ttl SECONDS`: prints a bearer token signed with the configured key, for
/// development. A server executable lists it among its subcommands as it is.
public struct TokenCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Print a bearer token for development use.")

    @OptionGroup var common: CommonOptions

    @Option(help: "The token's subject (the user).")
    var sub: String

    @Option(help: "Comma-separated scopes the token may read and write.")
    var scopes: String

    @Option(help: "Seconds until the token expires.")
    var ttl: Int = 3600

    public init() {}

    public func run() async throws {
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
