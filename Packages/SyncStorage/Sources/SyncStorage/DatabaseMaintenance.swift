import Foundation
import GRDB

/// A function that deletes rows that are no longer needed, inside the write transaction it is given, and
/// returns how many rows it deleted. `DatabaseMaintenance.prune()` runs every hook added to this database
/// with `addPruneHook` (in the order added, all in one write transaction, so all delete or none do), then
/// gives the freed pages back with an incremental vacuum. Hooks are held by the `SyncDatabase` value, not
/// stored in the file: add them each time the database is opened. The event log is not pruned through a
/// hook: `EventStore.prune(stablePoints:olderThan:)` must fold events into projection snapshots before it
/// deletes them, so a hook must never delete `events` rows itself.
public struct PruneHook: Sendable {
    public var name: String
    public var prune: @Sendable (Database) throws -> Int

    public init(name: String, prune: @escaping @Sendable (Database) throws -> Int) {
        self.name = name
        self.prune = prune
    }
}

/// Space statistics of a database file.
public struct StorageStatistics: Sendable, Codable, Equatable {
    public struct ObjectSize: Sendable, Codable, Equatable {
        /// A table or index name.
        public var name: String
        public var bytes: Int
    }

    public var pageSize: Int
    public var pageCount: Int
    public var freePages: Int
    /// Bytes of the main file (`pageSize * pageCount`).
    public var fileBytes: Int { pageSize * pageCount }
    /// Bytes that `incrementalVacuum` can give back.
    public var freeBytes: Int { pageSize * freePages }
    /// Bytes of the `-wal` file on disk.
    public var walBytes: Int
    /// Bytes per table and index, largest first; empty when SQLite was built without `dbstat`.
    public var objects: [ObjectSize]
    public var dbstatAvailable: Bool
    /// Whether the file is encrypted at rest (`StorageConfiguration.encryption`); nil in reports made before
    /// encryption existed.
    public var encrypted: Bool? = nil
}

/// What `DatabaseMaintenance.prune()` did.
public struct PruneReport: Sendable, Equatable {
    /// Rows deleted per hook name.
    public var deletedRows: [String: Int]
    public var pagesFreed: Int
}

/// Maintenance of a `SyncDatabase`: statistics, incremental vacuum, pruning.
public struct DatabaseMaintenance: Sendable {
    let database: SyncDatabase

    /// Page counts, free pages, WAL size and (when SQLite has the `dbstat` table) bytes per table and index.
    public func statistics() throws -> StorageStatistics {
        let walBytes =
            (try? FileManager.default.attributesOfItem(atPath: database.path + "-wal")[.size] as? Int) ?? 0
        return try database.writer.read { db in
            let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0
            let pageCount = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let freePages = try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
            var objects: [StorageStatistics.ObjectSize] = []
            var dbstatAvailable = true
            do {
                objects = try Row.fetchAll(
                    db, sql: "SELECT name, SUM(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY bytes DESC, name"
                ).map { StorageStatistics.ObjectSize(name: $0["name"], bytes: $0["bytes"]) }
            } catch {
                dbstatAvailable = false
            }
            return StorageStatistics(
                pageSize: pageSize, pageCount: pageCount, freePages: freePages, walBytes: walBytes,
                objects: objects, dbstatAvailable: dbstatAvailable, encrypted: database.encryption != nil)
        }
    }

    /// Gives up to `pages` free pages (all of them when nil) back to the file system, then checkpoints the
    /// WAL so the main file actually shrinks. Returns how many pages were freed.
    @discardableResult
    public func incrementalVacuum(pages: Int? = nil) throws -> Int {
        try database.writer.writeWithoutTransaction { db in
            let before = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            if let pages {
                try db.execute(sql: "PRAGMA incremental_vacuum(\(max(0, pages)))")
            } else {
                try db.execute(sql: "PRAGMA incremental_vacuum")
            }
            let after = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            // Passive: copy back what no reader still needs; never wait for readers.
            _ = try? database.checkpoint(.passive, db)
            return before - after
        }
    }

    /// Adds a prune hook; hooks run in the order they were added.
    public func addPruneHook(_ hook: PruneHook) {
        database.pruneHooks.withLock { $0.append(hook) }
    }

    /// Runs every prune hook in one write transaction (all delete or none do), then vacuums.
    public func prune() throws -> PruneReport {
        let hooks = database.pruneHooks.withLock { $0 }
        let deleted = try database.writer.write { db in
            var deleted: [String: Int] = [:]
            for hook in hooks { deleted[hook.name, default: 0] += try hook.prune(db) }
            return deleted
        }
        return PruneReport(deletedRows: deleted, pagesFreed: try incrementalVacuum())
    }
}
