import Crypto
import Foundation
import Logging
import NIOCore
import PostgresNIO
import SyncModels
import SyncProtocol

/// Upload sessions and committed blobs (docs/PROTOCOL.md, "Blobs"): the metadata in PostgreSQL (migration
/// `0009-blobs`), the bytes in a `BlobStore`.
///
/// A session uploads one blob of one scope in chunks, in any order, each checked against its own SHA-256 and
/// stored as a part of the upload; the commit checks the whole blob's SHA-256 (the running hash of the chunks
/// when this server stored them all in order, `UploadDigests`, else the parts read back in order), and only
/// when it matches the blob's name does the store promote them and the blob become readable. A
/// scope holds each blob once: asking to upload a blob it holds answers `committed` at once, and at most one
/// session per scope and hash is open. The token's scopes are its rights, for reading and writing alike, as for
/// push and pull: a session of a scope the token does not name is answered as if it did not exist.
struct BlobService: Sendable {
    let database: Database
    let store: any BlobStore
    let configuration: BlobConfiguration
    let metrics: ServerMetrics
    /// The running hash of the uploads whose chunks this server stored in order.
    var digests = UploadDigests()

    /// The first key of the advisory lock that serialises the opening of sessions in a scope (the second is
    /// the scope's hash), so that two requests cannot both pass the quota with the bytes of one.
    static let lockKey: Int32 = 0x5342  // "SB"

    /// An upload session as stored.
    struct Session: Sendable {
        var key: BlobUploadKey
        var size: Int64
        var type: String
        var chunkSize: Int
        var expiresAt: Date
        var committed: Bool
        /// The chunks received, in order.
        var received: [Int]
        /// The SHA-256 recorded for each chunk received (none for a part recorded before migration
        /// `0011-upload-part-hashes`).
        var receivedHashes: [Int: BlobHash] = [:]

        var chunks: Int { UploadState.chunkCount(size: size, chunkSize: chunkSize) }

        var missing: [Int] {
            let have = Set(received)
            return (0..<chunks).filter { !have.contains($0) }
        }

        var state: UploadState {
            UploadState(
                upload: key.id.uuidString.lowercased(), scope: key.scope, hash: key.hash, size: size, type: type,
                chunkSize: chunkSize, missing: committed ? [] : missing, committed: committed,
                expiresAt: committed ? nil : expiresAt.formatted(.iso8601))
        }
    }

    /// A committed blob.
    struct StoredBlob: Sendable, Hashable {
        var scope: Scope
        var hash: BlobHash
        var size: Int64
        var type: String
        var chunkSize: Int

        /// The parts that hold `range` of the blob, each with the range within the part.
        func parts(covering range: Range<Int64>) -> [(part: Int, range: Range<Int>)] {
            guard !range.isEmpty, chunkSize > 0 else { return [] }
            let size = Int64(chunkSize)
            return (Int(range.lowerBound / size)...Int((range.upperBound - 1) / size)).map { part in
                let start = Int64(part) * size
                let lower = max(range.lowerBound, start) - start
                let upper = min(range.upperBound, start + size) - start
                return (part, Int(lower)..<Int(upper))
            }
        }
    }

    // MARK: Sessions

    /// `POST /v1/uploads`: the scope's blob if it holds it, else its open session for the hash, else a new one.
    /// - Throws: `request.invalid` for a bad size or type, `scope.forbidden` for a scope not in the token,
    ///   `request.tooLarge` past the largest blob, `blob.quotaExceeded` past the scope's quota.
    func open(_ request: UploadRequest, identity: TokenIdentity, logger: Logger) async throws -> UploadState {
        try request.validate()
        guard identity.scopes.contains(request.scope) else {
            throw SyncProtocolError(.scopeForbidden, "scope \(request.scope) is not in the token")
        }
        guard request.size <= configuration.maxBytes else {
            throw SyncProtocolError.tooLarge("a blob is at most \(configuration.maxBytes) bytes")
        }
        let opened = try await database.withTransaction(logger: logger) { [self] connection in
            try await open(request, on: connection, logger: logger)
        }
        for stale in opened.stale { try? await store.deleteUpload(stale) }
        metrics.recordUpload(opened.outcome)
        return opened.state
    }

    /// What opening a session did.
    private struct Opened: Sendable {
        var state: UploadState
        var outcome: ServerMetrics.UploadOutcome
        /// Sessions replaced (expired, or declaring another size for the same hash), whose parts go.
        var stale: [BlobUploadKey] = []
    }

    private func open(_ request: UploadRequest, on connection: PostgresConnection, logger: Logger) async throws
        -> Opened
    {
        let scope = request.scope.name
        let hash = request.hash.hex
        try await connection.checkedQuery(
            "SELECT pg_advisory_xact_lock(\(Self.lockKey), hashtext(\(scope)))", logger: logger)
        if let blob = try await blob(request.hash, in: request.scope, on: connection, logger: logger) {
            let state = UploadState(
                upload: nil, scope: blob.scope, hash: blob.hash, size: blob.size, type: blob.type,
                chunkSize: blob.chunkSize, missing: [], committed: true, expiresAt: nil)
            return Opened(state: state, outcome: .deduplicated)
        }
        // An open session that expired, or that declared another size (one of the two is wrong, and the bytes
        // will tell at the commit), makes way for a new one.
        var stale: [BlobUploadKey] = []
        let replaced = try await connection.checkedQuery(
            """
            DELETE FROM blob_uploads
            WHERE scope = \(scope) AND hash = \(hash) AND committed_at IS NULL
              AND (expires_at <= now() OR size <> \(request.size))
            RETURNING id
            """, logger: logger)
        for try await id in replaced.decode(UUID.self) {
            stale.append(BlobUploadKey(scope: request.scope, hash: request.hash, id: id))
        }
        if !stale.isEmpty {
            try await connection.checkedQuery(
                "DELETE FROM blob_upload_parts WHERE scope = \(scope) AND upload = ANY(\(stale.map(\.id)))",
                logger: logger)
        }
        let open = try await connection.checkedQuery(
            "SELECT id FROM blob_uploads WHERE scope = \(scope) AND hash = \(hash) AND committed_at IS NULL",
            logger: logger)
        var openID: UUID?
        for try await id in open.decode(UUID.self) { openID = id }
        if let openID,
            let session = try await session(
                BlobUploadKey(scope: request.scope, hash: request.hash, id: openID), on: connection, logger: logger)
        {
            return Opened(state: session.state, outcome: .resumed, stale: stale)
        }
        let held = try await connection.checkedQuery(
            """
            SELECT (SELECT coalesce(sum(size), 0) FROM blobs WHERE scope = \(scope))::int8
                 + (SELECT coalesce(sum(size), 0) FROM blob_uploads
                    WHERE scope = \(scope) AND committed_at IS NULL AND expires_at > now())::int8
            """, logger: logger)
        var bytes: Int64 = 0
        for try await sum in held.decode(Int64.self) { bytes = sum }
        guard bytes + request.size <= configuration.quotaBytes else {
            throw SyncProtocolError(
                .blobQuotaExceeded,
                "scope \(request.scope) holds \(bytes) bytes of blobs and uploads; \(request.size) more would pass its \(configuration.quotaBytes)"
            )
        }
        let key = BlobUploadKey(scope: request.scope, hash: request.hash, id: UUID())
        let inserted = try await connection.checkedQuery(
            """
            INSERT INTO blob_uploads (scope, id, hash, size, type, chunk_size, expires_at)
            VALUES (\(scope), \(key.id), \(hash), \(request.size), \(request.type), \(Int32(configuration.chunkBytes)),
                    now() + make_interval(secs => \(Double(configuration.uploadExpirySeconds))))
            RETURNING expires_at
            """, logger: logger)
        var expiresAt = Date()
        for try await date in inserted.decode(Date.self) { expiresAt = date }
        let session = Session(
            key: key, size: request.size, type: request.type, chunkSize: configuration.chunkBytes,
            expiresAt: expiresAt, committed: false, received: [])
        return Opened(state: session.state, outcome: .opened, stale: stale)
    }

    /// The session `id` names, if the token may write its scope and it has not expired.
    /// - Throws: `upload.notFound` otherwise (also for an id that is not a UUID).
    func session(_ id: String, identity: TokenIdentity, logger: Logger) async throws -> Session {
        let notFound = SyncProtocolError(
            .uploadNotFound, "no open upload session \(id.prefix(40)) in the token's scopes")
        guard let uuid = UUID(uuidString: id), !identity.scopes.isEmpty else { throw notFound }
        let scopes = identity.scopes.map(\.name)
        let found = try await database.withConnection { [self] connection -> Session? in
            let rows = try await connection.checkedQuery(
                "SELECT scope, hash FROM blob_uploads WHERE id = \(uuid) AND scope = ANY(\(scopes))", logger: logger)
            var key: BlobUploadKey?
            for try await (scope, hash) in rows.decode((String, String).self) {
                key = BlobUploadKey(scope: try Scope(scope), hash: try BlobHash(hash), id: uuid)
            }
            guard let key else { return nil }
            return try await session(key, on: connection, logger: logger)
        }
        guard let found else { throw notFound }
        return found
    }

    /// The session `key` names, with the chunks it received; nil when it does not exist or has expired.
    private func session(_ key: BlobUploadKey, on connection: PostgresConnection, logger: Logger) async throws
        -> Session?
    {
        let scope = key.scope.name
        let rows = try await connection.checkedQuery(
            """
            SELECT size, type, chunk_size, expires_at, committed_at IS NOT NULL FROM blob_uploads
            WHERE scope = \(scope) AND id = \(key.id) AND expires_at > now()
            """, logger: logger)
        var found: Session?
        for try await (size, type, chunkSize, expiresAt, committed) in rows.decode(
            (Int64, String, Int32, Date, Bool).self)
        {
            found = Session(
                key: key, size: size, type: type, chunkSize: Int(chunkSize), expiresAt: expiresAt,
                committed: committed, received: [])
        }
        guard var session = found else { return nil }
        if !session.committed {
            let parts = try await connection.checkedQuery(
                """
                SELECT part, sha256 FROM blob_upload_parts WHERE scope = \(scope) AND upload = \(key.id)
                ORDER BY part
                """, logger: logger)
            for try await (part, hash) in parts.decode((Int32, String?).self) {
                session.received.append(Int(part))
                session.receivedHashes[Int(part)] = hash.flatMap { try? BlobHash($0) }
            }
        }
        return session
    }

    // MARK: Chunks

    /// Stores chunk `index` of `session`, `bytes` already checked against `hash` (`ChunkIntake`), records it
    /// received with its hash, and hands it to the upload's running hash (`digests`).
    /// - Throws: `upload.notFound` when the session expired meanwhile.
    func receive(
        _ bytes: ByteBuffer, hash: BlobHash, chunk index: Int, of session: Session, identity: TokenIdentity,
        logger: Logger
    ) async throws -> UploadState {
        guard !session.committed else { return session.state }
        let key = session.key
        try await store.writeUploadPart(bytes, part: index, of: key)
        // Without waiting for the WAL's flush, like the part itself (`PostgresBlobStore.writeUploadPart`): after
        // a crash the record is lost with or after its part, never kept without it; the commit flushes both.
        try await database.withTransaction(logger: logger) { connection in
            _ = try await connection.checkedQuery("SET LOCAL synchronous_commit = off", logger: logger)
            _ = try await connection.checkedQuery(
                """
                INSERT INTO blob_upload_parts (scope, upload, part, sha256)
                SELECT \(key.scope.name), \(key.id), \(Int32(index)), \(hash.hex)
                WHERE EXISTS (SELECT 1 FROM blob_uploads
                              WHERE scope = \(key.scope.name) AND id = \(key.id) AND committed_at IS NULL
                                AND expires_at > now())
                ON CONFLICT (scope, upload, part) DO UPDATE SET sha256 = EXCLUDED.sha256
                """, logger: logger)
        }
        await digests.take(key.id, chunk: index, bytes: bytes, hash: hash)
        metrics.recordBlobBytes(received: bytes.readableBytes)
        let now: Session
        do {
            now = try await self.session(key.id.uuidString, identity: identity, logger: logger)
        } catch let error as SyncProtocolError where error.code == .uploadNotFound {
            // Expired (and maybe swept) while the chunk was written: its part goes too.
            try? await store.deleteUpload(key)
            throw error
        }
        // Committed by another request while the chunk was written: the part is not needed.
        if now.committed { try? await store.deleteUpload(key) }
        return now.state
    }

    // MARK: Commit

    /// `POST /v1/uploads/{id}/commit`: checks the whole blob's SHA-256, part by part, then makes it readable.
    /// - Throws: `upload.notFound`; `upload.incomplete` while chunks are missing (or were lost by the store:
    ///   they are then missing again); `blob.hashMismatch` when the bytes do not match the hash (the session is
    ///   deleted with its parts).
    func commit(_ id: String, identity: TokenIdentity, logger: Logger) async throws -> UploadState {
        let session = try await self.session(id, identity: identity, logger: logger)
        guard !session.committed else { return session.state }
        let missing = session.missing
        guard missing.isEmpty else {
            throw SyncProtocolError(
                .uploadIncomplete, "\(missing.count) of the upload's \(session.chunks) chunks are missing")
        }
        let key = session.key
        let digest: SHA256.Digest
        if let chained = digests.digest(key.id, chunks: session.chunks, recorded: session.receivedHashes) {
            metrics.recordCommitHash(chained: true)
            digest = chained
        } else {
            metrics.recordCommitHash(chained: false)
            digest = try await readBack(session, logger: logger)
        }
        guard BlobHash(digest: digest) == key.hash else {
            try await discard(key, logger: logger)
            throw SyncProtocolError(
                .blobHashMismatch, "the uploaded bytes do not match the blob's hash; the session is discarded")
        }
        guard try await store.promote(key, parts: session.chunks) else {
            // Another commit of the session promoted the parts first: answer as it does once it is recorded.
            if let blob = try await blob(key.hash, in: key.scope, logger: logger) {
                var state = session.state
                state.committed = true
                state.missing = []
                state.expiresAt = nil
                state.chunkSize = blob.chunkSize
                return state
            }
            throw try await forget(Array(0..<session.chunks), of: key, logger: logger)
        }
        try await database.withTransaction(logger: logger) { connection in
            let scope = key.scope.name
            try await connection.checkedQuery(
                """
                -- The time in VALUES, not in DO UPDATE SET: Citus takes only immutable functions there.
                INSERT INTO blobs (scope, hash, size, type, chunk_size, committed_at)
                VALUES (
                    \(scope), \(key.hash.hex), \(session.size), \(session.type), \(Int32(session.chunkSize)), now())
                ON CONFLICT (scope, hash) DO UPDATE
                SET size = EXCLUDED.size, type = EXCLUDED.type, chunk_size = EXCLUDED.chunk_size,
                    committed_at = EXCLUDED.committed_at
                """, logger: logger)
            try await connection.checkedQuery(
                "UPDATE blob_uploads SET committed_at = now() WHERE scope = \(scope) AND id = \(key.id)",
                logger: logger)
            try await connection.checkedQuery(
                "DELETE FROM blob_upload_parts WHERE scope = \(scope) AND upload = \(key.id)", logger: logger)
        }
        digests.forget(key.id)
        metrics.recordUpload(.committed)
        var committed = session
        committed.committed = true
        return committed.state
    }

    /// The SHA-256 of an upload's parts as the store holds them, read back in order.
    /// - Throws: `upload.incomplete` when the store lost parts (they are then missing again).
    private func readBack(_ session: Session, logger: Logger) async throws -> SHA256.Digest {
        let key = session.key
        var hasher = SHA256()
        var lost: [Int] = []
        try await Self.readAhead(Array(0..<session.chunks), ahead: store.partsAhead) { [store] part in
            try await store.readUploadPart(part, of: key)
        } each: { part, bytes in
            let expected = UploadState.chunkRange(part, size: session.size, chunkSize: session.chunkSize).count
            guard let bytes, bytes.readableBytes == expected else {
                lost.append(part)
                return
            }
            bytes.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
        }
        guard lost.isEmpty else { throw try await forget(lost, of: key, logger: logger) }
        return hasher.finalize()
    }

    /// Forgets that `parts` of an upload were received (the store does not hold them), so that the device
    /// sends them again; the error to answer with.
    private func forget(_ parts: [Int], of key: BlobUploadKey, logger: Logger) async throws -> SyncProtocolError {
        let numbers = parts.map { Int32($0) }
        try await database.withConnection { connection in
            _ = try await connection.checkedQuery(
                """
                DELETE FROM blob_upload_parts
                WHERE scope = \(key.scope.name) AND upload = \(key.id) AND part = ANY(\(numbers))
                """, logger: logger)
        }
        logger.warning(
            "upload parts lost by the blob store; asked again",
            metadata: ["sync.upload": "\(key)", "sync.upload.lost": "\(parts.count)"])
        return SyncProtocolError(.uploadIncomplete, "\(parts.count) chunks must be sent again")
    }

    /// Deletes a session and its parts.
    private func discard(_ key: BlobUploadKey, logger: Logger) async throws {
        try await database.withTransaction(logger: logger) { connection in
            try await connection.checkedQuery(
                "DELETE FROM blob_upload_parts WHERE scope = \(key.scope.name) AND upload = \(key.id)", logger: logger)
            try await connection.checkedQuery(
                "DELETE FROM blob_uploads WHERE scope = \(key.scope.name) AND id = \(key.id)", logger: logger)
        }
        try await store.deleteUpload(key)
        digests.forget(key.id)
        metrics.recordUpload(.discarded)
    }

    // MARK: Blobs

    /// The committed blob `hash` of `scope`, for a token that may read `scope`.
    /// - Throws: `scope.forbidden` for a scope not in the token, `blob.notFound` when the scope does not hold it.
    func blob(_ hash: BlobHash, in scope: Scope, identity: TokenIdentity, logger: Logger) async throws -> StoredBlob {
        guard identity.scopes.contains(scope) else {
            throw SyncProtocolError(.scopeForbidden, "scope \(scope) is not in the token")
        }
        guard let blob = try await blob(hash, in: scope, logger: logger) else {
            throw SyncProtocolError(.blobNotFound, "scope \(scope) holds no blob \(hash)")
        }
        return blob
    }

    private func blob(_ hash: BlobHash, in scope: Scope, logger: Logger) async throws -> StoredBlob? {
        try await database.withConnection { [self] connection in
            try await blob(hash, in: scope, on: connection, logger: logger)
        }
    }

    private func blob(_ hash: BlobHash, in scope: Scope, on connection: PostgresConnection, logger: Logger)
        async throws -> StoredBlob?
    {
        let rows = try await connection.checkedQuery(
            "SELECT size, type, chunk_size FROM blobs WHERE scope = \(scope.name) AND hash = \(hash.hex)",
            logger: logger)
        for try await (size, type, chunkSize) in rows.decode((Int64, String, Int32).self) {
            return StoredBlob(scope: scope, hash: hash, size: size, type: type, chunkSize: Int(chunkSize))
        }
        return nil
    }

    /// `range` of `blob`, part by part, each handed to `write` before the next is read.
    /// - Throws: `server.internal` when the store has lost a part of a committed blob; what `write` throws.
    func read(
        _ blob: StoredBlob, range: Range<Int64>, logger: Logger, _ write: (ByteBuffer) async throws -> Void
    ) async throws {
        try await Self.readAhead(blob.parts(covering: range), ahead: store.partsAhead) { [store] part, within in
            try await store.readPart(part, range: within, of: blob.hash, in: blob.scope)
        } each: { (place: (part: Int, range: Range<Int>), bytes: ByteBuffer?) in
            guard let bytes, bytes.readableBytes == place.range.count else {
                logger.error(
                    "a part of a committed blob is missing from the blob store",
                    metadata: ["sync.blob": "\(blob.scope)/\(blob.hash)", "sync.blob.part": "\(place.part)"])
                throw SyncProtocolError(.serverInternal, "a part of the blob is missing")
            }
            metrics.recordBlobBytes(sent: bytes.readableBytes)
            try await write(bytes)
        }
    }

    /// Reads `items` in order and hands each to `each`, reading up to `ahead` of the next ones while `each`
    /// works on one (a part is read from the store while the previous one is written to the client, or
    /// hashed): the store's reads overlap the rest instead of alternating with it. At most `ahead + 1` items
    /// are held at once.
    static func readAhead<Item: Sendable>(
        _ items: [Item], ahead: Int, read: @escaping @Sendable (Item) async throws -> ByteBuffer?,
        each: (Item, ByteBuffer?) async throws -> Void
    ) async throws {
        var reads: [Task<ByteBuffer?, any Error>] = []
        defer { for pending in reads { pending.cancel() } }
        var next = 0
        func readNext() {
            guard next < items.count else { return }
            let item = items[next]
            reads.append(Task { try await read(item) })
            next += 1
        }
        for _ in 0..<max(1, ahead) { readNext() }
        for item in items {
            let bytes = try await reads.removeFirst().value
            readNext()
            try await each(item, bytes)
        }
    }

    // MARK: Expiry

    /// Deletes the sessions whose time has passed: an uncommitted one with its parts, a committed one (kept so
    /// that a retried commit answers `committed`) alone. Returns how many sessions went.
    @discardableResult
    func sweep(logger: Logger, batch: Int = 500) async throws -> Int {
        var swept = 0
        while true {
            let expired = try await database.withConnection { connection -> [(BlobUploadKey, Bool)] in
                let rows = try await connection.checkedQuery(
                    """
                    SELECT scope, hash, id, committed_at IS NOT NULL FROM blob_uploads
                    WHERE expires_at <= now() LIMIT \(batch)
                    """, logger: logger)
                var found: [(BlobUploadKey, Bool)] = []
                for try await (scope, hash, id, committed) in rows.decode((String, String, UUID, Bool).self) {
                    found.append((BlobUploadKey(scope: try Scope(scope), hash: try BlobHash(hash), id: id), committed))
                }
                return found
            }
            for (key, committed) in expired {
                digests.forget(key.id)
                if !committed { try await store.deleteUpload(key) }
                try await database.withTransaction(logger: logger) { connection in
                    try await connection.checkedQuery(
                        "DELETE FROM blob_upload_parts WHERE scope = \(key.scope.name) AND upload = \(key.id)",
                        logger: logger)
                    try await connection.checkedQuery(
                        """
                        DELETE FROM blob_uploads
                        WHERE scope = \(key.scope.name) AND id = \(key.id) AND expires_at <= now()
                        """, logger: logger)
                }
                if !committed { metrics.recordUpload(.expired) }
            }
            swept += expired.count
            if expired.count < batch { return swept }
        }
    }

    /// Deletes the committed blobs that no event refers to and that were committed more than
    /// `configuration.collectAfterSeconds` ago, metadata first and then their bytes.
    ///
    /// References leave `blob_refs` only through compaction, which folds only events at or below a scope's
    /// stable point (`Compactor`): a blob whose last note was deleted is collected once the deletion is stable,
    /// never before, and a device that was offline the whole time (holding the stable point back) can still
    /// download it until then. A blob committed but not yet referred to (its device has not pushed the event
    /// yet) is kept for `collectAfterSeconds`; a push that comes later is refused `blob.missing` and the device
    /// uploads it again.
    ///
    /// Each blob is deleted in a transaction of its own that first locks its row (`FOR UPDATE`), which waits
    /// for a push that refers to it (the push locks the rows it checks, `BlobReferenceCheck`), and then looks
    /// for references again: a reference committed meanwhile keeps the blob.
    /// - Returns: the blobs and bytes collected.
    func collect(logger: Logger, batch: Int = 500) async throws -> (blobs: Int, bytes: Int64) {
        var collected = 0
        var bytes: Int64 = 0
        let after = Double(configuration.collectAfterSeconds)
        while true {
            let candidates = try await database.withConnection { connection -> [(Scope, BlobHash)] in
                let rows = try await connection.checkedQuery(
                    """
                    SELECT b.scope, b.hash FROM blobs b
                    WHERE b.committed_at <= now() - make_interval(secs => \(after))
                      AND NOT EXISTS (SELECT 1 FROM blob_refs r WHERE r.scope = b.scope AND r.hash = b.hash)
                    ORDER BY b.scope, b.hash LIMIT \(batch)
                    """, logger: logger)
                var found: [(Scope, BlobHash)] = []
                for try await (scope, hash) in rows.decode((String, String).self) {
                    found.append((try Scope(scope), try BlobHash(hash)))
                }
                return found
            }
            for (scope, hash) in candidates {
                let deleted = try await database.withTransaction(logger: logger) { connection -> Int64? in
                    var size: Int64?
                    for try await value in try await connection.checkedQuery(
                        "SELECT size FROM blobs WHERE scope = \(scope.name) AND hash = \(hash.hex) FOR UPDATE",
                        logger: logger
                    ).decode(Int64.self) { size = value }
                    guard let size else { return nil }
                    var referenced = false
                    for try await value in try await connection.checkedQuery(
                        """
                        SELECT EXISTS (SELECT 1 FROM blob_refs WHERE scope = \(scope.name) AND hash = \(hash.hex))
                        """, logger: logger
                    ).decode(Bool.self) { referenced = value }
                    guard !referenced else { return nil }
                    try await connection.checkedQuery(
                        "DELETE FROM blobs WHERE scope = \(scope.name) AND hash = \(hash.hex)", logger: logger)
                    return size
                }
                guard let size = deleted else { continue }
                // After the commit: a crash here leaves bytes no metadata names, never metadata without bytes.
                try await store.deleteBlob(hash, in: scope)
                collected += 1
                bytes += size
            }
            if candidates.count < batch { return (collected, bytes) }
        }
    }
}
