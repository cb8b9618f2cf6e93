import ArgumentParser
import Foundation

/// `jwks --private-key FILE.pem --kid ID`: prints the JWKS of a private key's public half, for a server to
/// read (`SYNC_JWKS_FILE`) while tokens are signed with the key (`token --private-key`): development and
/// tests without an identity provider. A server executable lists it among its subcommands as it is.
public struct JWKSCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "jwks", abstract: "Print the public JWKS of a private key (RSA or P-256, PEM).")

    @Option(help: "PEM file of the private key: RSA (RS256) or P-256 (ES256).")
    var privateKey: String

    @Option(help: "The key's id (kid).")
    var kid: String

    @Option(help: "RS256 or ES256 (default: the one the key's type allows).")
    var alg: TokenAlgorithm?

    public init() {}

    public func run() async throws {
        let key = try await TokenSigningKey(pem: try Self.readPEM(privateKey), keyID: kid, algorithm: alg)
        print(key.jwks)
    }

    /// The text of the PEM file at `path`.
    /// - Throws: `ValidationError` naming the file when it cannot be read.
    static func readPEM(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("cannot read the private key file \(path)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

extension TokenAlgorithm: ExpressibleByArgument {}
