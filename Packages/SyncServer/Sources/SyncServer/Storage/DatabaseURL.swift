import Foundation
import Logging
import PostgresNIO

/// The parts of a `postgres://user[:password]@host[:port]/database` URL.
public struct DatabaseURL: Sendable, Hashable {
    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String

    /// - Throws: `ConfigurationError` for anything that is not a `postgres://` or `postgresql://` URL with a
    ///   user, a host and a database (the message never contains the password).
    public init(_ text: String) throws {
        guard let components = URLComponents(string: text),
            components.scheme == "postgres" || components.scheme == "postgresql",
            let host = components.host, !host.isEmpty,
            let user = components.user, !user.isEmpty
        else {
            throw ConfigurationError(message: "the database URL must look like postgres://user@host:port/database")
        }
        let database = String(components.path.drop(while: { $0 == "/" }))
        self.host = host
        self.port = components.port ?? 5432
        self.username = user.removingPercentEncoding ?? user
        self.password = components.password.map { $0.removingPercentEncoding ?? $0 }
        self.database = database.isEmpty ? self.username : database
    }

    /// The same server with another database, for tools and tests that create databases.
    public func with(database: String) -> DatabaseURL {
        var copy = self
        copy.database = database
        return copy
    }

    /// The URL text; includes the password when there is one, so never log it.
    public var urlString: String {
        var components = URLComponents()
        components.scheme = "postgres"
        components.user = username
        components.password = password
        components.host = host
        components.port = port
        components.path = "/" + database
        return components.string ?? ""
    }
}

extension DatabaseURL {
    /// Runs `body` on one direct connection to this database (no pool), closed afterwards even when `body`
    /// throws: for tools, tests and benchmarks that run a few statements. With `reconnects`, connecting that
    /// fails is tried again that many times, a second apart (never a statement: `body` runs once).
    public func withConnection<Result>(
        logger: Logger, reconnects: Int = 0, _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        var attempt = 0
        let connection: PostgresConnection
        while true {
            do {
                connection = try await PostgresConnection.connect(
                    configuration: .init(
                        host: host, port: port, username: username, password: password, database: database,
                        tls: .disable),
                    id: 1, logger: logger)
                break
            } catch let error as PSQLError where error.code == .connectionError && attempt < reconnects {
                attempt += 1
                try await Task.sleep(for: .seconds(1))
            }
        }
        do {
            let result = try await body(connection)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }
}
