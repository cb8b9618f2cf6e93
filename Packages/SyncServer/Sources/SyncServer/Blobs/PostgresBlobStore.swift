import Foundation
import Logging
import NIOCore
import PostgresNIO
import SyncModels

/// The default `BlobStore`: parts as `bytea` rows of `blob_parts` in the server's own database (migration
/// `0009-blobs`), keyed by scope first so that Citus keeps a scope's bytes on its worker.
///
/// An upload's parts carry its id in `upload`; a committed blob's parts carry the nil UUID, which no session
/// has. Promotion rewrites that column in one transaction, which copies no bytes: PostgreSQL keeps the bytes
/// of an unchanged out-of-line value where they are. The bytes are stored uncompressed and out of line, so a
/// range read fetches only what it covers. Simple to run (one database to back up), at the cost of database
/// storage and WAL for every byte; `DirectoryBlobStore` or an object store suits large volumes better.
public struct PostgresBlobStore: BlobStore {
    let database: Database
    let logger: Logger

    /// PostgreSQL answers a part in several milliseconds, mostly moving its bytes: two reads ahead overlap one
    /// another as well as the writes (a download of the PostgreSQL store ran 0.34 s with one, 0.25 s with two).
    public var partsAhead: Int { 2 }

    /// The `upload` of a committed blob's parts.
    static let committed = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

    init(database: Database, logger: Logger) {
        self.database = database
        self.logger = logger
    }

    /// Committed without waiting for the WAL to reach the disk (`synchronous_commit = off`): a crash may lose
    /// the last parts written, and the record that they arrived with them (`BlobService.receive` records it
    /// after, the same way, and the WAL keeps their order), so the session asks for them again; the commit of
    /// the upload waits for the WAL, and with it for every part before it. The upload's disk writes then
    /// overlap the transfer instead of waiting for each chunk.
    public func writeUploadPart(_ bytes: ByteBuffer, part: Int, of upload: BlobUploadKey) async throws {
        try await database.withTransaction(logger: logger) { [logger] connection in
            _ = try await connection.checkedQuery("SET LOCAL synchronous_commit = off", logger: logger)
            _ = try await connection.checkedQuery(
                """
                INSERT INTO blob_parts (scope, hash, upload, part, bytes)
                VALUES (\(upload.scope.name), \(upload.hash.hex), \(upload.id), \(Int32(part)), \(bytes))
                ON CONFLICT (scope, hash, upload, part) DO UPDATE SET bytes = EXCLUDED.bytes
                """, logger: logger)
        }
    }

    public func readUploadPart(_ part: Int, of upload: BlobUploadKey) async throws -> ByteBuffer? {
        try await database.withConnection { [logger] connection in
            let rows = try await connection.checkedQuery(
                """
                SELECT bytes FROM blob_parts
                WHERE scope = \(upload.scope.name) AND hash = \(upload.hash.hex) AND upload = \(upload.id)
                  AND part = \(Int32(part))
                """, logger: logger)
            for try await bytes in rows.decode(ByteBuffer.self) { return bytes }
            return nil
        }
    }

    public func promote(_ upload: BlobUploadKey, parts: Int) async throws -> Bool {
        try await database.withTransaction(logger: logger) { [logger] connection in
            // Locks the upload's parts: a second commit of the same session waits here, then finds none.
            let rows = try await connection.checkedQuery(
                """
                SELECT part FROM blob_parts
                WHERE scope = \(upload.scope.name) AND hash = \(upload.hash.hex) AND upload = \(upload.id)
                  AND part < \(Int32(parts))
                FOR UPDATE
                """, logger: logger)
            var held = 0
            for try await _ in rows.decode(Int32.self) { held += 1 }
            guard held == parts else { return false }
            try await connection.checkedQuery(
                """
                DELETE FROM blob_parts
                WHERE scope = \(upload.scope.name) AND hash = \(upload.hash.hex) AND upload = \(Self.committed)
                """, logger: logger)
            try await connection.checkedQuery(
                """
                UPDATE blob_parts SET upload = \(Self.committed)
                WHERE scope = \(upload.scope.name) AND hash = \(upload.hash.hex) AND upload = \(upload.id)
                """, logger: logger)
            return true
        }
    }

    public func readPart(_ part: Int, range: Range<Int>, of hash: BlobHash, in scope: Scope) async throws
        -> ByteBuffer?
    {
        try await database.withConnection { [logger] connection in
            let rows = try await connection.checkedQuery(
                """
                SELECT substring(bytes FROM \(Int32(range.lowerBound + 1)) FOR \(Int32(range.count))) FROM blob_parts
                WHERE scope = \(scope.name) AND hash = \(hash.hex) AND upload = \(Self.committed)
                  AND part = \(Int32(part))
                """, logger: logger)
            for try await bytes in rows.decode(ByteBuffer.self) { return bytes }
            return nil
        }
    }

    public func deleteUpload(_ upload: BlobUploadKey) async throws {
        try await database.withConnection { [logger] connection in
            _ = try await connection.checkedQuery(
                """
                DELETE FROM blob_parts
                WHERE scope = \(upload.scope.name) AND hash = \(upload.hash.hex) AND upload = \(upload.id)
                """, logger: logger)
        }
    }

    public func deleteBlob(_ hash: BlobHash, in scope: Scope) async throws {
        try await database.withConnection { [logger] connection in
            _ = try await connection.checkedQuery(
                """
                DELETE FROM blob_parts
                WHERE scope = \(scope.name) AND hash = \(hash.hex) AND upload = \(Self.committed)
                """, logger: logger)
        }
    }
}
