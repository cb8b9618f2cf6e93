import Logging
import PostgresNIO
import Synchronization

/// `/readyz`: ready once the migrations are applied and while the database answers.
final class Readiness: Sendable {
    private let migrated = Mutex(false)
    private let database: Database

    init(database: Database) {
        self.database = database
    }

    func markMigrated() {
        migrated.withLock { $0 = true }
    }

    func check(logger: Logger) async -> Bool {
        guard migrated.withLock({ $0 }) else { return false }
        do {
            return try await database.withConnection { connection in
                try await connection.checkedQuery("SELECT 1", logger: logger)
                return true
            }
        } catch {
            return false
        }
    }
}
