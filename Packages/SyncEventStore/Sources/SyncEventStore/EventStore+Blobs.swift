import GRDB
import SyncModels

/// What the store keeps about blobs (an attachment's bytes, named by their SHA-256): the tables the blob queue
/// of `SyncEngine` (`LocalBlobs`, `BlobSync`) works on, and the one rule the outbox follows.
///
/// **The rule: an event leaves the outbox only once the server holds every blob it refers to.** A draft names
/// its blobs (`EventDraft.blobs`); the append records each one the server does not hold yet in the event's
/// scope (`outbox_blobs`), and the engine's push stops before the first pending event with such a blob
/// (`outboxSnapshot`). Once the upload is committed the blob is marked `uploaded` and the events behind it go
/// out. So no device ever receives a reference to a blob the server cannot give it, and an attachment made
/// offline is pushed after its bytes, whenever the device is back. The cost: pending events written after an
/// attachment wait for its upload (the outbox keeps its order). A push the server answers `blob.missing` (the
/// blob was collected, or never arrived) puts the blob back in the queue and keeps the event pending, as long
/// as the device still has the bytes; without them the event is rejected like any other.
///
/// Tables (migration `eventstore.v9.blobs`):
/// - `local_blobs (scope, hash)`: a blob this device uploads or has uploaded to a scope: size, media type,
///   `uploaded` once the server committed it there, and the open upload session with the bytes the server
///   acknowledged (`upload_id`, `chunk_size`, `sent_bytes`), so an upload resumes after a restart;
/// - `blob_files (hash)`: the blobs whose bytes are in the device's blob directory (`present`), pinned or not,
///   and when each was last used (for the cache's least-recently-used eviction);
/// - `outbox_blobs (position, scope, hash)`: the blobs each pending event refers to.
extension EventStore {
    /// The rejection code of an event that refers to a blob the server does not hold (protocol v1's
    /// `blob.missing`).
    static let blobMissingCode = "blob.missing"

    static func createBlobTables(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE local_blobs (
                    scope TEXT NOT NULL,
                    hash TEXT NOT NULL,
                    size INTEGER NOT NULL,
                    type TEXT NOT NULL,
                    uploaded INTEGER NOT NULL DEFAULT 0,
                    upload_id TEXT,
                    chunk_size INTEGER,
                    sent_bytes INTEGER NOT NULL DEFAULT 0,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    last_error TEXT,
                    PRIMARY KEY (scope, hash)
                ) WITHOUT ROWID;
                CREATE INDEX local_blobs_pending ON local_blobs (uploaded, scope, hash);
                CREATE TABLE blob_files (
                    hash TEXT PRIMARY KEY,
                    size INTEGER NOT NULL,
                    present INTEGER NOT NULL DEFAULT 0,
                    pinned INTEGER NOT NULL DEFAULT 0,
                    used_at INTEGER NOT NULL DEFAULT 0
                ) WITHOUT ROWID;
                CREATE INDEX blob_files_lru ON blob_files (present, pinned, used_at);
                CREATE TABLE outbox_blobs (
                    position INTEGER NOT NULL,
                    scope TEXT NOT NULL,
                    hash TEXT NOT NULL,
                    PRIMARY KEY (position, scope, hash)
                ) WITHOUT ROWID;
                CREATE INDEX outbox_blobs_blob ON outbox_blobs (scope, hash);
                """)
    }

    /// Records that the pending event at `position` refers to `blobs` in `scope`; a blob the device has not
    /// uploaded there yet joins the upload queue.
    static func holdForBlobs(_ position: Int64, _ scope: Scope, _ blobs: [BlobReference], _ db: Database) throws {
        for blob in blobs {
            try db.cachedStatement(
                sql: "INSERT OR IGNORE INTO outbox_blobs (position, scope, hash) VALUES (?, ?, ?)"
            ).execute(arguments: [position, scope.name, blob.hash.hex])
            try db.cachedStatement(
                sql: "INSERT OR IGNORE INTO local_blobs (scope, hash, size, type) VALUES (?, ?, ?, ?)"
            ).execute(arguments: [scope.name, blob.hash.hex, blob.size, blob.type])
        }
    }

    /// The position of the first pending event that refers to a blob the server does not hold yet, or nil.
    static func firstHeldForBlobs(_ db: Database) throws -> Int64? {
        try Int64.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT min(o.position) FROM outbox_blobs o
                    JOIN local_blobs b ON b.scope = o.scope AND b.hash = o.hash
                    WHERE b.uploaded = 0
                    """))
    }

    /// After a `blob.missing` rejection of the pending event at `position`: puts its blobs back in the upload
    /// queue when the device still has every one's bytes, and says whether it did (the event then stays
    /// pending).
    static func requeueBlobs(ofPending position: Int64, _ db: Database) throws -> Bool {
        let blobs = try Row.fetchAll(
            db,
            sql: """
                SELECT o.scope, o.hash, f.present FROM outbox_blobs o
                LEFT JOIN blob_files f ON f.hash = o.hash WHERE o.position = ?
                """, arguments: [position])
        guard !blobs.isEmpty, blobs.allSatisfy({ ($0["present"] as Int?) == 1 }) else { return false }
        for blob in blobs {
            try db.execute(
                sql: """
                    UPDATE local_blobs SET uploaded = 0, upload_id = NULL, chunk_size = NULL, sent_bytes = 0
                    WHERE scope = ? AND hash = ?
                    """, arguments: [blob["scope"], blob["hash"]])
        }
        return true
    }

    /// Forgets which blobs pending events referred to once those events are no longer pending (confirmed, or
    /// rejected): called when an upload completes, so the table holds about the outbox's references.
    public static func forgetSettledBlobHolds(_ db: Database) throws {
        try db.execute(
            sql: """
                DELETE FROM outbox_blobs WHERE NOT EXISTS (
                    SELECT 1 FROM events e WHERE e.position = outbox_blobs.position AND e.status = 'pending')
                """)
    }
}
