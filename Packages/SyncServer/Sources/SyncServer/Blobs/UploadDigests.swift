import Crypto
import Foundation
import NIOCore
import SyncModels
import Synchronization

/// The running SHA-256 of each upload whose chunks this server stored in order, so that the commit checks the
/// whole blob's hash without reading its parts back from the store (`BlobService.commit`).
///
/// A chain starts when chunk 0 of an upload begins to arrive here and takes each chunk once it is stored and
/// recorded, in order. A device sends its chunks in order with two in flight, so the second may be stored
/// before the first: it then waits for the one before it (never longer than `patience`) as long as that one
/// is still being received or stored here. Anything else breaks the chain, and the commit reads the parts back
/// as it would without one: a gap (a chunk stored by another server, or before this one started), a chunk
/// stored again with other bytes, a chunk before it that failed, a wait past `patience`. The commit uses a chain
/// only when it took every chunk and the chunk hashes it took are the ones the database recorded for the
/// upload's parts (`blob_upload_parts.sha256`), so that a part rewritten through another server is never
/// missed. A chain holds the hasher's state and 32 bytes per chunk, never bytes of the blob; at most `capacity`
/// chains are kept (the least recently used one makes way), and a chain that is gone only costs the re-read.
final class UploadDigests: Sendable {
    struct Chain {
        var hasher = SHA256()
        /// The next chunk the hasher takes.
        var next = 0
        /// The SHA-256 of each chunk taken, in order.
        var parts: [BlobHash] = []
        /// Chunks being received or stored here now.
        var pending: Set<Int> = []
        /// A request is feeding the hasher (outside the lock).
        var hashing = false
        var broken = false
        var used: UInt64 = 0
        /// Requests waiting for the chunks before theirs.
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]

        mutating func wakeAll() {
            for waiter in waiters.values { waiter.resume() }
            waiters = [:]
        }
    }

    private struct State {
        var chains: [UUID: Chain] = [:]
        var clock: UInt64 = 0
    }

    private let state = Mutex(State())
    let capacity: Int
    let patience: Duration

    init(capacity: Int = 1024, patience: Duration = .seconds(10)) {
        self.capacity = capacity
        self.patience = patience
    }

    /// Chunk `chunk` of `upload` begins to arrive. Starts the upload's chain at chunk 0.
    func begin(_ upload: UUID, chunk: Int) {
        state.withLock { state in
            state.clock += 1
            if state.chains[upload] == nil {
                guard chunk == 0 else { return }
                if state.chains.count >= capacity,
                    let oldest = state.chains.min(by: { $0.value.used < $1.value.used })?.key
                {
                    state.chains[oldest]?.wakeAll()
                    state.chains[oldest] = nil
                }
                state.chains[upload] = Chain()
            }
            state.chains[upload]?.pending.insert(chunk)
            state.chains[upload]?.used = state.clock
        }
    }

    /// Chunk `chunk` of `upload` is no longer being received or stored (taken, or failed): the requests waiting
    /// for it look again. Calling it again changes nothing.
    func end(_ upload: UUID, chunk: Int) {
        state.withLock { state in
            guard state.chains[upload]?.pending.remove(chunk) != nil else { return }
            state.chains[upload]?.wakeAll()
        }
    }

    /// Chunk `chunk` of `upload`, `bytes` with SHA-256 `hash`, is stored and recorded: the chain takes it in
    /// its turn, after waiting for the chunks before it that are still on their way here.
    func take(_ upload: UUID, chunk: Int, bytes: ByteBuffer, hash: BlobHash) async {
        enum Step {
            case done
            case hash(SHA256)
            case wait
        }
        while true {
            let step = state.withLock { state -> Step in
                guard var chain = state.chains[upload], !chain.broken else { return .done }
                defer { state.chains[upload] = chain }
                if chunk < chain.next {
                    // The same chunk again: the chain holds only if its bytes are the same.
                    if chain.parts[chunk] != hash { chain.broken = true }
                    return .done
                }
                if chunk == chain.next, !chain.hashing {
                    chain.hashing = true
                    return .hash(chain.hasher)
                }
                let before = (chain.next..<chunk).allSatisfy { chain.pending.contains($0) }
                guard before else {
                    chain.broken = true
                    chain.wakeAll()
                    return .done
                }
                return .wait
            }
            switch step {
            case .done:
                return
            case .hash(var hasher):
                bytes.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
                state.withLock { state in
                    guard var chain = state.chains[upload] else { return }
                    chain.hasher = hasher
                    chain.parts.append(hash)
                    chain.next += 1
                    chain.hashing = false
                    chain.pending.remove(chunk)
                    chain.wakeAll()
                    state.chains[upload] = chain
                }
                return
            case .wait:
                await wait(upload)
            }
        }
    }

    /// Waits until something changes in `upload`'s chain, or `patience` has passed (the chain is then broken).
    private func wait(_ upload: UUID) async {
        let ticket = state.withLock { state -> UInt64 in
            state.clock += 1
            return state.clock
        }
        let timer = Task { [patience] in
            try? await Task.sleep(for: patience)
            guard !Task.isCancelled else { return }
            state.withLock { state in
                guard let waiter = state.chains[upload]?.waiters.removeValue(forKey: ticket) else { return }
                state.chains[upload]?.broken = true
                waiter.resume()
            }
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let registered = state.withLock { state -> Bool in
                guard state.chains[upload] != nil else { return false }
                state.chains[upload]?.waiters[ticket] = continuation
                return true
            }
            if !registered { continuation.resume() }
        }
        timer.cancel()
    }

    /// The whole blob's SHA-256 when the chain took all `chunks` chunks of `upload` and each one's hash is the
    /// one `recorded` for its part; nil otherwise (the commit then reads the parts back).
    func digest(_ upload: UUID, chunks: Int, recorded: [Int: BlobHash]) -> SHA256.Digest? {
        state.withLock { state in
            guard let chain = state.chains[upload], !chain.broken, !chain.hashing, chain.next == chunks else {
                return nil
            }
            for (index, hash) in chain.parts.enumerated() where recorded[index] != hash { return nil }
            return chain.hasher.finalize()
        }
    }

    /// Drops `upload`'s chain (committed, discarded or expired).
    func forget(_ upload: UUID) {
        state.withLock { state in
            state.chains[upload]?.wakeAll()
            state.chains[upload] = nil
        }
    }

    /// How many chains are kept (for tests).
    var count: Int { state.withLock { $0.chains.count } }
}
