import Crypto
import Foundation
import GRDB
import SyncEventStore
import SyncModels
import SyncStorage

/// The device's blob files: a directory beside the SQLite file holding blobs by hash, what the store knows
/// about them (`EventStore+Blobs.swift`), and a byte bound on what it keeps of blobs it can fetch again.
///
/// A blob added here (an attachment made on this device) is readable at once, offline, and stays until the
/// server holds it and the events referring to it are pushed: the cache never evicts a blob waiting for its
/// upload or referred to by a pending event, nor a pinned one. Others (uploaded,
/// or downloaded) are evicted least recently used first once the directory holds more than `cacheBytes`.
/// Files are written under a temporary name, flushed and renamed, so a crash leaves either the whole blob or
/// none; a download in progress keeps its bytes in `HASH.part`, where the next attempt resumes.
public final class LocalBlobs: Sendable {
    public let directory: URL
    let store: EventStore
    let database: SyncDatabase
    /// The most bytes of evictable blobs kept (pending uploads and pinned blobs do not count against it
    /// being exceeded: they are never evicted).
    public let cacheBytes: Int64
    /// The bytes read at once while hashing or copying a file.
    static let pieceBytes = 1 << 20

    /// - Parameters:
    ///   - store: the device's store, whose database holds the blob tables.
    ///   - directory: where the files go; by default `<database path>.blobs`.
    ///   - cacheBytes: the bound on evictable blobs (default 512 MiB).
    public init(store: EventStore, directory: URL? = nil, cacheBytes: Int64 = 512 << 20) throws {
        self.store = store
        self.database = store.database
        self.directory = directory ?? URL(fileURLWithPath: store.database.path + ".blobs")
        self.cacheBytes = cacheBytes
        try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
    }

    /// The file of a blob whose bytes are here.
    public func fileURL(_ hash: BlobHash) -> URL { directory.appendingPathComponent(hash.hex) }
    /// Where a download of `hash` keeps what has arrived.
    func partialURL(_ hash: BlobHash) -> URL { directory.appendingPathComponent(hash.hex + ".part") }

    // MARK: Adding

    /// Copies the file at `source` into the blob directory, hashing it on the way (a piece at a time, never
    /// the whole file in memory), and returns its reference. The blob is readable at once; it joins the
    /// upload queue when an event referring to it is appended (`EventDraft.blobs`).
    /// - Throws: the file system's error; nothing is kept then.
    public func add(file source: URL, type: String = "application/octet-stream") async throws -> BlobReference {
        let input = try FileHandle(forReadingFrom: source)
        defer { try? input.close() }
        let temporary = directory.appendingPathComponent("add-\(UUID().uuidString).tmp")
        _ = FileManager.default.createFile(atPath: temporary.path, contents: nil)
        do {
            let output = try FileHandle(forWritingTo: temporary)
            var hasher = SHA256()
            var size: Int64 = 0
            do {
                while let piece = try input.read(upToCount: Self.pieceBytes), !piece.isEmpty {
                    hasher.update(data: piece)
                    try output.write(contentsOf: piece)
                    size += Int64(piece.count)
                }
                try output.synchronize()
                try output.close()
            } catch {
                try? output.close()
                throw error
            }
            let reference = BlobReference(hash: BlobHash(digest: hasher.finalize()), size: size, type: type)
            try await place(temporary, as: reference.hash, size: size)
            return reference
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw error
        }
    }

    /// `add(file:type:)` for bytes in memory.
    public func add(data: Data, type: String = "application/octet-stream") async throws -> BlobReference {
        let temporary = directory.appendingPathComponent("add-\(UUID().uuidString).tmp")
        try data.write(to: temporary)
        defer { try? FileManager.default.removeItem(at: temporary) }
        return try await add(file: temporary, type: type)
    }

    /// Moves a complete file into place as blob `hash` and records it present.
    func place(_ file: URL, as hash: BlobHash, size: Int64) async throws {
        let target = fileURL(hash)
        if FileManager.default.fileExists(atPath: target.path) {
            try FileManager.default.removeItem(at: file)
        } else {
            try FileManager.default.moveItem(at: file, to: target)
        }
        let now = Self.now()
        try await database.writer.write { db in
            try db.execute(
                sql: """
                    INSERT INTO blob_files (hash, size, present, used_at) VALUES (?, ?, 1, ?)
                    ON CONFLICT (hash) DO UPDATE SET present = 1, size = excluded.size, used_at = excluded.used_at
                    """, arguments: [hash.hex, size, now])
        }
    }

    // MARK: Reading

    /// The file of blob `hash` when its bytes are here (and marks it used), else nil.
    public func file(_ hash: BlobHash) async throws -> URL? {
        let url = fileURL(hash)
        // The row decides, not the file system: eviction marks a blob absent before it removes the file.
        let now = Self.now()
        let present = try await database.writer.write { db -> Bool in
            try db.execute(
                sql: "UPDATE blob_files SET used_at = ? WHERE hash = ? AND present = 1",
                arguments: [now, hash.hex])
            return db.changesCount > 0
        }
        guard present, FileManager.default.fileExists(atPath: url.path) else { return nil }
        return url
    }

    /// The SHA-256 of a file, read a piece at a time.
    public static func hash(of file: URL) throws -> (hash: BlobHash, size: Int64) {
        let input = try FileHandle(forReadingFrom: file)
        defer { try? input.close() }
        var hasher = SHA256()
        var size: Int64 = 0
        while let piece = try input.read(upToCount: pieceBytes), !piece.isEmpty {
            hasher.update(data: piece)
            size += Int64(piece.count)
        }
        return (BlobHash(digest: hasher.finalize()), size)
    }

    // MARK: Pins and the cache

    /// Pins (or unpins) blob `hash`: a pinned blob is never evicted, and `BlobSync.prefetchPinned` fetches
    /// the pinned blobs that are not here yet.
    public func pin(_ hash: BlobHash, size: Int64, _ pinned: Bool = true) async throws {
        try await database.writer.write { db in
            try db.execute(
                sql: """
                    INSERT INTO blob_files (hash, size, present, pinned) VALUES (?, ?, 0, ?)
                    ON CONFLICT (hash) DO UPDATE SET pinned = excluded.pinned
                    """, arguments: [hash.hex, size, pinned])
        }
    }

    /// The pinned blobs whose bytes are not here.
    public func pinnedMissing() async throws -> [(hash: BlobHash, size: Int64)] {
        try await database.read { db in
            try Row.fetchAll(db, sql: "SELECT hash, size FROM blob_files WHERE pinned = 1 AND present = 0").compactMap {
                row in (try? BlobHash(row["hash"] as String)).map { ($0, row["size"] as Int64) }
            }
        }
    }

    /// The bytes of blobs here, and of those the cache may evict.
    public func usage() async throws -> (total: Int64, evictable: Int64) {
        try await database.read { db in
            let total = try Int64.fetchOne(db, sql: "SELECT coalesce(sum(size), 0) FROM blob_files WHERE present = 1")
            let evictable = try Int64.fetchOne(
                db, sql: "SELECT coalesce(sum(size), 0) FROM blob_files f WHERE \(Self.evictable)")
            return (total ?? 0, evictable ?? 0)
        }
    }

    /// Which present blobs the cache may drop: not pinned, not waiting for an upload, and not referred to by a
    /// pending event (if the server collected it before that event arrives, the device uploads it again).
    static let evictable = """
        f.present = 1 AND f.pinned = 0
        AND NOT EXISTS (SELECT 1 FROM local_blobs b WHERE b.hash = f.hash AND b.uploaded = 0)
        AND NOT EXISTS (
            SELECT 1 FROM outbox_blobs o JOIN events e ON e.position = o.position
            WHERE o.hash = f.hash AND e.status = 'pending')
        """

    /// Deletes the least recently used evictable blobs until those left take at most `cacheBytes`.
    /// - Returns: the bytes freed.
    @discardableResult
    public func evict() async throws -> Int64 {
        let cacheBytes = cacheBytes
        let victims = try await database.read { db -> [(String, Int64)] in
            var kept =
                try Int64.fetchOne(
                    db, sql: "SELECT coalesce(sum(size), 0) FROM blob_files f WHERE \(Self.evictable)") ?? 0
            var victims: [(String, Int64)] = []
            guard kept > cacheBytes else { return [] }
            let rows = try Row.fetchCursor(
                db, sql: "SELECT hash, size FROM blob_files f WHERE \(Self.evictable) ORDER BY used_at, hash")
            while kept > cacheBytes, let row = try rows.next() {
                victims.append((row["hash"], row["size"]))
                kept -= row["size"] as Int64
            }
            return victims
        }
        var freed: Int64 = 0
        for (hash, size) in victims {
            // Marked absent first, and only if it is still evictable (an attachment of the same bytes made
            // since the choice keeps it): a reader never gets a file that is being removed.
            let marked = try await database.writer.write { db -> Bool in
                try db.execute(
                    sql:
                        "UPDATE blob_files SET present = 0 WHERE hash = ? AND hash IN (SELECT f.hash FROM blob_files f WHERE \(Self.evictable))",
                    arguments: [hash])
                return db.changesCount > 0
            }
            guard marked else { continue }
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(hash))
            freed += size
        }
        return freed
    }

    /// Milliseconds since 1970, for `used_at`.
    static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}
