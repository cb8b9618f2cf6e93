import Crypto
import Foundation
import GRDB
import SyncEventStore
import SyncModels
import SyncProtocol
import SyncStorage
import Synchronization

/// The device's blob queue: uploads the blobs pending events refer to, chunk by chunk, and downloads blobs
/// on demand (docs/ARCHITECTURE.md, "Attachments").
///
/// **Uploads.** Each blob a pending event refers to and the server does not hold yet (`local_blobs`, see
/// `EventStore+Blobs.swift`) goes through an upload session: asked for again on every attempt (the server
/// answers the open session, with the chunks it still lacks, or `committed` when the scope holds the blob
/// already: another device attached the same file), then each missing chunk is read from the file, hashed and
/// sent, retried with backoff on a network failure, and acknowledged chunks are recorded in the database as
/// they are. A device killed mid-upload asks again and sends only what the server lacks: at most the chunk
/// that was in flight. After the commit the blob is marked uploaded, and the events that waited for it
/// leave the outbox with the next push.
///
/// **Downloads.** `open(_:scope:)` gives the file of a blob, fetching it first when its bytes are not here:
/// into `HASH.part`, resumed with `Range` after a cut, checked against its hash before it is renamed into
/// place. Never more than one piece of a blob in memory, up or down.
public final class BlobSync: Sendable {
    public let local: LocalBlobs
    let transport: any BlobTransport
    let database: SyncDatabase
    let backoff: BackoffPolicy
    /// Attempts per chunk (and per download) within one pass before the blob waits for the next pass.
    let attempts: Int
    let state = Mutex(State())
    /// Called with the queue's progress after each chunk and each finished blob.
    let observers = Mutex<[@Sendable (BlobProgress) -> Void]>([])
    /// Asks for a new token when the server refuses the one in use (`renewTokens(with:)`).
    let tokenRenewal = Mutex<(@Sendable () async -> Bool)?>(nil)

    struct State {
        /// Blobs being uploaded now, by scope and hash: a second pass skips them.
        var uploading: Set<String> = []
        var progress = BlobProgress()
    }

    public init(
        local: LocalBlobs, transport: any BlobTransport, backoff: BackoffPolicy = BackoffPolicy(), attempts: Int = 8
    ) {
        LargeBuffers.returnedToTheSystem
        self.local = local
        self.transport = transport
        self.database = local.database
        self.backoff = backoff
        self.attempts = max(1, attempts)
    }

    /// Gives the transport a new bearer token (the engine's `tokenProvider`).
    public func setToken(_ token: String?) { transport.setToken(token) }

    /// How to get a new token when the server refuses the one in use: `renew` gives the transport one and
    /// returns true, or returns false. The engine sets it from its `tokenProvider`, so that a download the
    /// app asks for (`open`) or an upload pass outside a sync cycle does not fail on an expired token.
    public func renewTokens(with renew: @escaping @Sendable () async -> Bool) {
        tokenRenewal.withLock { $0 = renew }
    }

    /// `body`, and once more after a new token when the server refused the one in use and there is a new one.
    func withTokenRenewal<T>(_ body: () async throws(SyncFailure) -> T) async throws(SyncFailure) -> T {
        do {
            return try await body()
        } catch {
            guard case .authentication = error, let renew = tokenRenewal.withLock({ $0 }), await renew() else {
                throw error
            }
            return try await body()
        }
    }

    /// The queue's progress now.
    public var progress: BlobProgress { state.withLock { $0.progress } }

    /// Adds a function told of progress (the engine's status, a command line's progress lines).
    public func observe(_ handler: @escaping @Sendable (BlobProgress) -> Void) {
        observers.withLock { $0.append(handler) }
    }

    // MARK: Uploads

    /// One blob waiting for its upload.
    public struct PendingUpload: Sendable, Hashable {
        public var scope: Scope
        public var reference: BlobReference
        public var upload: String?
        public var sentBytes: Int64
    }

    /// The blobs waiting for their upload, oldest reference first.
    public func pendingUploads() async throws -> [PendingUpload] {
        try await database.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT b.scope, b.hash, b.size, b.type, b.upload_id, b.sent_bytes FROM local_blobs b
                    WHERE b.uploaded = 0
                    ORDER BY (SELECT min(position) FROM outbox_blobs o WHERE o.scope = b.scope AND o.hash = b.hash),
                        b.scope, b.hash
                    """
            ).compactMap { row -> PendingUpload? in
                guard let scope = try? Scope(row["scope"] as String), let hash = try? BlobHash(row["hash"] as String)
                else { return nil }
                return PendingUpload(
                    scope: scope, reference: BlobReference(hash: hash, size: row["size"], type: row["type"]),
                    upload: row["upload_id"], sentBytes: row["sent_bytes"])
            }
        }
    }

    /// What one pass over the queue did.
    public struct UploadReport: Sendable, Hashable {
        /// Blobs committed by this pass (or found already on the server).
        public var committed = 0
        /// Chunks sent, and their bytes.
        public var chunks = 0
        public var bytes: Int64 = 0
        /// Blobs given up because their bytes are no longer on the device (the events waiting for them were
        /// rejected here, `blob.notLocal`).
        public var abandoned = 0
        /// Blobs left waiting, and the failure of the last one that failed.
        public var waiting = 0
        public var lastFailure: SyncFailure?
    }

    /// Uploads every pending blob, each to its end or until its attempts run out; a blob that fails waits for
    /// the next pass and the others go on. An authentication failure ends the pass (every request would fail).
    @discardableResult
    public func uploadPending() async -> UploadReport {
        var report = UploadReport()
        let pending: [PendingUpload]
        do {
            pending = try await pendingUploads()
        } catch {
            report.lastFailure = .retryable(reason: "the local database: \(error)", retryAfter: nil)
            return report
        }
        updateProgress { progress in
            progress.uploadsPending = pending.count
            progress.uploadBytes = pending.reduce(0) { $0 + $1.reference.size }
            progress.uploadedBytes = pending.reduce(0) { $0 + $1.sentBytes }
        }
        for blob in pending {
            let key = "\(blob.scope.name)/\(blob.reference.hash.hex)"
            guard state.withLock({ $0.uploading.insert(key).inserted }) else { continue }
            defer { _ = state.withLock { $0.uploading.remove(key) } }
            do throws(SyncFailure) {
                try await withTokenRenewal { () async throws(SyncFailure) in try await upload(blob, report: &report) }
                report.committed += 1
                updateProgress { $0.uploadsPending = max(0, $0.uploadsPending - 1) }
            } catch {
                if case .permanent(Self.notLocal, _) = error, await abandon(blob) {
                    report.abandoned += 1
                    continue
                }
                report.waiting += 1
                report.lastFailure = error
                await record(error, for: blob)
                if case .authentication = error { break }
            }
        }
        updateProgress { $0.lastUploadError = report.lastFailure?.description }
        return report
    }

    /// Uploads one blob: asks for its session, sends the chunks the server lacks, commits.
    func upload(_ blob: PendingUpload, report: inout UploadReport) async throws(SyncFailure) {
        let request = UploadRequest(scope: blob.scope, reference: blob.reference)
        var session = try await retrying { () async throws(SyncFailure) in try await transport.startUpload(request) }
        if !session.committed {
            guard let id = session.upload else {
                throw .permanent(code: "blob.noSession", message: "the server answered no upload session")
            }
            let file = local.fileURL(blob.reference.hash)
            guard FileManager.default.fileExists(atPath: file.path) else {
                throw .permanent(
                    code: "blob.notLocal",
                    message: "the bytes of blob \(blob.reference.hash.hex) are not on this device")
            }
            try await recordSession(blob, session)
            try await send(session, upload: id, of: blob, from: file, report: &report)
            session = try await retrying { () async throws(SyncFailure) in try await transport.commitUpload(id) }
        }
        guard session.committed else {
            throw .retryable(reason: "the upload was not committed", retryAfter: nil)
        }
        try await markUploaded(blob)
    }

    /// How many chunks of an upload are in flight at once: the next chunk is read and hashed while the one
    /// before it is sent, and goes out once that one's body has been sent, while the server stores it, so that
    /// the device and the server work at the same time. Only one chunk is ever on the wire: a device killed
    /// mid-upload loses at most one chunk's transfer (the other one had arrived whole). The device holds that
    /// many chunks in memory.
    static let chunksInFlight = 2

    /// Sends the chunks `session` lacks, in order, `chunksInFlight` at a time (each retried on its own; they
    /// take the wire in order, one at a time, `WireTurns`), and records each acknowledged chunk as it comes
    /// back, whatever order the answers come in.
    /// - Throws: the first chunk's failure once its retries ran out (the chunk in flight beside it finishes and
    ///   is recorded first).
    func send(
        _ session: UploadState, upload id: String, of blob: PendingUpload, from file: URL, report: inout UploadReport
    ) async throws(SyncFailure) {
        var lacking = Set(session.missing)
        var failure: SyncFailure?
        let turns = WireTurns()
        await withTaskGroup(of: (Int, Result<Int, SyncFailure>?).self) { group in
            var next = session.missing.makeIterator()
            var inFlight = 0
            var ticket = 0
            while true {
                if inFlight < Self.chunksInFlight, failure == nil, let index = next.next() {
                    inFlight += 1
                    let turn = ticket
                    ticket += 1
                    group.addTask {
                        (index, await self.sendChunk(index, of: session, upload: id, from: file, turn: turn, of: turns))
                    }
                    continue
                }
                guard inFlight > 0, let (index, result) = await group.next() else { break }
                inFlight -= 1
                // Not sent: a chunk before it failed.
                guard let result else { continue }
                switch result {
                case .success(let bytes):
                    lacking.remove(index)
                    report.chunks += 1
                    report.bytes += Int64(bytes)
                    updateProgress { $0.uploadedBytes += Int64(bytes) }
                    do throws(SyncFailure) {
                        try await recordProgress(blob, session: session, lacking: lacking)
                    } catch {
                        failure = failure ?? error
                    }
                case .failure(let error):
                    failure = failure ?? error
                }
            }
        }
        if let failure { throw failure }
        if !lacking.isEmpty {
            throw .retryable(reason: "the server still lacks \(lacking.count) chunks", retryAfter: nil)
        }
    }

    /// Reads chunk `index` from `file` and hashes it, waits for its turn `turn` on the wire, and sends it
    /// (retried with backoff). Its turn passes to the next chunk the first time its body has been sent whole;
    /// a chunk that fails before that stops the chunks after it. Returns its length once acknowledged, its
    /// failure, or nil when it was not sent because a chunk before it failed.
    func sendChunk(
        _ index: Int, of session: UploadState, upload id: String, from file: URL, turn: Int, of turns: WireTurns
    ) async -> Result<Int, SyncFailure>? {
        // Passes with a stop unless its body was sent (the turn passed then; a turn passes once).
        defer { turns.pass(turn, stopping: true) }
        let range = session.chunkRange(index)
        let bytes: Data
        do {
            let input = try FileHandle(forReadingFrom: file)
            defer { try? input.close() }
            try input.seek(toOffset: UInt64(range.lowerBound))
            bytes = try input.read(upToCount: range.count) ?? Data()
        } catch {
            guard await turns.wait(turn) else { return nil }
            return .failure(.permanent(code: "blob.unreadable", message: "blob file: \(error)"))
        }
        guard bytes.count == range.count else {
            guard await turns.wait(turn) else { return nil }
            return .failure(.permanent(code: "blob.changed", message: "the blob's file is shorter than its reference"))
        }
        let sha = BlobHash(digest: SHA256.hash(data: bytes))
        guard await turns.wait(turn) else { return nil }
        do throws(SyncFailure) {
            _ = try await retrying { () async throws(SyncFailure) in
                try await transport.putChunk(upload: id, index: index, bytes: bytes, sha256: sha) {
                    turns.pass(turn, stopping: false)
                }
            }
            turns.pass(turn, stopping: false)
            return .success(bytes.count)
        } catch {
            return .failure(error)
        }
    }

    /// The code of a blob the device must upload but whose bytes it no longer has.
    static let notLocal = "blob.notLocal"

    /// A blob whose bytes are gone (deleted behind the store's back) can never be uploaded: the pending
    /// events that wait for it are rejected here, as a `blob.missing` without the bytes is, and shown with
    /// the other rejections, so that they do not hold the outbox back for ever. Says whether it did.
    func abandon(_ blob: PendingUpload) async -> Bool {
        do {
            let ids = try await database.read { db in
                try String.fetchAll(
                    db,
                    sql: """
                        SELECT e.event_id FROM outbox_blobs o JOIN events e ON e.position = o.position
                        WHERE o.scope = ? AND o.hash = ? AND e.status = 'pending'
                        """, arguments: [blob.scope.name, blob.reference.hash.hex])
            }.compactMap { try? EventID($0) }
            _ = try await local.store.markRejected(
                ids, code: Self.notLocal,
                message: "the attached file is no longer on this device: the attachment cannot be sent")
            try await database.writer.write { db in
                try db.execute(
                    sql: "DELETE FROM local_blobs WHERE scope = ? AND hash = ? AND uploaded = 0",
                    arguments: [blob.scope.name, blob.reference.hash.hex])
                try EventStore.forgetSettledBlobHolds(db)
            }
            return true
        } catch {
            return false
        }
    }

    /// Runs `request` until it succeeds, a failure is not retryable, or the attempts run out.
    func retrying<T>(_ request: () async throws(SyncFailure) -> T) async throws(SyncFailure) -> T {
        var random = SystemRandomNumberGenerator()
        var attempt = 0
        while true {
            do {
                return try await request()
            } catch {
                attempt += 1
                guard case .retryable(_, let retryAfter) = error, attempt < attempts else { throw error }
                try? await Task.sleep(for: backoff.delay(attempt: attempt - 1, retryAfter: retryAfter, using: &random))
                if Task.isCancelled { throw error }
            }
        }
    }

    /// Records the session and what the server has acknowledged of it.
    func recordSession(_ blob: PendingUpload, _ session: UploadState) async throws(SyncFailure) {
        try await recordProgress(blob, session: session, lacking: Set(session.missing))
    }

    /// Records `session` with every chunk acknowledged but those in `lacking`.
    func recordProgress(_ blob: PendingUpload, session: UploadState, lacking: Set<Int>) async throws(SyncFailure) {
        let sent = (0..<session.chunks).filter { !lacking.contains($0) }.reduce(Int64(0)) {
            $0 + Int64(session.chunkRange($1).count)
        }
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE local_blobs SET upload_id = ?, chunk_size = ?, sent_bytes = ?, last_error = NULL
                    WHERE scope = ? AND hash = ?
                    """,
                arguments: [session.upload, session.chunkSize, sent, blob.scope.name, blob.reference.hash.hex])
        }
    }

    /// The blob is on the server: the events that waited for it may go.
    func markUploaded(_ blob: PendingUpload) async throws(SyncFailure) {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE local_blobs SET uploaded = 1, upload_id = NULL, sent_bytes = size, last_error = NULL
                    WHERE scope = ? AND hash = ?
                    """, arguments: [blob.scope.name, blob.reference.hash.hex])
            try EventStore.forgetSettledBlobHolds(db)
        }
    }

    func record(_ failure: SyncFailure, for blob: PendingUpload) async {
        try? await write { db in
            try db.execute(
                sql: "UPDATE local_blobs SET attempts = attempts + 1, last_error = ? WHERE scope = ? AND hash = ?",
                arguments: [failure.description, blob.scope.name, blob.reference.hash.hex])
        }
    }

    func write(_ body: @escaping @Sendable (Database) throws -> Void) async throws(SyncFailure) {
        do {
            try await database.writer.write(body)
        } catch {
            throw .retryable(reason: "the local database: \(error)", retryAfter: nil)
        }
    }

    func updateProgress(_ change: (inout BlobProgress) -> Void) {
        let progress = state.withLock { state -> BlobProgress in
            change(&state.progress)
            return state.progress
        }
        for observer in observers.withLock({ $0 }) { observer(progress) }
    }

    // MARK: Downloads

    /// The file of blob `reference` of `scope`: here already, or downloaded now (resumed from what an earlier
    /// attempt left), checked against its hash, then kept in the cache.
    /// - Throws: `SyncFailure`: retryable when the network failed more than `attempts` times in a row,
    ///   permanent when the server does not have the blob (`blob.notFound`) or sent other bytes.
    public func open(_ reference: BlobReference, scope: Scope) async throws(SyncFailure) -> URL {
        do {
            if let file = try await local.file(reference.hash) { return file }
        } catch {
            throw .retryable(reason: "the local database: \(error)", retryAfter: nil)
        }
        let partial = local.partialURL(reference.hash)
        let (hash, size) = try await withTokenRenewal { () async throws(SyncFailure) in
            try await retrying { () async throws(SyncFailure) in
                try await download(reference, scope: scope, into: partial)
            }
        }
        guard hash == reference.hash, size == reference.size else {
            try? FileManager.default.removeItem(at: partial)
            throw .permanent(code: "blob.hashMismatch", message: "the downloaded bytes do not match the blob's hash")
        }
        do {
            try await local.place(partial, as: reference.hash, size: size)
        } catch {
            throw .permanent(code: "blob.file", message: "\(error)")
        }
        updateProgress { $0.downloadedBlobs += 1 }
        _ = try? await local.evict()
        return local.fileURL(reference.hash)
    }

    /// One attempt: appends to `partial` from its current length, hashing as the bytes arrive (what an
    /// earlier attempt left is read once, to carry the hash on). Returns the whole file's hash and size.
    func download(_ reference: BlobReference, scope: Scope, into partial: URL) async throws(SyncFailure) -> (
        BlobHash, Int64
    ) {
        if !FileManager.default.fileExists(atPath: partial.path) {
            _ = FileManager.default.createFile(atPath: partial.path, contents: nil)
        }
        let output = try fileOperation { try FileHandle(forWritingTo: partial) }
        defer { try? output.close() }
        let offset = Int64(try fileOperation { try output.seekToEnd() })
        var hasher = try fileOperation { try Self.hasher(ofPrefix: offset, of: partial) }
        var size = offset
        var writeback = FileWriteback(descriptor: output.fileDescriptor, from: offset)
        // Everything arrived before (the process stopped before checking it).
        if offset >= reference.size { return (BlobHash(digest: hasher.finalize()), size) }
        try await transport.download(
            reference.hash, scope: scope, from: offset,
            begin: { start, _ in
                if start != offset {
                    try output.truncate(atOffset: UInt64(start))
                    try output.seek(toOffset: UInt64(start))
                    hasher = try Self.hasher(ofPrefix: start, of: partial)
                    size = start
                    writeback = FileWriteback(descriptor: output.fileDescriptor, from: start)
                }
            },
            receive: { piece in
                try output.write(contentsOf: piece)
                hasher.update(data: piece)
                size += Int64(piece.count)
                writeback.written(upTo: size)
                updateProgress { $0.downloadedBytes += Int64(piece.count) }
            })
        try fileOperation { try output.synchronize() }
        return (BlobHash(digest: hasher.finalize()), size)
    }

    /// A hasher fed the first `length` bytes of `file`, read a piece at a time.
    static func hasher(ofPrefix length: Int64, of file: URL) throws -> SHA256 {
        var hasher = SHA256()
        guard length > 0 else { return hasher }
        let input = try FileHandle(forReadingFrom: file)
        defer { try? input.close() }
        var left = length
        while left > 0, let piece = try input.read(upToCount: Int(min(Int64(LocalBlobs.pieceBytes), left))),
            !piece.isEmpty
        {
            hasher.update(data: piece)
            left -= Int64(piece.count)
        }
        return hasher
    }

    /// Downloads the pinned blobs that are not here (of `scope`).
    public func prefetchPinned(scope: Scope) async -> Int {
        guard let missing = try? await local.pinnedMissing() else { return 0 }
        var fetched = 0
        for (hash, size) in missing {
            if (try? await open(BlobReference(hash: hash, size: size), scope: scope)) != nil { fetched += 1 }
        }
        return fetched
    }

    func fileOperation<T>(_ body: () throws -> T) throws(SyncFailure) -> T {
        do {
            return try body()
        } catch let failure as SyncFailure {
            throw failure
        } catch {
            throw .permanent(code: "blob.file", message: "\(error)")
        }
    }
}

/// What the blob queue has done and has left (in `EngineStatus.blobs`).
public struct BlobProgress: Sendable, Hashable, Codable {
    /// Blobs waiting for their upload, their bytes, and the bytes the server has acknowledged of them.
    public var uploadsPending = 0
    public var uploadBytes: Int64 = 0
    public var uploadedBytes: Int64 = 0
    /// The last upload failure of the last pass (nil once a pass had none).
    public var lastUploadError: String?
    /// Blobs and bytes downloaded by this process.
    public var downloadedBlobs = 0
    public var downloadedBytes: Int64 = 0

    public init() {}
}

/// The order in which an upload's chunks take the wire: turn `n` begins once turn `n - 1` has passed, so that a
/// chunk read and hashed early still goes out after the one before it, and only one is sent at a time. A turn
/// that passes stopping (its chunk failed before its body was sent) ends the turns after it unsent.
final class WireTurns: Sendable {
    private struct State {
        var serving = 0
        var stopped = false
        var waiting: [Int: CheckedContinuation<Bool, Never>] = [:]
    }

    private let state = Mutex(State())

    /// Waits until turn `turn` begins: true, or false when a turn before it stopped the upload.
    func wait(_ turn: Int) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let now = state.withLock { state -> Bool? in
                guard state.serving < turn, !state.stopped else { return !state.stopped }
                state.waiting[turn] = continuation
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    /// Turn `turn` is over: the next one begins, or with `stopping` every later one ends. Turns pass in
    /// order, and only the first pass of a turn counts.
    func pass(_ turn: Int, stopping: Bool) {
        let (next, go) = state.withLock { state -> ([CheckedContinuation<Bool, Never>], Bool) in
            guard state.serving <= turn else { return ([], true) }
            state.serving = turn + 1
            if stopping { state.stopped = true }
            if state.stopped {
                defer { state.waiting = [:] }
                return (Array(state.waiting.values), false)
            }
            return (state.waiting.removeValue(forKey: state.serving).map { [$0] } ?? [], true)
        }
        for waiter in next { waiter.resume(returning: go) }
    }
}
