import Foundation
import Logging
import PostgresNIO
import SyncProtocol
import SyncServerTesting
import Synchronization
import Testing

@testable import SyncServer

/// `PostgresConnection.transaction` on real PostgreSQL: it commits and rolls back as a transaction does, and
/// when the connection closes under it, it throws at once instead of waiting for the answer to a `ROLLBACK`
/// written to a closed connection, which never comes (what hung a request, and the server's shutdown with it,
/// when the pool force-closed the connection the request was using).
@Suite struct TransactionTests {
    struct Marker: Error {}

    @Test func commitsRollsBackAndEndsAtOnceWhenTheConnectionCloses() async throws {
        let logger = TestDatabase.logger
        try await TestDatabase.with { database in
            try await database.execute("CREATE TABLE t (v int4)")
            try await database.url.withConnection(logger: logger) { connection in
                try await connection.transaction(logger: logger) { connection in
                    try await connection.query("INSERT INTO t VALUES (1)", logger: logger)
                }
                await #expect(throws: Marker.self) {
                    try await connection.transaction(logger: logger) { connection in
                        try await connection.query("INSERT INTO t VALUES (2)", logger: logger)
                        throw Marker()
                    }
                }
            }
            #expect(try await database.integers("SELECT v FROM t") == [1], "the second one rolled back")

            // The connection closes inside the transaction. Run apart, so that a regression leaves a stuck
            // task behind instead of a stuck test.
            let outcome = Mutex<String?>(nil)
            let url = database.url
            Task {
                do {
                    try await url.withConnection(logger: logger) { connection in
                        try await connection.transaction(logger: logger) { connection in
                            try await connection.query("INSERT INTO t VALUES (3)", logger: logger)
                            try await connection.close()
                            throw Marker()
                        }
                    }
                    outcome.withLock { $0 = "returned" }
                } catch {
                    outcome.withLock { $0 = "threw \(type(of: error))" }
                }
            }
            for _ in 0..<600 where outcome.withLock({ $0 }) == nil {
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(outcome.withLock { $0 } == "threw Marker", "the transaction must end when its connection closes")
            #expect(try await database.integers("SELECT v FROM t") == [1], "nothing of it committed")

            // A transaction, or any statement, that finds its connection closed is refused with 503.
            let closed = try await PostgresConnection.connect(
                configuration: .init(
                    host: url.host, port: url.port, username: url.username, password: url.password,
                    database: url.database, tls: .disable),
                id: 2, logger: logger)
            try await closed.close()
            await #expect(throws: SyncProtocolError.self) {
                try await closed.transaction(logger: logger) { _ in }
            }
            await #expect(throws: SyncProtocolError.self) {
                try await closed.checkedQuery("SELECT 1", logger: logger)
            }
        }
    }
}
