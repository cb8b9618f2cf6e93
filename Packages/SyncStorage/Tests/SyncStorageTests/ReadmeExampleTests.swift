import Foundation
import GRDB
import SyncStorage
import SyncTestSupport
import Testing

/// Keeps the README example compiling and working: the body below is the README's code.
@Suite struct ReadmeExampleTests {
    @Test func readmeExampleRuns() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("app.sqlite")
        // README begins
        let database = try SyncDatabase(path: path)  // path: where the SQLite file goes
        var migrations = SchemaMigrations()
        migrations.register("app.v1.items") { db in
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS item (id TEXT PRIMARY KEY, title TEXT)")
        }
        try database.migrate(migrations)
        try database.writer.write { db in try db.execute(sql: "INSERT OR REPLACE INTO item VALUES ('1', 'milk')") }
        print(try database.maintenance.statistics().fileBytes)
        // README ends
        #expect(try database.writer.read { try String.fetchOne($0, sql: "SELECT title FROM item") } == "milk")
    }
}
