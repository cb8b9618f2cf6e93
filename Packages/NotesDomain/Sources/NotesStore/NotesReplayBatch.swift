import Dispatch
import NotesDomain
import SyncEventStore
import SyncModels

/// Replayed note events gathered for one parallel apply: each with its note's slot in the working set, its
/// type, clock, dot and a copy of its payload bytes (a `ReplayedEvent`'s bytes live only until the next row).
///
/// Notes are independent CRDTs, so `apply(to:workers:)` splits the batch by note: worker `w` applies, in
/// batch order, the events of the notes whose slot is `w` modulo the number of workers. Each note still sees
/// its events in replay order, so the result is the same as a serial apply, event for event.
struct NotesReplayBatch {
    struct Entry {
        var slot: Int
        var kind: NoteEventType
        var hlc: HLCTimestamp
        var dot: Dot
        var payloadStart: Int
        var payloadCount: Int
    }

    /// Events per batch before it is applied.
    static let capacity = 8192
    /// Below this many events a batch is applied on the calling thread: waking workers costs more.
    static let parallelThreshold = 1024

    private(set) var entries: [Entry] = []
    private var payloads: [UInt8] = []

    init() {
        entries.reserveCapacity(Self.capacity)
        payloads.reserveCapacity(Self.capacity * 256)
    }

    var count: Int { entries.count }
    var isFull: Bool { entries.count >= Self.capacity }

    mutating func append(slot: Int, kind: NoteEventType, _ event: ReplayedEvent) {
        entries.append(
            Entry(
                slot: slot, kind: kind, hlc: event.hlc, dot: event.dot, payloadStart: payloads.count,
                payloadCount: event.payload.count))
        payloads.append(contentsOf: event.payload)
    }

    mutating func removeAll() {
        entries.removeAll(keepingCapacity: true)
        payloads.removeAll(keepingCapacity: true)
    }

    /// Applies every event to its note in `notes`, on up to `workers` threads.
    func apply(to notes: inout [NotesWorkingSet.Note], workers: Int) {
        guard !entries.isEmpty else { return }
        payloads.withUnsafeBytes { payloads in
            entries.withUnsafeBufferPointer { entries in
                notes.withUnsafeMutableBufferPointer { notes in
                    let workers = entries.count < Self.parallelThreshold ? 1 : max(1, workers)
                    guard workers > 1 else {
                        Self.apply(entries, payloads, to: notes, worker: 0, of: 1)
                        return
                    }
                    // Each worker writes only the notes whose slot is its own modulo `workers`, and reads
                    // the batch, which nobody writes meanwhile: the buffers are shared without a race.
                    nonisolated(unsafe) let shared = (entries, payloads, notes)
                    DispatchQueue.concurrentPerform(iterations: workers) { worker in
                        Self.apply(shared.0, shared.1, to: shared.2, worker: worker, of: workers)
                    }
                }
            }
        }
    }

    private static func apply(
        _ entries: UnsafeBufferPointer<Entry>, _ payloads: UnsafeRawBufferPointer,
        to notes: UnsafeMutableBufferPointer<NotesWorkingSet.Note>, worker: Int, of workers: Int
    ) {
        for entry in entries where workers == 1 || entry.slot % workers == worker {
            let payload = UnsafeRawBufferPointer(
                rebasing: payloads[entry.payloadStart..<entry.payloadStart + entry.payloadCount])
            notes[entry.slot].state.apply(entry.kind, payloadBytes: payload, hlc: entry.hlc, dot: entry.dot)
        }
    }
}
