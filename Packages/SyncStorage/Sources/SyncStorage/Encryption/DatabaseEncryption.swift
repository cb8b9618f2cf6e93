import CSyncCipher
import Foundation
import GRDB
import GRDBSQLite

/// Encryption at rest of a database file (`StorageConfiguration.encryption`): every page of the file, its WAL
/// and its rollback journal is encrypted and authenticated (ChaCha20-Poly1305, a nonce and tag in each page's
/// reserved bytes, bound to the file and the page number); temporary files stay in memory. A page that does
/// not authenticate (a flipped byte, a page from another file, the wrong key) is an error naming the file and
/// the page, never wrong data. Keys come from `keys`; the first open of a new file makes one, and the first
/// open of a plaintext file encrypts it in place (crash-safely, as `SyncDatabase.encrypt` does).
public struct DatabaseEncryption: Sendable {
    public var keys: any KeyProvider

    public init(keys: any KeyProvider) { self.keys = keys }
}

/// A step of `encrypt` or `rekey`, for tests that crash the process there.
public enum EncryptionStep: String, Sendable, CaseIterable {
    /// Rekey only: the next key is stored beside the current one.
    case nextKeyStored
    /// The old file's WAL is in the file, and the copy is about to start.
    case checkpointed
    /// The encrypted copy is written, not yet synced.
    case copyWritten
    /// The copy is synced, not yet renamed over the file.
    case copySynced
    /// The copy has replaced the file.
    case renamed
    /// Rekey only: the new key is the current one.
    case keyCommitted
}

/// What a database file holds, from its first bytes.
public enum DatabaseFileKind: Sendable, Equatable {
    case missing, plaintext, encrypted
}

extension SyncDatabase {
    static let encryptingSuffix = ".encrypting"
    /// The page versions of an encrypted database: the lowest version each page of the file may have
    /// (docs/ARCHITECTURE.md, "Encryption at rest").
    static let versionsSuffix = "-versions"
    /// The empty file beside the database whose advisory lock (`flock`) the stores opened on it hold for
    /// their lifetime: the first opener alone runs crash recovery (`EventStore.openedFirst`). Not the database
    /// file itself, whose descriptors must stay SQLite's own (closing any descriptor of a file drops every
    /// POSIX lock the process holds on it). No name SQLite uses (`-journal`, `-wal`, `-shm`, `-mj…`; the
    /// dot-file locking VFS's `.lock`).
    public static let lockSuffix = "-lock"
    /// The files of a database beside the main file.
    static let companionSuffixes = ["-journal", "-wal", "-shm", versionsSuffix, lockSuffix]

    /// Removes the database at `path` and the files beside it: journal, WAL, shared memory, page versions, the
    /// openers' lock file and the copies of page versions a process was writing when it stopped. The database
    /// must not be open. For
    /// an encrypted database whose data must become unreadable, `destroy(path:keys:)` destroys the key first.
    public static func removeWithCompanions(_ path: String) throws {
        for suffix in [""] + companionSuffixes where DurableFile.exists(path + suffix) {
            try DurableFile.remove(path + suffix)
        }
        try removeVersionsCopies(of: path)
    }

    /// Removes the copies of `path`'s page versions that a process stopped before renaming
    /// (`<path>-versions.<pid>.tmp`). One that a live process is writing only makes that save fail: it is made
    /// again later.
    static func removeVersionsCopies(of path: String) throws {
        let url = URL(fileURLWithPath: path)
        let prefix = url.lastPathComponent + versionsSuffix + "."
        let directory = url.deletingLastPathComponent().path
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        where name.hasPrefix(prefix) && name.hasSuffix(".tmp") {
            try DurableFile.remove(directory + "/" + name)
        }
    }

    /// Whether the file at `path` is absent, plain SQLite, or not (encrypted, or not a database).
    public static func fileKind(at path: String) throws -> DatabaseFileKind {
        guard let size = DurableFile.size(path), size > 0 else { return .missing }
        let header = try DurableFile.prefix(path, count: 16)
        return header == PageCipher.sqliteHeader ? .plaintext : .encrypted
    }

    /// Makes `path` ready to open encrypted and registers it: a missing file gets a new key, a plaintext one is
    /// encrypted in place, an encrypted one is opened with the current key or, after a rekey that crashed
    /// once the file was rewritten, with the next one.
    static func prepareEncrypted(path: String, encryption: DatabaseEncryption) throws -> CipherRegistration {
        try removeLeftovers(of: path)
        var keys = try encryption.keys.load()
        if keys == DatabaseKeys() {
            keys = try encryption.keys.storeIfEmpty(DatabaseKeys(current: .random()))
        }
        switch try fileKind(at: path) {
        case .missing:
            guard let key = keys.current ?? keys.next else { throw noKey(path) }
            return try CipherRegistration(path: path, key: key)
        case .plaintext:
            guard let key = keys.current else { throw noKey(path) }
            try encryptPlaintext(path: path, key: key, onStep: { _ in })
            return try CipherRegistration(path: path, key: key)
        case .encrypted:
            let page = try DurableFile.prefix(path, count: PageCipher.pageSize)
            if let current = keys.current, PageCipher.firstPageOpens(page, with: current) {
                if keys.next != nil {
                    keys.next = nil  // a rekey that stopped before its copy replaced the file
                    try encryption.keys.store(keys)
                }
                return try CipherRegistration(path: path, key: current)
            }
            if let next = keys.next, PageCipher.firstPageOpens(page, with: next) {
                try encryption.keys.store(DatabaseKeys(current: next))  // a rekey that stopped after the rename
                return try CipherRegistration(path: path, key: next)
            }
            throw StorageError(
                code: "storage.wrongKey",
                message: keys.current == nil && keys.next == nil
                    ? "\(path) is encrypted (or not a database) and no key is stored for it"
                    : "the key does not open \(path) (another key's file, or its first page is damaged)")
        }
    }

    static func noKey(_ path: String) -> StorageError {
        StorageError(code: "storage.wrongKey", message: "no current key is stored for \(path)")
    }

    /// Removes what an `encrypt` or `rekey` that stopped left beside `path`, and copies of its page versions that
    /// a process stopped before renaming.
    static func removeLeftovers(of path: String) throws {
        try removeWithCompanions(path + encryptingSuffix)
        try removeVersionsCopies(of: path)
    }

    /// Encrypts the plaintext database at `path` under the key of `keys` (made and stored if there is none),
    /// in place of itself. The file must not be open. A crash at any instant leaves the plaintext file or the
    /// encrypted one, complete: the copy is written beside it, synced, then renamed over it.
    /// - Throws: `StorageError` if the file is not plain SQLite, or a `DatabaseError`.
    public static func encrypt(
        path: String, keys: any KeyProvider, onStep: (EncryptionStep) throws -> Void = { _ in }
    ) throws {
        try removeLeftovers(of: path)
        guard try fileKind(at: path) == .plaintext else {
            throw StorageError(code: "storage.encryption", message: "\(path) is not a plaintext database")
        }
        var stored = try keys.load()
        if stored == DatabaseKeys() { stored = try keys.storeIfEmpty(DatabaseKeys(current: .random())) }
        guard let key = stored.current else { throw noKey(path) }
        try encryptPlaintext(path: path, key: key, onStep: onStep)
    }

    /// Re-encrypts the database at `path` under `newKey` (a fresh random key by default), in place of itself.
    /// The file must not be open. The next key is stored before the file is rewritten and becomes the
    /// current one after: a crash at any instant leaves a file that opens under exactly one of the two keys
    /// with all its data, and the next `SyncDatabase` open finishes the bookkeeping.
    public static func rekey(
        path: String, keys: any KeyProvider, to newKey: DatabaseKey = .random(),
        onStep: (EncryptionStep) throws -> Void = { _ in }
    ) throws {
        let encryption = DatabaseEncryption(keys: keys)
        let registration = try prepareEncrypted(path: path, encryption: encryption)
        var stored = try keys.load()
        stored.next = newKey
        try keys.store(stored)
        try onStep(.nextKeyStored)
        try rewrite(path: path, from: registration, to: newKey, onStep: onStep)
        try keys.store(DatabaseKeys(current: newKey))
        try onStep(.keyCommitted)
    }

    /// Logout: destroys the key first (crypto-shredding: from then on no copy of the files can be read,
    /// a backup included), then removes the database's files. The database must not be open.
    public static func destroy(path: String, keys: any KeyProvider) throws {
        try keys.destroy()
        try removeLeftovers(of: path)
        try removeWithCompanions(path)
    }

    private static func encryptPlaintext(path: String, key: DatabaseKey, onStep: (EncryptionStep) throws -> Void)
        throws
    {
        // The plaintext file through SQLite's own VFS (it is not registered), its WAL moved into it.
        try rewrite(path: path, from: nil, to: key, onStep: onStep)
    }

    /// Copies the database at `path` (read under `registration`'s key, or as plaintext) into an encrypted copy
    /// under `key`, then renames the copy over it.
    private static func rewrite(
        path: String, from registration: CipherRegistration?, to key: DatabaseKey,
        onStep: (EncryptionStep) throws -> Void
    ) throws {
        let copy = path + encryptingSuffix
        // The VFS must be SQLite's default before the source connection opens: a connection keeps the VFS it
        // opened with, and `VACUUM INTO` writes through it.
        try CipherRegistration.install()
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
        }
        do {
            let source = try DatabaseQueue(path: path, configuration: configuration)
            try source.writeWithoutTransaction { db in
                _ = try db.checkpoint(.truncate)
                try setReserve(db)
            }
            try onStep(.checkpointed)
            let target = try CipherRegistration(path: copy, key: key)
            try source.writeWithoutTransaction { db in
                try db.execute(sql: "VACUUM INTO ?", arguments: [copy])
            }
            withExtendedLifetime(target) {}
            try source.close()
        }
        try onStep(.copyWritten)
        guard try fileKind(at: copy) == .encrypted,
            PageCipher.firstPageOpens(try DurableFile.prefix(copy, count: PageCipher.pageSize), with: key)
        else {
            try removeLeftovers(of: path)
            throw StorageError(code: "storage.encryption", message: "the copy of \(path) did not come out encrypted")
        }
        try DurableFile.sync(copy)
        try onStep(.copySynced)
        for suffix in ["-wal", "-shm"] where DurableFile.exists(path + suffix) {
            // The closed source's WAL is empty (checkpointed); a plaintext one must not be read as the copy's.
            try DurableFile.remove(path + suffix)
        }
        try DurableFile.rename(copy, to: path)
        // The copy's page versions go with it (the old file's are another salt's: ignored if they stayed).
        if DurableFile.exists(copy + versionsSuffix) {
            try DurableFile.rename(copy + versionsSuffix, to: path + versionsSuffix)
        }
        withExtendedLifetime(registration) {}
        try onStep(.renamed)
    }

    /// Room for the nonce and tag in every page of a file this connection creates (or copies with `VACUUM`).
    static func setReserve(_ db: Database) throws {
        var reserve = Int32(PageCipher.reserve)
        let code = sqlite3_file_control(db.sqliteConnection, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve)
        guard code == SQLITE_OK else {
            throw StorageError(code: "storage.encryption", message: "SQLite cannot reserve page bytes (\(code))")
        }
    }

    /// The page that failed authentication behind `error`, named: the file and the page (the frame, for a
    /// WAL). Nil when `error` is not such a failure.
    public func authenticationFailure(_ error: any Error) -> StorageError? {
        Self.authenticationFailure(error, path: path)
    }

    static func authenticationFailure(_ error: any Error, path: String) -> StorageError? {
        guard let error = error as? DatabaseError,
            error.extendedResultCode.rawValue == ResultCode.SQLITE_IOERR.rawValue | (32 << 8),  // SQLITE_IOERR_DATA
            let failure = CipherRegistration.lastFailure(path: path)
        else { return nil }
        let what = failure.file.hasSuffix("-wal") ? "frame" : "page"
        switch failure.reason {
        case SyncCipherFailureOlderVersion:
            return StorageError(
                code: "storage.pageVersion",
                message: "page \(failure.page) of \(failure.file) is older than the version recorded for it in"
                    + " \(path)\(versionsSuffix): the page, or the file, was restored from an older copy",
                underlying: error)
        case SyncCipherFailureVersionsDamaged:
            return StorageError(
                code: "storage.pageVersion",
                message: "\(failure.file) does not authenticate (damaged, replaced, or another key's), so no page"
                    + " of \(path) is read (page \(failure.page) was asked for); removing it accepts the file's"
                    + " pages as they are", underlying: error)
        default:
            return StorageError(
                code: "storage.pageAuthentication",
                message: "\(what) \(failure.page) of \(failure.file) fails authentication: damaged, replaced, or"
                    + " encrypted under another key", underlying: error)
        }
    }

    /// Reads every page of the database (`PRAGMA integrity_check` through the cipher): SQLite's own findings,
    /// or, for an encrypted file, the first page that does not authenticate, named.
    /// - Returns: an empty array when every page reads and SQLite finds the file consistent.
    public func verifyPages() async throws -> [String] {
        do {
            return try await read { db in
                let rows = try String.fetchAll(db, sql: "PRAGMA integrity_check")
                return rows == ["ok"] ? [] : rows
            }
        } catch {
            if let failure = authenticationFailure(error) { throw failure }
            throw error
        }
    }
}
