import ArgumentParser
import Foundation
import SyncModels

/// `token --sub NAME --scopes a,b --ttl SECONDS`: prints a bearer token signed with the configured key, for
/// development. A server executable lists it among its subcommands as it is.
///
/// With `--private-key FILE.pem --kid ID`, the token is signed the way an identity provider signs them
/// (RS256 or ES256), with the subject and scopes under the claims `SYNC_JWT_SUBJECT_CLAIM` and
/// `SYNC_JWT_SCOPES_CLAIM` name and the audience and issuer of `SYNC_JWT_AUDIENCE` and `SYNC_JWT_ISSUER`
/// unless `--audience` and `--issuer` say otherwise; `jwks` prints the JWKS a server needs to accept it.
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

    @Option(
        help:
            "PEM private key (RSA or P-256) to sign with as an identity provider would; default: HS256 with the JWT secret."
    )
    var privateKey: String?

    @Option(help: "With --private-key: RS256 or ES256 (default: the one the key's type allows).")
    var alg: TokenAlgorithm?

    @Option(help: "With --private-key: the key's id (kid), as the JWKS lists it.")
    var kid: String?

    @Option(help: "With --private-key: the audience (aud); default SYNC_JWT_AUDIENCE.")
    var audience: String?

    @Option(help: "With --private-key: the issuer (iss); default SYNC_JWT_ISSUER.")
    var issuer: String?

    public init() {}

    public func validate() throws {
        if privateKey == nil, alg != nil || kid != nil || audience != nil || issuer != nil {
            throw ValidationError("--alg, --kid, --audience and --issuer go with --private-key")
        }
        if privateKey != nil, kid == nil {
            throw ValidationError("--private-key needs --kid, the key id the JWKS lists")
        }
    }

    public func run() async throws {
        let configuration = try common.configuration(environment: ProcessInfo.processInfo.environment)
        let names = scopes.split(separator: ",").map(String.init)
        if let privateKey, let kid {
            for scope in names where !Scope.isValid(scope) {
                throw ValidationError("scope \"\(scope)\" is not a valid scope name")
            }
            var rules = configuration.identityProvider.claims
            if let audience { rules.audience = audience }
            if let issuer { rules.issuer = issuer }
            let key = try await TokenSigningKey(pem: try JWKSCommand.readPEM(privateKey), keyID: kid, algorithm: alg)
            print(try await key.mint(subject: sub, scopes: names, ttl: TimeInterval(ttl), rules: rules))
            return
        }
        guard configuration.jwtSecret.utf8.count >= 32 else {
            throw ValidationError("set SYNC_JWT_SECRET or --jwt-secret (32 bytes or more)")
        }
        let token = try await TokenVerifier(secret: configuration.jwtSecret)
            .mint(subject: sub, scopes: names, ttl: TimeInterval(ttl))
        print(token)
    }
}
