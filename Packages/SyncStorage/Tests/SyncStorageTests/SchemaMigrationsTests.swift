import Foundation
import GRDB
import SyncTestSupport
import Testing

@testable import SyncStorage

@Suite struct SchemaMigrationsTests {
    static func base() -> SchemaMigrations {
        var migrations = SchemaMigrations()
        migrations.register("test.v1.notes") { db in
            try db.execute(sql: "CREATE TABLE notes (id TEXT PRIMARY KEY, title TEXT NOT NULL)")
            try db.execute(sql: "INSERT INTO notes VALUES ('a', 'first')")
        }
        return migrations
    }

    static func tables(_ database: SyncDatabase) throws -> [String] {
        try database.writer.read { (db: Database) throws in
            try String.fetchAll(
                db,
                sql: "SELECT name FROM sqlite_schema WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        }
    }

    @Test func applyingTwiceIsANoOp() throws {
        let directory = try TemporaryDirectory()
        let database = try SyncDatabase(path: directory.path("a.sqlite"))
        var migrations = Self.base()
        migrations.register("test.v2.pinned") { db in
            try db.execute(sql: "ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")
        }
        try database.migrate(migrations)
        try database.migrate(migrations)
        #expect(try database.appliedMigrations() == ["test.v1.notes", "test.v2.pinned"])
        #expect(try database.writer.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM notes") } == 1)
    }

    @Test func packagesRegisterIntoOneList() {
        var first = Self.base()
        var second = SchemaMigrations()
        second.register("other.v1") { _ in }
        first.register(contentsOf: second)
        first.register(contentsOf: second)
        #expect(first.identifiers == ["test.v1.notes", "other.v1"])
    }

    @Test(arguments: [
        ("drop table", "DROP TABLE notes", "drops or renames table notes"),
        ("rename table", "ALTER TABLE notes RENAME TO notes2", "drops or renames table notes"),
        ("drop column", "ALTER TABLE notes DROP COLUMN title", "drops or renames column notes.title"),
        ("rename column", "ALTER TABLE notes RENAME COLUMN title TO name", "drops or renames column notes.title"),
        (
            // SQLite refuses this in ADD COLUMN, but not when a table is rebuilt under its old name.
            "not null without default",
            """
            CREATE TABLE notes_new (id TEXT PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL);
            INSERT INTO notes_new SELECT id, title, '' FROM notes;
            DROP TABLE notes;
            ALTER TABLE notes_new RENAME TO notes;
            """,
            "adds NOT NULL column notes.body without a default"
        ),
    ])
    func destructiveMigrationsAreRejectedAndRolledBack(name: String, sql: String, message: String) throws {
        let directory = try TemporaryDirectory()
        let database = try SyncDatabase(path: directory.path("a.sqlite"))
        try database.migrate(Self.base())
        var migrations = Self.base()
        migrations.register("test.v2.bad") { db in
            try db.execute(sql: "CREATE TABLE side_effect (x INTEGER)")
            try db.execute(sql: sql)
        }
        do {
            try database.migrate(migrations)
            Issue.record("\(name) was accepted")
        } catch let error as StorageError {
            #expect(error.code == "storage.migrationRule")
            #expect(error.message == "migration test.v2.bad: \(message)")
        }
        #expect(try database.appliedMigrations() == ["test.v1.notes"])
        #expect(try Self.tables(database) == ["grdb_migrations", "notes"], "the whole step rolled back")
        #expect(try database.writer.read { try String.fetchOne($0, sql: "SELECT title FROM notes") } == "first")
    }

    @Test func derivedTablesMayBeRecreated() throws {
        let directory = try TemporaryDirectory()
        let database = try SyncDatabase(path: directory.path("a.sqlite"))
        var migrations = SchemaMigrations()
        migrations.register("test.v1.view") { db in try db.execute(sql: "CREATE TABLE note_view (id TEXT)") }
        migrations.register("test.v2.view", derivedTables: ["note_view"]) { db in
            try db.execute(sql: "DROP TABLE note_view")
            try db.execute(sql: "CREATE TABLE note_view (id TEXT, title TEXT NOT NULL)")
        }
        try database.migrate(migrations)
        #expect(try database.appliedMigrations().count == 2)
    }

    @Test func aThrowingMigrationLeavesThePreviousSchema() throws {
        struct Boom: Error {}
        let directory = try TemporaryDirectory()
        let database = try SyncDatabase(path: directory.path("a.sqlite"))
        var migrations = Self.base()
        migrations.register("test.v2.fails") { db in
            try db.execute(sql: "CREATE TABLE half_done (x INTEGER)")
            try db.execute(sql: "UPDATE notes SET title = 'changed'")
            throw Boom()
        }
        #expect(throws: Boom.self) { try database.migrate(migrations) }
        #expect(try database.appliedMigrations() == ["test.v1.notes"])
        #expect(try Self.tables(database) == ["grdb_migrations", "notes"])
        #expect(try database.writer.read { try String.fetchOne($0, sql: "SELECT title FROM notes") } == "first")
    }

    /// The process dies (no unwinding, no rollback call) in the middle of a migration; reopening the file
    /// finds the schema as it was before that migration, and migrating again completes normally.
    @Test func aCrashMidMigrationLeavesThePreviousSchemaIntact() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("crash.sqlite")
        try SyncDatabase(path: path).migrate(Self.base())

        await #expect(processExitsWith: .exitCode(42)) { [path = path as String] in
            let database = try SyncDatabase(path: path)
            var migrations = SchemaMigrationsTests.base()
            migrations.register("test.v2.crash") { db in
                try db.execute(sql: "CREATE TABLE half_done (x INTEGER)")
                try db.execute(sql: "ALTER TABLE notes ADD COLUMN body TEXT")
                for index in 0..<10_000 {
                    try db.execute(sql: "INSERT INTO half_done VALUES (?)", arguments: [index])
                }
                try db.execute(sql: "UPDATE notes SET title = 'changed'")
                exit(42)
            }
            try database.migrate(migrations)
        }

        let database = try SyncDatabase(path: path)
        #expect(try database.appliedMigrations() == ["test.v1.notes"])
        #expect(try Self.tables(database) == ["grdb_migrations", "notes"])
        try await database.writer.read { (db: Database) throws in
            #expect(try db.columns(in: "notes").map(\.name) == ["id", "title"])
            #expect(try String.fetchOne(db, sql: "SELECT title FROM notes") == "first")
            #expect(try String.fetchOne(db, sql: "PRAGMA integrity_check") == "ok")
        }
        var migrations = Self.base()
        migrations.register("test.v2.crash") { db in try db.execute(sql: "ALTER TABLE notes ADD COLUMN body TEXT") }
        try database.migrate(migrations)
        #expect(try database.appliedMigrations() == ["test.v1.notes", "test.v2.crash"])
    }
}
