import GRDB

/// How a `SyncDatabase` opens its file.
public struct StorageConfiguration: Sendable {
    /// How long a connection waits for a lock held by another process before failing with `SQLITE_BUSY`.
    public var busyTimeoutSeconds: Double = 5
    /// The size of the reader pool.
    public var maximumReaderCount: Int = 4
    /// A label for the connections' dispatch queues (shows in crash reports and traces).
    public var label: String = "SyncStorage"
    /// How much of the file connections read through memory-mapped I/O (`PRAGMA mmap_size`; SQLite caps it at
    /// its compile-time maximum). Reading a page then costs no system call and no copy, which is most of
    /// what a full scan of a large log (a projection rebuild) spends outside its own code. Writes still go
    /// through `write`. 0 turns it off; the cost of on is that an I/O error on a mapped page stops the
    /// process instead of failing the query.
    public var memoryMapBytes: Int = 1 << 30

    public init() {}

    /// The GRDB configuration: WAL (a `DatabasePool` always uses it), `synchronous=NORMAL` (durable across
    /// application crashes; a power loss can lose the last transactions but never corrupts the file),
    /// `busy_timeout`, memory-mapped reads, foreign keys on.
    func grdbConfiguration() -> Configuration {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.maximumReaderCount = maximumReaderCount
        configuration.label = label
        let busyMilliseconds = Int(busyTimeoutSeconds * 1000)
        let memoryMapBytes = max(0, memoryMapBytes)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: "PRAGMA busy_timeout = \(busyMilliseconds)")
            try db.execute(sql: "PRAGMA mmap_size = \(memoryMapBytes)")
        }
        return configuration
    }
}
