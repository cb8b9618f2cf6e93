import Crypto
import Foundation
import SyncEngine
import SyncModels
import SyncProtocol
import Synchronization

/// A logic-only stand-in for the server's blob routes (docs/PROTOCOL.md, "Blobs"), as a `BlobTransport`: upload
/// sessions cut in chunks of `chunkSize` bytes, each chunk stored once its SHA-256 matches, a commit that checks
/// the whole blob's hash, and downloads from an offset. It records every call, and fails on demand: a chunk's
/// next `put`s (`failChunk`), a download cut partway (`cutDownload`), bytes served for a hash that are not that
/// blob's (`serve`).
final class FakeBlobServer: BlobTransport {
    struct Session {
        var scope: Scope
        var reference: BlobReference
        var chunks: [Int: Data] = [:]
    }

    struct State {
        /// Open sessions by id, and the id of each scope's and hash's open session.
        var sessions: [String: Session] = [:]
        var open: [String: String] = [:]
        /// Committed blobs by scope and hash.
        var committed: [String: Data] = [:]
        /// What a download of a hash serves, whatever the scope (by default the committed bytes).
        var served: [BlobHash: Data] = [:]
        /// Failures the next `put`s of a chunk throw, by chunk index, in order.
        var chunkFailures: [Int: [SyncFailure]] = [:]
        /// Failures the next `startUpload`s throw, in order.
        var startFailures: [SyncFailure] = []
        /// A download delivers at most this many bytes in all, then throws `.retryable` (once).
        var downloadCut: Int64?
        /// Every call, in order: `start`, `put N` (stored), `put N failed`, `commit`, `download from N`.
        var calls: [String] = []
        var nextID = 0
    }

    let chunkSize: Int
    /// The bytes each `receive` of a download holds at most.
    let pieceSize: Int
    let state = Mutex(State())

    init(chunkSize: Int = 64, pieceSize: Int = 16) {
        self.chunkSize = chunkSize
        self.pieceSize = pieceSize
    }

    static func key(_ scope: Scope, _ hash: BlobHash) -> String { "\(scope.name)/\(hash.hex)" }

    var calls: [String] { state.withLock { $0.calls } }
    /// The chunks stored, in the order they arrived.
    var storedChunks: [Int] {
        calls.compactMap { call in
            call.hasPrefix("put ") && !call.hasSuffix("failed") ? Int(call.dropFirst(4)) : nil
        }
    }

    func holds(_ scope: Scope, _ hash: BlobHash) -> Data? { state.withLock { $0.committed[Self.key(scope, hash)] } }

    /// Makes `bytes` committed in `scope` (another device uploaded them).
    func commit(_ bytes: Data, scope: Scope) {
        let hash = BlobHash(digest: SHA256.hash(data: bytes))
        state.withLock { $0.committed[Self.key(scope, hash)] = bytes }
    }

    /// Makes downloads of `hash` serve `bytes`.
    func serve(_ bytes: Data, as hash: BlobHash) { state.withLock { $0.served[hash] = bytes } }

    func failChunk(_ index: Int, with failures: [SyncFailure]) {
        state.withLock { $0.chunkFailures[index, default: []] += failures }
    }

    func failStart(with failures: [SyncFailure]) { state.withLock { $0.startFailures += failures } }

    func cutDownload(after bytes: Int64) { state.withLock { $0.downloadCut = bytes } }

    /// Forgets a committed blob (the server collected it).
    func collect(_ scope: Scope, _ hash: BlobHash) {
        _ = state.withLock { $0.committed.removeValue(forKey: Self.key(scope, hash)) }
    }

    // MARK: BlobTransport

    func startUpload(_ request: UploadRequest) async throws(SyncFailure) -> UploadState {
        let reference = BlobReference(hash: request.hash, size: request.size, type: request.type)
        let key = Self.key(request.scope, request.hash)
        let answer = state.withLock { state -> Result<UploadState, SyncFailure> in
            state.calls.append("start")
            if !state.startFailures.isEmpty { return .failure(state.startFailures.removeFirst()) }
            if state.committed[key] != nil {
                return .success(
                    UploadState(
                        upload: nil, scope: request.scope, hash: request.hash, size: request.size, type: request.type,
                        chunkSize: chunkSize, missing: [], committed: true, expiresAt: nil))
            }
            let id: String
            if let open = state.open[key] {
                id = open
            } else {
                state.nextID += 1
                id = "upload-\(state.nextID)"
                state.open[key] = id
                state.sessions[id] = Session(scope: request.scope, reference: reference)
            }
            return .success(self.uploadState(id, state.sessions[id]!, committed: false))
        }
        return try answer.get()
    }

    func putChunk(upload: String, index: Int, bytes: Data, sha256: BlobHash) async throws(SyncFailure) -> UploadState {
        let answer = state.withLock { state -> Result<UploadState, SyncFailure> in
            if let failure = state.chunkFailures[index]?.first {
                state.chunkFailures[index]!.removeFirst()
                state.calls.append("put \(index) failed")
                return .failure(failure)
            }
            guard var session = state.sessions[upload] else {
                return .failure(.permanent(code: "upload.notFound", message: "no session \(upload)"))
            }
            let range = UploadState.chunkRange(index, size: session.reference.size, chunkSize: chunkSize)
            guard BlobHash(digest: SHA256.hash(data: bytes)) == sha256, bytes.count == range.count else {
                return .failure(.permanent(code: "blob.hashMismatch", message: "chunk \(index)"))
            }
            state.calls.append("put \(index)")
            session.chunks[index] = bytes
            state.sessions[upload] = session
            return .success(self.uploadState(upload, session, committed: false))
        }
        return try answer.get()
    }

    func commitUpload(_ upload: String) async throws(SyncFailure) -> UploadState {
        let answer = state.withLock { state -> Result<UploadState, SyncFailure> in
            state.calls.append("commit")
            guard let session = state.sessions[upload] else {
                return .failure(.permanent(code: "upload.notFound", message: "no session \(upload)"))
            }
            let count = UploadState.chunkCount(size: session.reference.size, chunkSize: chunkSize)
            guard session.chunks.count == count else {
                return .failure(.permanent(code: "upload.incomplete", message: "chunks are missing"))
            }
            let bytes = (0..<count).reduce(into: Data()) { $0 += session.chunks[$1]! }
            guard BlobHash(digest: SHA256.hash(data: bytes)) == session.reference.hash else {
                return .failure(.permanent(code: "blob.hashMismatch", message: "the blob"))
            }
            let key = Self.key(session.scope, session.reference.hash)
            state.committed[key] = bytes
            state.open[key] = nil
            state.sessions[upload] = nil
            return .success(self.uploadState(upload, session, committed: true))
        }
        return try answer.get()
    }

    func download(
        _ hash: BlobHash, scope: Scope, from offset: Int64, begin: (Int64, Int64) throws -> Void,
        receive: (Data) throws -> Void
    ) async throws(SyncFailure) {
        let (bytes, cut) = state.withLock { state -> (Data?, Int64?) in
            state.calls.append("download from \(offset)")
            let bytes = state.served[hash] ?? state.committed[Self.key(scope, hash)]
            defer { state.downloadCut = nil }
            return (bytes, state.downloadCut)
        }
        guard let bytes else { throw .permanent(code: "blob.notFound", message: "no blob \(hash.hex)") }
        let size = Int64(bytes.count)
        do {
            try begin(offset, size)
            var position = offset
            while position < size {
                if let cut, position >= cut {
                    throw SyncFailure.retryable(reason: "network: connection reset", retryAfter: nil)
                }
                var end = min(size, position + Int64(pieceSize))
                if let cut, cut > position { end = min(end, cut) }
                try receive(bytes.subdata(in: Int(position)..<Int(end)))
                position = end
            }
        } catch let failure as SyncFailure {
            throw failure
        } catch {
            throw .permanent(code: "blob.file", message: "\(error)")
        }
    }

    private func uploadState(_ id: String, _ session: Session, committed: Bool) -> UploadState {
        let count = UploadState.chunkCount(size: session.reference.size, chunkSize: chunkSize)
        return UploadState(
            upload: id, scope: session.scope, hash: session.reference.hash, size: session.reference.size,
            type: session.reference.type, chunkSize: chunkSize,
            missing: committed ? [] : (0..<count).filter { session.chunks[$0] == nil }, committed: committed,
            expiresAt: committed ? nil : "2030-01-01T00:00:00Z")
    }
}
