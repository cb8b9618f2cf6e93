import SyncStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The advisory lock every `EventStore` holds on its database's lock file (`SyncDatabase.lockSuffix`) for its
/// lifetime, so that crash recovery at open runs only when nothing else has the file open.
///
/// **Why.** Opening a store repairs what a process that ended left behind: the streams' versions it
/// deferred, projections behind their checkpoints, the cursor before folded events it held in memory. Run
/// while another process (or another store of this process) has the file open, the same steps take what
/// that live store holds in memory for leftovers: `sync-agent status` opened during a pull removed the
/// pull's `streams_through` and the pull then spun on empty transactions.
///
/// **How.** The opener tries `flock(LOCK_EX | LOCK_NB)`. Granted, no other store has the file open: it
/// recovers, then keeps the lock shared (`share()`). Refused, another store has it: it waits for a shared
/// lock (a first opener holds the exclusive one only while it recovers) and skips the recovery that assumes
/// a previous owner is gone (`EventStore.openedFirst`). `flock` locks belong to the open file description,
/// so two stores of one process exclude each other as two processes do; the descriptor is not inherited by
/// child processes (`O_CLOEXEC`), and the kernel drops the lock with the process, however it ends.
///
/// The lock is on a file of its own, never the database: closing any descriptor of the database file would
/// drop the POSIX (`fcntl`) locks SQLite holds on it in this process.
final class StoreOpenLock: Sendable {
    /// The lock file's descriptor, open for the lock's lifetime.
    let descriptor: Int32
    /// Whether the lock was granted exclusive at open: no other store had the file open.
    let exclusive: Bool
    let path: String

    /// Opens (creating if needed) the lock file of the database at `databasePath` and takes the lock:
    /// exclusive when no other store has the file open, else shared, waiting for an opener that is
    /// recovering. Nil for a database without a file of its own (temporary, in memory, or a URI).
    static func acquire(databasePath: String) throws -> StoreOpenLock? {
        guard !databasePath.isEmpty, databasePath != ":memory:", !databasePath.hasPrefix("file:") else {
            return nil
        }
        return try StoreOpenLock(path: databasePath + SyncDatabase.lockSuffix)
    }

    private init(path: String) throws {
        self.path = path
        var descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        if descriptor < 0 && (errno == EACCES || errno == EROFS) {
            // A lock file made by another user, or a read-only file system: a read-only descriptor locks too.
            descriptor = open(path, O_RDONLY | O_CLOEXEC)
        }
        guard descriptor >= 0 else { throw Self.failure("cannot open", path) }
        if Self.lock(descriptor, LOCK_EX | LOCK_NB) {
            exclusive = true
        } else if errno == EAGAIN {
            // `EWOULDBLOCK` (`EAGAIN` on Linux and Darwin): another store has the file open. Waits only for
            // one that is recovering (it holds the lock exclusive for that long); open stores hold it shared.
            guard Self.lock(descriptor, LOCK_SH) else {
                let error = Self.failure("cannot lock", path)
                close(descriptor)
                throw error
            }
            exclusive = false
        } else {
            let error = Self.failure("cannot lock", path)
            close(descriptor)
            throw error
        }
        self.descriptor = descriptor
    }

    /// Keeps the lock shared once the recovery is done, so that other stores may open the file. (`flock`
    /// converts by dropping the lock and taking the new one: another opener may get it exclusive in between,
    /// at a moment when this store, just opened, holds nothing in memory its recovery could take.)
    func share() throws {
        guard exclusive else { return }
        guard Self.lock(descriptor, LOCK_SH) else { throw Self.failure("cannot share the lock on", path) }
    }

    deinit {
        // Closing the only descriptor of this open file description releases the lock.
        close(descriptor)
    }

    /// `flock`, tried again when a signal interrupts it.
    private static func lock(_ descriptor: Int32, _ operation: Int32) -> Bool {
        while true {
            if flock(descriptor, operation) == 0 { return true }
            if errno != EINTR { return false }
        }
    }

    private static func failure(_ what: String, _ path: String) -> EventStoreError {
        EventStoreError(code: "store.lock", message: "\(what) \(path): \(String(cString: strerror(errno)))")
    }
}
