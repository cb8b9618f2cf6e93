import Foundation
import GRDB

/// How a `SyncDatabase` opens its file.
public struct StorageConfiguration: Sendable {
    /// How long a connection waits for a lock held by another process before failing with `SQLITE_BUSY`.
    public var busyTimeoutSeconds: Double = 5
    /// The size of the reader pool.
    public var maximumReaderCount: Int = 4
    /// A label for the connections' dispatch queues (shows in crash reports and traces).
    public var label: String = "SyncStorage"
    /// SQLite's page cache per connection, in KiB (allocated as pages are used). SQLite's own default,
    /// 2 MiB, is smaller than the indexes of a log of a few hundred thousand events: a page of pulled events
    /// inserts into them at random places, and with a small cache every insert re-reads its index page from
    /// the file (measured: a 200,000-event pull spent most of its time in those reads and their writes).
    public var cacheSizeKiB: Int = 64 << 10
    /// WAL pages after which a checkpoint runs, on a connection and thread of its own
    /// (`BackgroundCheckpointer`); 0 leaves checkpoints to SQLite, inside the writer's commits.
    public var backgroundCheckpointPages: Int = 1000
    /// Encryption at rest (`DatabaseEncryption`); nil keeps the file plain SQLite.
    public var encryption: DatabaseEncryption?

    /// The defaults; with `SYNC_STORAGE_KEY_FILE` in the environment, every database opened with them is
    /// encrypted under the keys of that file (`FileKeyProvider`): a whole process's stores encrypted without a
    /// change of code (the repository's suites run both ways with it, `make test-encrypted`).
    public init() {
        if let keyFile = ProcessInfo.processInfo.environment["SYNC_STORAGE_KEY_FILE"], !keyFile.isEmpty {
            encryption = DatabaseEncryption(keys: FileKeyProvider(path: keyFile))
        }
    }

    /// The GRDB configuration: WAL (a `DatabasePool` always uses it), `synchronous=NORMAL` (durable across
    /// application crashes; a power loss can lose the last transactions but never corrupts the file),
    /// `busy_timeout`, `cache_size`, foreign keys on.
    func grdbConfiguration(checkpointer: BackgroundCheckpointer? = nil) -> Configuration {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.maximumReaderCount = maximumReaderCount
        configuration.label = label
        let busyMilliseconds = Int(busyTimeoutSeconds * 1000)
        let cacheSize = max(1, cacheSizeKiB)
        let encrypted = encryption != nil
        configuration.prepareDatabase { db in
            // First: a file another process is creating (or switching to WAL) is locked for a moment, and
            // the statements below would otherwise fail at once with SQLITE_BUSY instead of waiting.
            try db.execute(sql: "PRAGMA busy_timeout = \(busyMilliseconds)")
            if encrypted {
                // A new file gets the cipher's page size and room for each page's nonce and tag; temporary
                // tables and sorts never reach the disk.
                try db.execute(sql: "PRAGMA page_size = \(PageCipher.pageSize)")
                try SyncDatabase.setReserve(db)
                try db.execute(sql: "PRAGMA temp_store = MEMORY")
            }
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: "PRAGMA cache_size = -\(cacheSize)")
            if let checkpointer, !db.configuration.readonly { checkpointer.install(on: db) }
        }
        return configuration
    }
}
