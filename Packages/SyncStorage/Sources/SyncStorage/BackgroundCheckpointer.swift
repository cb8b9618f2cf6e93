import Dispatch
import GRDB
import GRDBSQLite
import Synchronization

/// Copies the write-ahead log into the database file on a thread of its own, instead of in the commit that
/// crossed SQLite's auto-checkpoint threshold.
///
/// SQLite's automatic checkpoint runs inside `COMMIT` of the writer whose transaction made the WAL pass
/// 1,000 pages: that writer pays for reading back and writing out every page of the WAL, which made one
/// write in every few wait tens of milliseconds while a long pull was applied, and took a fifth of applying
/// it. Here the writer connection's WAL hook (which replaces auto-checkpointing on that connection) only
/// signals this object once the WAL holds `thresholdPages`; a `PASSIVE` checkpoint then runs on a second
/// connection, on a background queue, while the writer goes on. A passive checkpoint never blocks writers
/// or readers; the next writer after a complete one restarts the WAL from its beginning, so the file stays
/// bounded. If checkpoints ever fall far behind (the WAL past `8 × thresholdPages`), the writer checkpoints
/// itself, as SQLite would, so the WAL cannot grow without bound.
final class BackgroundCheckpointer: Sendable {
    let path: String
    let thresholdPages: Int32
    private let queue = DispatchQueue(label: "SyncStorage.checkpoint", qos: .utility)
    private struct State {
        var connection: DatabaseQueue?
        var scheduled = false
        var closed = false
        var paused = 0
    }
    private let state = Mutex(State())

    init(path: String, thresholdPages: Int32) {
        self.path = path
        self.thresholdPages = thresholdPages
    }

    /// Installs the WAL hook on the writer connection. The checkpointer is retained by the hook for as long
    /// as the connection lives (a few bytes once `close()` released its own connection).
    func install(on db: Database) {
        let context = Unmanaged.passRetained(self).toOpaque()
        sqlite3_wal_hook(
            db.sqliteConnection,
            { context, connection, _, frames in
                guard let context else { return SQLITE_OK }
                let checkpointer = Unmanaged<BackgroundCheckpointer>.fromOpaque(context).takeUnretainedValue()
                if frames >= checkpointer.thresholdPages * 8 {
                    // Far behind: do it here, as SQLite's own auto-checkpoint would.
                    sqlite3_wal_checkpoint_v2(connection, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
                } else if frames >= checkpointer.thresholdPages {
                    checkpointer.schedule()
                }
                return SQLITE_OK
            }, context)
    }

    private func schedule() {
        let start = state.withLock { state -> Bool in
            guard !state.scheduled, !state.closed, state.paused == 0 else { return false }
            state.scheduled = true
            return true
        }
        guard start else { return }
        queue.async { self.checkpoint() }
    }

    private func checkpoint() {
        let connection = state.withLock { state -> DatabaseQueue? in
            state.scheduled = false
            guard !state.closed else { return nil }
            if state.connection == nil {
                var configuration = Configuration()
                configuration.label = "SyncStorage.checkpoint"
                state.connection = try? DatabaseQueue(path: path, configuration: configuration)
            }
            return state.connection
        }
        // A failed checkpoint (the file is busy, or going away) is harmless: the next commit asks again.
        try? connection?.writeWithoutTransaction { db in _ = try db.checkpoint(.passive) }
    }

    /// Runs `body` with no background checkpoint under way or starting: SQLite lets one checkpoint run at a
    /// time and answers `SQLITE_BUSY` to a second one at once (without waiting), so an explicit checkpoint
    /// must not meet one of these.
    func paused<T>(_ body: () throws -> T) rethrows -> T {
        state.withLock { $0.paused += 1 }
        defer { state.withLock { $0.paused -= 1 } }
        queue.sync {}
        return try body()
    }

    /// Stops checkpointing and closes the second connection (waiting for a checkpoint under way).
    func close() {
        let connection = state.withLock { state -> DatabaseQueue? in
            state.closed = true
            defer { state.connection = nil }
            return state.connection
        }
        queue.sync {}
        try? connection?.close()
    }
}
