import GRDB

/// How a `SyncDatabase` opens its file.
public struct StorageConfiguration: Sendable {
    /// How long a connection waits for a lock held by another process before failing with `SQLITE_BUSY`.
    public var busyTimeoutSeconds: Double = 5
    /// The size of the reader pool.
    public var maximumReaderCount: Int = 4
    /// A label for the connections' dispatch queues (shows in crash reports and traces).
    public var label: String = "SyncStorage"

    public init() {}

    /// The GRDB configuration: WAL (a `DatabasePool` always uses it), `synchronous=NORMAL` (durable across
    /// application crashes; a power loss can lose the last transactions but never corrupts the file),
    /// `busy_timeout`, foreign keys on.
    func grdbConfiguration() -> Configuration {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.maximumReaderCount = maximumReaderCount
        configuration.label = label
        let busyMilliseconds = Int(busyTimeoutSeconds * 1000)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: "PRAGMA busy_timeout = \(busyMilliseconds)")
        }
        return configuration
    }
}
