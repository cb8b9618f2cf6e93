import Dispatch
import SyncModels

/// Replayed events gathered for one parallel apply: each with its record, its kind, clock, dot and a copy of
/// its payload bytes (a `ReplayedEvent`'s bytes live only until the next row).
///
/// Records are independent CRDTs, so `apply(worker:of:)` splits the batch by record: worker `w` of `n`
/// applies the events of the records whose slot is `w` modulo `n`. Each record still sees its events in
/// replay order, so the result is the same as a serial apply, event for event.
///
/// `@unchecked Sendable`: the batch crosses to worker threads with references to mutable entries. This is
/// race-free because (1) each entry is mutated by exactly one worker, the one its slot maps to, (2) the
/// thread that filled the batch does not touch it, nor the state of any entry in it, until
/// `StreamStateReplayPipeline` has waited for every worker to finish, and (3) the batch's own arrays are only
/// read by the workers.
@usableFromInline
struct StreamStateReplayBatch<Model: StreamStateReplayModel>: @unchecked Sendable {
    @usableFromInline
    struct Entry {
        /// Not retained (a retain and a release per event, on two threads, showed in profiles): the working
        /// set that made the batch owns every entry and outlives it (`StreamStateProjection.replay` finishes
        /// the pipeline before the working set goes).
        @usableFromInline unowned(unsafe) var entry: StreamStateEntry<Model.Key, Model.State>
        @usableFromInline var slot: Int
        @usableFromInline var kind: Model.Kind
        @usableFromInline var hlc: HLCTimestamp
        @usableFromInline var dot: Dot
        @usableFromInline var payloadStart: Int
        @usableFromInline var payloadCount: Int

        @inlinable
        init(
            entry: StreamStateEntry<Model.Key, Model.State>, slot: Int, kind: Model.Kind, hlc: HLCTimestamp,
            dot: Dot, payloadStart: Int, payloadCount: Int
        ) {
            self.entry = entry
            self.slot = slot
            self.kind = kind
            self.hlc = hlc
            self.dot = dot
            self.payloadStart = payloadStart
            self.payloadCount = payloadCount
        }
    }

    /// Events per batch, at most, before it is applied. Large, so that a record has several events in a batch
    /// to apply together (65,536 measured 12% faster than 8,192 on a 1M-event rebuild); two batches, about
    /// 15 MB each, are alive at a time.
    @inlinable
    static var maximumCapacity: Int { 65536 }

    @usableFromInline var entries: [Entry] = []
    @usableFromInline var payloads: [UInt8] = []
    /// Events this batch takes before it is applied (`StreamStateReplayPipeline` starts small and grows it).
    @usableFromInline var capacity: Int
    @usableFromInline let model: Model

    @inlinable
    init(model: Model, capacity: Int = Self.maximumCapacity) {
        self.model = model
        self.capacity = capacity
        // Grown as filled: a short replay (catch-up on open) stays small.
        entries.reserveCapacity(min(capacity, 1024))
        payloads.reserveCapacity(min(capacity, 1024) * 128)
    }

    @inlinable
    var count: Int { entries.count }
    @inlinable
    var isFull: Bool { entries.count >= capacity }

    @inlinable
    mutating func append(
        _ entry: StreamStateEntry<Model.Key, Model.State>, slot: Int, kind: Model.Kind, _ event: ReplayedEvent
    ) {
        entries.append(
            Entry(
                entry: entry, slot: slot, kind: kind, hlc: event.hlc, dot: event.dot, payloadStart: payloads.count,
                payloadCount: event.payload.count))
        payloads.append(contentsOf: event.payload)
    }

    @inlinable
    mutating func removeAll() {
        entries.removeAll(keepingCapacity: true)
        payloads.removeAll(keepingCapacity: true)
    }

    /// Applies the events of the records that fall to `worker` of `workers`, record by record: each record's
    /// events in batch order, all of one record before the next. A state is often many separate allocations,
    /// and events of random records in a row miss the cache on every one of them; a record's events together
    /// find it warm.
    @inlinable
    func apply(worker: Int, of workers: Int) {
        // Slot in the high half, batch index in the low half: sorted, the keys group by record and keep each
        // record's order.
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
                    model.apply(entry.kind, payload: payload, hlc: entry.hlc, dot: entry.dot, to: &entry.entry.state)
                }
            }
        }
    }
}

/// Applies replay batches on worker threads while the replaying thread reads the next batch from the log:
/// reading and applying overlap, and applying is split by record into parts that `workers` threads share.
///
/// Batches start small and grow with the replay, each a quarter of the events before it, up to
/// `StreamStateReplayBatch.maximumCapacity`: a short replay (a few thousand events) is then applied while it is
/// read too, instead of in one batch after the reading, and the last batch, applied after the reading, is
/// at most about a fifth of any replay.
///
/// Owned by one replaying thread; `finish()` must be called before the states are read or saved.
@usableFromInline
final class StreamStateReplayPipeline<Model: StreamStateReplayModel> {
    @usableFromInline typealias Batch = StreamStateReplayBatch<Model>

    /// Below this many events a batch is applied on the calling thread: waking workers costs more.
    @inlinable
    static var parallelThreshold: Int { 1024 }
    /// Parts each batch is split into per worker thread.
    @inlinable
    static var partsPerWorker: Int { 4 }

    @usableFromInline let model: Model
    @usableFromInline let workers: Int
    @usableFromInline let group = DispatchGroup()
    /// The batch being applied in the background, kept to be reused once it is done.
    @usableFromInline var inFlight: Batch?
    /// The capacity of the next batch.
    @usableFromInline var nextCapacity: Int
    /// Events submitted so far.
    @usableFromInline var submitted = 0

    @inlinable
    init(model: Model, workers: Int) {
        self.model = model
        self.workers = max(1, workers)
        // On one thread nothing overlaps: batches are as large as they go from the start.
        nextCapacity = workers > 1 ? Self.parallelThreshold : Batch.maximumCapacity
    }

    /// The first batch to fill.
    @inlinable
    func firstBatch() -> Batch {
        Batch(model: model, capacity: nextCapacity)
    }

    /// Batches smaller than this, while the log is still being read, are applied on one thread fewer than
    /// `workers`: the reading thread, which every batch waits for, keeps a core to itself. (Larger batches
    /// come once a replay is long, where applying is most of the work and takes every core.)
    @inlinable
    static var sharedCoreThreshold: Int { 8192 }

    /// Waits for the batch in flight, then starts applying `batch` (in the background when it is large
    /// enough and there is more than one worker), and returns an empty batch to fill next. `last`: no batch
    /// follows (the reading is done).
    @inlinable
    func submit(_ batch: Batch, last: Bool = false) -> Batch {
        group.wait()
        var spare = inFlight ?? Batch(model: model)
        inFlight = nil
        submitted += batch.count
        if workers > 1 {
            nextCapacity = min(max(Self.parallelThreshold, submitted / 4), Batch.maximumCapacity)
        }
        spare.capacity = nextCapacity
        if workers == 1 || batch.count < Self.parallelThreshold {
            batch.apply(worker: 0, of: 1)
        } else {
            inFlight = batch
            // More parts than threads: a thread that finishes its part early takes the next one, so one
            // slow part (a few long records) does not leave a core idle until the batch ends.
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
    @inlinable
    func finish() {
        group.wait()
        inFlight = nil
    }
}
