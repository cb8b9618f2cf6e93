extension Migration {
    /// Blobs (docs/PROTOCOL.md, "Blobs"): the committed blobs of each scope, the upload sessions with the chunks
    /// each has received, the blobs accepted events refer to (for a later collection of unreferenced blobs), and
    /// the bytes themselves when `PostgresBlobStore` keeps them (`blob_parts`; empty with another store).
    ///
    /// Every table is keyed by scope first, so that Citus distributes them by scope, co-located with `scopes`
    /// (`CitusDistribution`): an upload session's key is `(scope, id)`, not its id alone, and a lookup by id
    /// names the token's scopes. At most one session per scope and hash is open (not committed) at a time. The
    /// bytes of `blob_parts` are stored uncompressed and out of line (`EXTERNAL`): most blobs are compressed
    /// already, and a range read then fetches only the TOAST chunks it covers.
    static let blobs = Migration(
        id: "0009-blobs",
        statements: [
            """
            CREATE TABLE blobs (
                scope text NOT NULL,
                hash text NOT NULL,
                size bigint NOT NULL,
                type text NOT NULL,
                chunk_size integer NOT NULL,
                committed_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (scope, hash)
            )
            """,
            """
            CREATE TABLE blob_uploads (
                scope text NOT NULL,
                id uuid NOT NULL,
                hash text NOT NULL,
                size bigint NOT NULL,
                type text NOT NULL,
                chunk_size integer NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                expires_at timestamptz NOT NULL,
                committed_at timestamptz,
                PRIMARY KEY (scope, id)
            )
            """,
            "CREATE UNIQUE INDEX blob_uploads_open ON blob_uploads (scope, hash) WHERE committed_at IS NULL",
            "CREATE INDEX blob_uploads_expiry ON blob_uploads (expires_at)",
            """
            CREATE TABLE blob_upload_parts (
                scope text NOT NULL,
                upload uuid NOT NULL,
                part integer NOT NULL,
                PRIMARY KEY (scope, upload, part)
            )
            """,
            """
            CREATE TABLE blob_refs (
                scope text NOT NULL,
                hash text NOT NULL,
                event_id uuid NOT NULL,
                PRIMARY KEY (scope, hash, event_id)
            )
            """,
            """
            CREATE TABLE blob_parts (
                scope text NOT NULL,
                hash text NOT NULL,
                upload uuid NOT NULL,
                part integer NOT NULL,
                bytes bytea NOT NULL,
                PRIMARY KEY (scope, hash, upload, part)
            )
            """,
            "ALTER TABLE blob_parts ALTER COLUMN bytes SET STORAGE EXTERNAL",
        ])

    /// Collection of unreferenced blobs (`BlobService.collect`): compaction releases the references of the
    /// events it folds away by event id, and records those of the snapshots it writes.
    static let blobCollection = Migration(
        id: "0010-blob-collection",
        statements: ["CREATE INDEX blob_refs_event ON blob_refs (scope, event_id)"])

    /// The SHA-256 of each chunk an upload received, so that a commit can trust the running hash of the chunks
    /// one server stored (`UploadDigests`) only when every part is the one that server hashed.
    static let uploadPartHashes = Migration(
        id: "0011-upload-part-hashes",
        statements: ["ALTER TABLE blob_upload_parts ADD COLUMN sha256 text"])
}
