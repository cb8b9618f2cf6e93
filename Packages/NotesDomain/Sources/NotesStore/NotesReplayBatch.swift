import Dispatch
import NotesDomain
import SyncEventStore
import SyncModels

/// Replayed note events gathered for one parallel apply: each with its note, its type, clock, dot and a copy
/// of its payload bytes (a `ReplayedEvent`'s bytes live only until the next row).
///
/// Notes are independent CRDTs, so `apply(worker:of:)` splits the batch by note: worker `w` of `n` applies
/// the events of the notes whose slot is `w` modulo `n`. Each note still sees its events in replay order, so
/// the result is the same as a serial apply, event for event.
///
/// `@unchecked Sendable`: the batch crosses to worker threads with references to mutable notes. This is
/// race-free because (1) each note is mutated by exactly one worker, the one its slot maps to, (2) the
/// thread that filled the batch does not touch it, nor the state of any note in it, until
/// `NotesReplayPipeline` has waited for every worker to finish, and (3) the batch's own arrays are only read
/// by the workers.
struct NotesReplayBatch: @unchecked Sendable {
    struct Entry {
        /// Not retained (a retain and a release per event, on two threads, showed in profiles): the working
        /// set that made the batch owns every note and outlives it (`NotesProjection.replay` finishes the
        /// pipeline before the working set goes).
        unowned(unsafe) var note: NotesWorkingSet.Note
        var slot: Int
        var kind: NoteEventType
        var hlc: HLCTimestamp
        var dot: Dot
        var payloadStart: Int
        var payloadCount: Int
    }

    /// Events per batch, at most, before it is applied. Large, so that a note has several events in a batch
    /// to apply together (65,536 measured 12% faster than 8,192 on a 1M-event rebuild); two batches, about
    /// 15 MB each, are alive at a time.
    static let maximumCapacity = 65536

    private(set) var entries: [Entry] = []
    private var payloads: [UInt8] = []
    /// Events this batch takes before it is applied (`NotesReplayPipeline` starts small and grows it).
    var capacity: Int

    init(capacity: Int = Self.maximumCapacity) {
        self.capacity = capacity
        // Grown as filled: a short replay (catch-up on open) stays small.
        entries.reserveCapacity(min(capacity, 1024))
        payloads.reserveCapacity(min(capacity, 1024) * 128)
    }

    var count: Int { entries.count }
    var isFull: Bool { entries.count >= capacity }

    mutating func append(_ note: NotesWorkingSet.Note, slot: Int, kind: NoteEventType, _ event: ReplayedEvent) {
        entries.append(
            Entry(
                note: note, slot: slot, kind: kind, hlc: event.hlc, dot: event.dot, payloadStart: payloads.count,
                payloadCount: event.payload.count))
        payloads.append(contentsOf: event.payload)
    }

    mutating func removeAll() {
        entries.removeAll(keepingCapacity: true)
        payloads.removeAll(keepingCapacity: true)
    }

    /// Applies the events of the notes that fall to `worker` of `workers`, note by note: each note's events in
    /// batch order, all of one note before the next. A note's state is a dozen separate allocations, and
    /// events of random notes in a row miss the cache on every one of them; a note's events together find
    /// it warm.
    func apply(worker: Int, of workers: Int) {
        // Slot in the high half, batch index in the low half: sorted, the keys group by note and keep each
        // note's order.
        var keys: [UInt64] = []
        keys.reserveCapacity(workers == 1 ? entries.count : entries.count / workers * 2)
        for (index, entry) in entries.enumerated() where workers == 1 || entry.slot % workers == worker {
            keys.append(UInt64(entry.slot) << 32 | UInt64(index))
        }
        keys.sort()
        payloads.withUnsafeBytes { payloads in
            entries.withUnsafeBufferPointer { entries in
                for key in keys {
                    let entry = entries[Int(key & 0xFFFF_FFFF)]
                    let payload = UnsafeRawBufferPointer(
                        rebasing: payloads[entry.payloadStart..<entry.payloadStart + entry.payloadCount])
                    entry.note.state.apply(entry.kind, payloadBytes: payload, hlc: entry.hlc, dot: entry.dot)
                }
            }
        }
    }
}

/// Applies replay batches on worker threads while the replaying thread reads the next batch from the log:
/// reading and applying overlap, and applying is split by note into parts that `workers` threads share.
///
/// Batches start small and grow with the replay, each a quarter of the events before it, up to
/// `NotesReplayBatch.maximumCapacity`: a short replay (a few thousand events) is then applied while it is
/// read too, instead of in one batch after the reading, and the last batch, applied after the reading, is
/// at most about a fifth of any replay.
///
/// Owned by one replaying thread; `finish()` must be called before the notes are read or saved.
final class NotesReplayPipeline {
    /// Below this many events a batch is applied on the calling thread: waking workers costs more.
    static let parallelThreshold = 1024
    /// Parts each batch is split into per worker thread.
    static let partsPerWorker = 4

    let workers: Int
    private let group = DispatchGroup()
    /// The batch being applied in the background, kept to be reused once it is done.
    private var inFlight: NotesReplayBatch?
    /// The capacity of the next batch.
    private var nextCapacity: Int
    /// Events submitted so far.
    private var submitted = 0

    init(workers: Int) {
        self.workers = max(1, workers)
        // On one thread nothing overlaps: batches are as large as they go from the start.
        nextCapacity = workers > 1 ? Self.parallelThreshold : NotesReplayBatch.maximumCapacity
    }

    /// The first batch to fill.
    func firstBatch() -> NotesReplayBatch {
        NotesReplayBatch(capacity: nextCapacity)
    }

    /// Batches smaller than this, while the log is still being read, are applied on one thread fewer than
    /// `workers`: the reading thread, which every batch waits for, keeps a core to itself. (Larger batches
    /// come once a replay is long, where applying is most of the work and takes every core.)
    static let sharedCoreThreshold = 8192

    /// Waits for the batch in flight, then starts applying `batch` (in the background when it is large
    /// enough and there is more than one worker), and returns an empty batch to fill next. `last`: no batch
    /// follows (the reading is done).
    func submit(_ batch: NotesReplayBatch, last: Bool = false) -> NotesReplayBatch {
        group.wait()
        var spare = inFlight ?? NotesReplayBatch()
        inFlight = nil
        submitted += batch.count
        if workers > 1 {
            nextCapacity = min(max(Self.parallelThreshold, submitted / 4), NotesReplayBatch.maximumCapacity)
        }
        spare.capacity = nextCapacity
        if workers == 1 || batch.count < Self.parallelThreshold {
            batch.apply(worker: 0, of: 1)
        } else {
            inFlight = batch
            // More parts than threads: a thread that finishes its part early takes the next one, so one
            // slow part (a few long notes) does not leave a core idle until the batch ends.
            let threads = last || batch.count >= Self.sharedCoreThreshold ? workers : workers - 1
            let parts = threads * Self.partsPerWorker
            DispatchQueue.global().async(group: group) {
                if threads == 1 {
                    batch.apply(worker: 0, of: 1)
                } else {
                    DispatchQueue.concurrentPerform(iterations: parts) { batch.apply(worker: $0, of: parts) }
                }
            }
        }
        spare.removeAll()
        return spare
    }

    /// Waits until every submitted batch is applied.
    func finish() {
        group.wait()
        inFlight = nil
    }
}
