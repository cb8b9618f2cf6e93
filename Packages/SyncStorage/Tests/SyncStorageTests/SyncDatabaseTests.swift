import Dispatch
import Foundation
import GRDB
import SyncTestSupport
import Synchronization
import Testing

@testable import SyncStorage

@Suite struct SyncDatabaseTests {
    @Test func opensWithTheRequiredPragmas() throws {
        let directory = try TemporaryDirectory()
        let database = try SyncDatabase(path: directory.path("a.sqlite"))
        try database.writer.read { (db: Database) throws in
            #expect(try String.fetchOne(db, sql: "PRAGMA journal_mode") == "wal")
            #expect(try Int.fetchOne(db, sql: "PRAGMA synchronous") == 1)  // NORMAL
            #expect(try Int.fetchOne(db, sql: "PRAGMA foreign_keys") == 1)
            #expect(try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") == 2)  // INCREMENTAL
            #expect(try Int.fetchOne(db, sql: "PRAGMA busy_timeout") == 5000)
        }
        try database.writer.write { (db: Database) throws in
            #expect(try Int.fetchOne(db, sql: "PRAGMA synchronous") == 1)
        }
    }

    /// Two openers of a file that does not exist yet, at the same moment (as `sync-agent sync` and `status`
    /// started together): each waits for the other's switch to WAL and first `VACUUM` instead of failing with
    /// SQLITE_BUSY, which SQLite answers at once to such a change.
    @Test func twoOpenersOfANewFileAtOnceBothOpenIt() async throws {
        let directory = try TemporaryDirectory()
        for round in 0..<40 {
            let path = directory.path("new-\(round).sqlite")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        let database = try SyncDatabase(path: path)
                        try await database.writer.write { db in
                            try db.execute(sql: "CREATE TABLE IF NOT EXISTS t (x INTEGER)")
                            try db.execute(sql: "INSERT INTO t VALUES (1)")
                        }
                    }
                }
                try await group.waitForAll()
            }
            let database = try SyncDatabase(path: path)
            #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 2)
        }
    }

    @Test func reopeningKeepsDataAndSettings() throws {
        let directory = try TemporaryDirectory()
        var migrations = SchemaMigrations()
        migrations.register("test.v1") { db in try db.execute(sql: "CREATE TABLE t (x INTEGER)") }
        do {
            let database = try SyncDatabase(path: directory.path("a.sqlite"))
            try database.migrate(migrations)
            try database.writer.write { db in try db.execute(sql: "INSERT INTO t VALUES (1)") }
        }
        let database = try SyncDatabase(path: directory.path("a.sqlite"))
        try database.migrate(migrations)
        try database.writer.read { (db: Database) throws in
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM t") == 1)
            #expect(try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") == 2)
        }
    }

    /// A reader inside one snapshot keeps reading, undisturbed and unblocked, while the writer commits.
    @Test func readerKeepsReadingWhileWriterCommits() async throws {
        let directory = try TemporaryDirectory()
        let database = try SyncDatabase(path: directory.path("a.sqlite"))
        try await database.writer.write { (db: Database) throws in
            try db.execute(sql: "CREATE TABLE t (x INTEGER)")
            try db.execute(sql: "INSERT INTO t VALUES (1)")
        }
        let readerInside = Atomic(false)
        let writerDone = DispatchSemaphore(value: 0)
        let writer = database.writer
        let writes = Task.detached {
            // Waits without holding one of the few threads of the cooperative pool.
            while !readerInside.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(5)) }
            for value in 2...100 {
                try await writer.write { db in try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [value]) }
            }
            writerDone.signal()
        }
        let (first, second, writerFinishedWhileReading) = try await database.writer.read { (db: Database) throws in
            let first = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
            readerInside.store(true, ordering: .releasing)
            // Generous: the writer's tasks share the machine with the whole test run.
            let finished = writerDone.wait(timeout: .now() + 300) == .success
            let second = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
            return (first, second, finished)
        }
        try await writes.value
        #expect(writerFinishedWhileReading, "the writer committed 99 transactions while the reader was open")
        #expect(first == 1 && second == 1, "the reader's snapshot is stable")
        #expect(
            try await database.writer.read { (db: Database) throws in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
            } == 100)
    }

    @Test func concurrentReadersAndOneWriterDoNotBusyFail() async throws {
        let directory = try TemporaryDirectory()
        let database = try SyncDatabase(path: directory.path("a.sqlite"))
        try await database.writer.write { db in try db.execute(sql: "CREATE TABLE t (x INTEGER)") }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for value in 0..<200 {
                    try await database.writer.write { (db: Database) throws in
                        try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [value])
                    }
                }
            }
            for _ in 0..<4 {
                group.addTask {
                    var last = 0
                    for _ in 0..<200 {
                        let count = try await database.writer.read { (db: Database) throws in
                            try Int.fetchOne(db, sql: "SELECT count(*) FROM t") ?? 0
                        }
                        #expect(count >= last, "readers never see time go backwards")
                        last = count
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}
