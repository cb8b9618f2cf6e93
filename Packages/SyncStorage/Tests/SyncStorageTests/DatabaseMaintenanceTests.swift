import Foundation
import GRDB
import SyncTestSupport
import Testing

@testable import SyncStorage

@Suite struct DatabaseMaintenanceTests {
    static func filled(_ directory: TemporaryDirectory) throws -> SyncDatabase {
        let database = try SyncDatabase(path: directory.path("a.sqlite"))
        try database.writer.write { (db: Database) throws in
            try db.execute(sql: "CREATE TABLE blobs (id INTEGER PRIMARY KEY, data BLOB)")
            try db.execute(sql: "CREATE INDEX blobs_by_length ON blobs (length(data))")
            let chunk = Data(repeating: 7, count: 4096)
            for id in 0..<2000 {
                try db.execute(sql: "INSERT INTO blobs VALUES (?, ?)", arguments: [id, chunk])
            }
        }
        return database
    }

    static func fileSize(_ path: String) throws -> Int {
        try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
    }

    @Test func statisticsReportPagesAndBytesPerTable() throws {
        let directory = try TemporaryDirectory()
        let database = try Self.filled(directory)
        let statistics = try database.maintenance.statistics()
        #expect(statistics.pageSize > 0)
        #expect(statistics.fileBytes >= 2000 * 4096)
        #expect(statistics.freePages == 0)
        if statistics.dbstatAvailable {
            let blobs = try #require(statistics.objects.first { $0.name == "blobs" })
            #expect(blobs.bytes >= 2000 * 4096)
            #expect(statistics.objects.first?.name == "blobs", "largest first")
            #expect(statistics.objects.contains { $0.name == "blobs_by_length" })
        }
    }

    @Test func vacuumGivesSpaceBackAfterDeletes() throws {
        let directory = try TemporaryDirectory()
        let database = try Self.filled(directory)
        try database.checkpoint()
        let sizeBefore = try Self.fileSize(database.path)
        try database.writer.write { db in try db.execute(sql: "DELETE FROM blobs WHERE id >= 100") }
        let afterDelete = try database.maintenance.statistics()
        #expect(afterDelete.freePages > 1000, "deleted pages go to the freelist first")

        let freed = try database.maintenance.incrementalVacuum(pages: 100)
        #expect(freed == 100, "a bounded vacuum frees exactly that many pages")
        let rest = try database.maintenance.incrementalVacuum()
        #expect(rest >= afterDelete.freePages - 100)
        let afterVacuum = try database.maintenance.statistics()
        #expect(afterVacuum.freePages == 0)
        #expect(afterVacuum.pageCount < afterDelete.pageCount - 1000)
        let sizeAfter = try Self.fileSize(database.path)
        #expect(sizeAfter < sizeBefore / 5, "the file itself shrank: \(sizeBefore) → \(sizeAfter) bytes")
        #expect(try database.writer.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM blobs") } == 100)
    }

    @Test func pruneRunsEveryHookInOneTransactionThenVacuums() throws {
        let directory = try TemporaryDirectory()
        let database = try Self.filled(directory)
        database.maintenance.addPruneHook(
            PruneHook(name: "old-blobs") { db in
                try db.execute(sql: "DELETE FROM blobs WHERE id < 1500")
                return db.changesCount
            })
        database.maintenance.addPruneHook(PruneHook(name: "nothing") { _ in 0 })
        let report = try database.maintenance.prune()
        #expect(report.deletedRows == ["old-blobs": 1500, "nothing": 0])
        #expect(report.pagesFreed > 1000)
        #expect(try database.maintenance.statistics().freePages == 0)
    }

    @Test func aFailingHookDeletesNothing() throws {
        struct Boom: Error {}
        let directory = try TemporaryDirectory()
        let database = try Self.filled(directory)
        database.maintenance.addPruneHook(
            PruneHook(name: "first") { db in
                try db.execute(sql: "DELETE FROM blobs")
                return db.changesCount
            })
        database.maintenance.addPruneHook(PruneHook(name: "fails") { _ in throw Boom() })
        #expect(throws: Boom.self) { try database.maintenance.prune() }
        #expect(try database.writer.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM blobs") } == 2000)
    }
}
