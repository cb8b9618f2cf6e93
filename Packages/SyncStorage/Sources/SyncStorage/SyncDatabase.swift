import Foundation
import GRDB
import Synchronization

/// A local SQLite database file: one writer connection and a pool of readers (GRDB `DatabasePool`) in WAL
/// mode, so readers never wait for the writer and the writer never waits for readers.
///
/// The file is created with `auto_vacuum=INCREMENTAL`, which SQLite only accepts before the first table
/// exists; `DatabaseMaintenance.incrementalVacuum` then gives freed pages back to the file system without
/// the full rewrite (and exclusive lock) of `VACUUM`.
///
/// ```swift
/// let database = try SyncDatabase(path: "/tmp/app.sqlite")
/// var migrations = SchemaMigrations()
/// migrations.register("app.v1.items") { db in
///     try db.create(table: "item") { t in t.primaryKey("id", .text); t.column("title", .text) }
/// }
/// try database.migrate(migrations)
/// try await database.writer.write { db in try db.execute(sql: "INSERT INTO item VALUES ('1', 'milk')") }
/// ```
public final class SyncDatabase: Sendable {
    /// The GRDB pool: `write { }` is a write transaction, `read { }` a snapshot read.
    public let writer: DatabasePool
    public let path: String
    let pruneHooks = Mutex<[PruneHook]>([])
    let checkpointer: BackgroundCheckpointer?
    let readGate: AsyncGate
    /// The file's registration with the encrypting VFS, when `StorageConfiguration.encryption` is set.
    let encryption: CipherRegistration?

    /// Opens (creating if needed) the database at `path`.
    /// - Throws: `DatabaseError` if the file cannot be opened or is not a database.
    ///   With `configuration.encryption`, a `StorageError` (`storage.wrongKey`) if no stored key opens the file.
    public init(path: String, configuration: StorageConfiguration = StorageConfiguration()) throws {
        self.path = path
        self.encryption = try configuration.encryption.map { try Self.prepareEncrypted(path: path, encryption: $0) }
        let checkpointer =
            configuration.backgroundCheckpointPages > 0
            ? BackgroundCheckpointer(path: path, thresholdPages: Int32(configuration.backgroundCheckpointPages))
            : nil
        self.checkpointer = checkpointer
        self.readGate = AsyncGate(permits: max(1, configuration.maximumReaderCount))
        do {
            self.writer = try Self.openPool(
                path: path, configuration: configuration.grdbConfiguration(checkpointer: checkpointer),
                patience: .seconds(configuration.busyTimeoutSeconds))
        } catch {
            throw Self.authenticationFailure(error, path: path) ?? error
        }
    }

    /// The pool on `path`, a new file set up for incremental vacuum. Tried again while SQLite answers
    /// SQLITE_BUSY, for up to `patience`: when two processes open a file that does not exist yet at the same
    /// moment, one's switch to WAL or its `VACUUM` needs the lock the other holds, and SQLite refuses such a
    /// change at once rather than through the busy timeout (`sync-agent sync` and `status` started together
    /// on a new file did that, one run in eight).
    static func openPool(path: String, configuration: GRDB.Configuration, patience: Duration) throws -> DatabasePool {
        let deadline = ContinuousClock.now + patience
        while true {
            do {
                let pool = try DatabasePool(path: path, configuration: configuration)
                try pool.writeWithoutTransaction { db in
                    let tables = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_schema") ?? 0
                    if tables == 0 {
                        try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
                        try db.execute(sql: "VACUUM")
                    }
                }
                return pool
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY && ContinuousClock.now < deadline
            {
                usleep(20_000)
            }
        }
    }

    /// Whether the file is encrypted at rest (`StorageConfiguration.encryption`).
    public var isEncrypted: Bool { encryption != nil }

    deinit {
        checkpointer?.close()
    }

    /// A snapshot read on one of the pool's readers: use it rather than `writer.read` from async code.
    ///
    /// Reads beyond the pool's size wait here as suspended tasks. Through `writer.read` they would wait
    /// for a reader on one of Dispatch's threads, blocked, while the reads that hold the readers need
    /// Dispatch threads to finish; with a few hundred databases in one process every thread can end up
    /// blocked that way and the process stops (`AsyncGate`).
    /// - Throws: what `value` throws, a `DatabaseError`, or `CancellationError` if the task is cancelled
    ///   while it waits for a reader.
    public func read<T: Sendable>(_ value: @Sendable (Database) throws -> T) async throws -> T {
        try await readGate.run { try await writer.read(value) }
    }

    /// Applies the migrations not yet applied, in registration order, each in its own transaction, checking
    /// the additive-only rules of `SchemaMigrations`. Running it again with the same migrations does
    /// nothing.
    /// - Throws: `StorageError` (`storage.migrationRule`) when a migration breaks a rule, or the error the
    ///   migration threw; the failing migration is rolled back and the ones before it stay applied.
    public func migrate(_ migrations: SchemaMigrations) throws {
        try migrations.migrator().migrate(writer)
    }

    /// The identifiers of the migrations applied to this file, in order.
    public func appliedMigrations() throws -> [String] {
        try writer.read { db in
            guard try db.tableExists("grdb_migrations") else { return [] }
            return try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid")
        }
    }

    /// Copies the write-ahead log into the database file now (`.truncate` also empties the WAL file, for
    /// example before copying the database). Use this rather than GRDB's `checkpoint` directly: a
    /// background checkpoint (`StorageConfiguration.backgroundCheckpointPages`) is held off meanwhile, where
    /// meeting one would fail at once with `SQLITE_BUSY`.
    @discardableResult
    public func checkpoint(_ mode: Database.CheckpointMode = .truncate) throws -> (
        walFrameCount: Int, checkpointedFrameCount: Int
    ) {
        try writer.writeWithoutTransaction { db in try checkpoint(mode, db) }
    }

    func checkpoint(_ mode: Database.CheckpointMode, _ db: Database) throws -> (
        walFrameCount: Int, checkpointedFrameCount: Int
    ) {
        guard let checkpointer else { return try db.checkpoint(mode) }
        return try checkpointer.paused { try db.checkpoint(mode) }
    }

    /// Space statistics, vacuum and pruning.
    public var maintenance: DatabaseMaintenance { DatabaseMaintenance(database: self) }
}
