/// How the server keeps blobs (docs/PROTOCOL.md, "Blobs"), from `SYNC_BLOB_*` and `SYNC_UPLOAD_EXPIRY_SECONDS`.
public struct BlobConfiguration: Sendable, Hashable {
    /// Where the bytes go (`SYNC_BLOB_STORE`): `postgres` (the default, `PostgresBlobStore`) or
    /// `directory:/path` (`DirectoryBlobStore`). The metadata is always in PostgreSQL.
    public enum Store: Sendable, Hashable, CustomStringConvertible {
        case postgres
        case directory(String)

        /// Reads `postgres` or `directory:/path`.
        /// - Throws: `ConfigurationError` for anything else.
        public init(parsing text: String) throws(ConfigurationError) {
            if text == "postgres" {
                self = .postgres
            } else if text.hasPrefix("directory:"), text.count > "directory:".count {
                self = .directory(String(text.dropFirst("directory:".count)))
            } else {
                throw ConfigurationError(message: "SYNC_BLOB_STORE must be postgres or directory:/path")
            }
        }

        public var description: String {
            switch self {
            case .postgres: "postgres"
            case .directory(let path): "directory:\(path)"
            }
        }
    }

    public var store: Store = .postgres
    /// The size of every chunk but a blob's last (`SYNC_BLOB_CHUNK_BYTES`, default 4 MiB, 1 KiB to 64 MiB): what
    /// a request holds in memory at most. Sessions keep the size they were opened with. A device has two chunks
    /// of an upload in flight (one arriving while the one before is stored), and the PostgreSQL store copies a
    /// part twice on its way to the database: about six chunks of the server's memory per upload, 24 MiB at
    /// this size.
    public var chunkBytes: Int = 4 << 20
    /// The most bytes of blobs one scope may hold, committed and being uploaded (`SYNC_BLOB_QUOTA_BYTES`,
    /// default 10 GiB); past it, 413 `blob.quotaExceeded`.
    public var quotaBytes: Int64 = 10 << 30
    /// The largest blob (`SYNC_BLOB_MAX_BYTES`, default 4 GiB); past it, 413 `request.tooLarge`.
    public var maxBytes: Int64 = 4 << 30
    /// How long an upload session lives (`SYNC_UPLOAD_EXPIRY_SECONDS`, default 86,400): an uncommitted one is
    /// then deleted with its chunks, a committed one forgotten.
    public var uploadExpirySeconds: Int = 86_400
    /// How long a committed blob that no event refers to is kept before it is collected
    /// (`SYNC_BLOB_COLLECT_AFTER_SECONDS`, default 86,400): time for the device that uploaded it to push the
    /// event that refers to it. A blob whose references compaction released is collected after it too
    /// (`BlobService.collect`).
    public var collectAfterSeconds: Int = 86_400
    /// Seconds between two sweeps of expired sessions and unreferenced blobs (`BlobSweepService`; 0 turns it
    /// off).
    public var sweepIntervalSeconds: Int = 60

    /// The chunk sizes a server accepts in its configuration.
    public static let chunkBytesRange = 1024...(64 << 20)

    public init() {}
}
