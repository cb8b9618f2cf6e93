import GRDB
import SyncModels
import SyncStorage

/// A read model derived from the event log: read tables plus a checkpoint, kept current in the same
/// transaction as every write to the log.
///
/// Rules, relied on by the store:
/// - `apply` is **pure** (it reads and writes only its own tables) and **idempotent** (applying an event it
///   already applied changes nothing), so catch-up after a crash and replays are safe.
/// - Its tables are **derived**: declare them in `derivedTables` of its migrations; `rebuild` may empty them.
/// - **Snapshots** make pruning possible: `saveSnapshot` stores the current state as the base that
///   `restoreSnapshot` returns to. The store only calls `saveSnapshot` when the state is the fold of exactly
///   the confirmed events it is about to delete from the log, so "restore the snapshot, then replay what is
///   left in the log" always rebuilds the same state. With no snapshot saved, restoring empties the tables.
public protocol Projection: Sendable {
    /// Unique among the store's projections; the key of its checkpoint.
    var name: String { get }
    /// Bump when `apply` changes meaning: the store rebuilds the projection the next time it opens.
    var version: Int { get }
    /// Registers the projection's schema (its own migration identifiers, prefixed with its name).
    func registerMigrations(into migrations: inout SchemaMigrations)
    /// Applies events, in the order given (canonical order during rebuilds, arrival order otherwise).
    func apply(_ events: [StoredEvent], in db: Database) throws
    /// Applies a long replay (rebuild, catch-up, time travel) that arrives in batches: `batches` calls its
    /// argument once per batch, in order. The default applies each batch with `apply`; a projection whose
    /// per-batch cost is loading and saving state overrides it to keep state in memory across the batches
    /// and save once at the end.
    func applyStream(_ batches: (_ consume: ([StoredEvent]) throws -> Void) throws -> Void, in db: Database) throws
    /// Replaces the state of `streams` (all streams when nil) with their snapshot state, or removes it when
    /// no snapshot holds them.
    func restoreSnapshot(streams: Set<String>?, in db: Database) throws
    /// Saves the whole current state as the snapshot (replacing the previous one).
    func saveSnapshot(in db: Database) throws
    /// Saves the whole current state as the snapshot when `stable` says it folds only history at or below
    /// the scopes' stable points (every replica has seen it, and whatever comes next was made after it): a
    /// projection may then purge what no later event can need (tombstones, deleted records). The default
    /// saves as `saveSnapshot(in:)` does.
    func saveSnapshot(in db: Database, stable: Bool) throws
    /// The streams a stable fold ends for good (a deleted note: nothing can be appended to it any more, and
    /// every replica has seen its end), asked inside a stable prune's transaction with the projection
    /// holding exactly the folded state, before `saveSnapshot(in:stable:)` purges them. The store then
    /// forgets their versions (its `streams` table), so that what a device keeps grows with its live
    /// streams rather than with every stream it ever saw. A stream the log still holds events of keeps its
    /// version. The default: none.
    func retiredStreams(in db: Database) throws -> Set<String>
    /// `retiredStreams(in:)` among `streams` only: what a stepped prune asks for the streams one step folds.
    /// The default filters `retiredStreams(in:)`; a projection that can look a stream up by itself answers
    /// without reading every retired stream at each step (a cost that grew with the steps times the deleted
    /// records).
    func retiredStreams(among streams: Set<String>, in db: Database) throws -> Set<String>
    /// The streams whose record holds an open conflict (concurrent values kept for review), as the
    /// projection's tables show them now, retired records left out: what the sync engine journals as
    /// opened and resolved and counts in `EngineStatus`. Asked once per applied answer, so it must cost
    /// about the conflicts it finds, not the table (an index). The default: none.
    func streamsInConflict(in db: Database) throws -> Set<String>
    /// A digest of each row the projection shows, by the row's key (any hash; compared only within one
    /// process): a deep verification compares them before and after a rebuild to find rows changed or lost
    /// behind the store's back (`EventStore.rebuildDamaged()`). Nil (the default): the projection cannot say.
    func rowDigests(in db: Database) throws -> [String: Int]?
    /// Forgets the saved snapshot, so that restoring empties the tables (a reset drops the history the
    /// snapshot folded).
    func discardSnapshot(in db: Database) throws
    /// The order a rebuild replays the log in. `.canonical` unless the projection says otherwise.
    var replayOrder: ReplayOrder { get }
}

/// The order a rebuild feeds a projection the log in.
public enum ReplayOrder: Sendable, Hashable {
    /// Confirmed events by `(scope, seq)`, then pending events by local order (docs/ARCHITECTURE.md, "From a local edit
    /// to every replica"): the same on every replica. What a projection whose result depends on order needs.
    case canonical
    /// The order events were written to this log (their `position`), which is the order incremental
    /// application saw them in (rollbacks aside). Only for projections that reach the same state in any
    /// order (CRDTs, docs/ARCHITECTURE.md, "From a local edit to every replica"): it reads the log as a plain table
    /// scan instead of walking the `seq` index.
    case arrival
}

extension Projection {
    public func saveSnapshot(in db: Database, stable: Bool) throws {
        try saveSnapshot(in: db)
    }

    public func retiredStreams(in db: Database) throws -> Set<String> { [] }

    public func streamsInConflict(in db: Database) throws -> Set<String> { [] }

    public func rowDigests(in db: Database) throws -> [String: Int]? { nil }

    public func retiredStreams(among streams: Set<String>, in db: Database) throws -> Set<String> {
        guard !streams.isEmpty else { return [] }
        return try retiredStreams(in: db).intersection(streams)
    }

    public var replayOrder: ReplayOrder { .canonical }

    public func applyStream(
        _ batches: (_ consume: ([StoredEvent]) throws -> Void) throws -> Void, in db: Database
    ) throws {
        try batches { try apply($0, in: db) }
    }
}

/// One event of the log as a replay reads it: the envelope fields a projection routes on, with the text
/// ones (`scope`, `stream`, `type`) and the payload's canonical JSON as SQLite's bytes, unparsed and
/// uncopied. Valid only inside the call that receives it: the bytes are SQLite's, and the next row
/// overwrites them.
public struct ReplayedEvent {
    public let position: Int64
    public let hlc: HLCTimestamp
    public let dot: Dot
    /// UTF-8 of the scope name, in place.
    public let scopeBytes: UnsafeRawBufferPointer
    /// UTF-8 of the stream (aggregate) name, in place.
    public let streamBytes: UnsafeRawBufferPointer
    /// UTF-8 of the event type, in place.
    public let typeBytes: UnsafeRawBufferPointer
    /// Canonical JSON of the payload, in place.
    public let payload: UnsafeRawBufferPointer

    public init(
        position: Int64, hlc: HLCTimestamp, dot: Dot, scopeBytes: UnsafeRawBufferPointer,
        streamBytes: UnsafeRawBufferPointer, typeBytes: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer
    ) {
        self.position = position
        self.hlc = hlc
        self.dot = dot
        self.scopeBytes = scopeBytes
        self.streamBytes = streamBytes
        self.typeBytes = typeBytes
        self.payload = payload
    }

    /// The scope name (allocates a `String`).
    public var scope: String { String(decoding: scopeBytes, as: UTF8.self) }
    /// The stream name (allocates a `String`).
    public var stream: String { String(decoding: streamBytes, as: UTF8.self) }
    /// The event type (allocates a `String` past 15 bytes).
    public var type: String { String(decoding: typeBytes, as: UTF8.self) }
}

/// A projection that replays straight from the rows of the log, without decoding whole events (no event id,
/// no parsed payload): the store feeds rebuilds and catch-up through `replay` instead of `applyStream`.
/// Both must give the same state.
public protocol RowReplayingProjection: Projection {
    /// Applies the events `rows` feeds to its argument, one at a time, in order.
    func replay(_ rows: (_ consume: (ReplayedEvent) throws -> Void) throws -> Void, in db: Database) throws
}

/// A projection that can hold the effect of events in memory and write its tables later (write-behind).
///
/// Applying a page of pulled events costs, for a projection of records that are expensive to save (a note is
/// its whole CRDT state), one save per record the page touches. During a long pull (a new device, a week
/// offline) the same records are touched page after page; buffering lets each be saved once per flush
/// instead of once per page. The engine asks for it with `EventStore.applySyncResponse(…, deferProjections:)`
/// and writes what is buffered with `EventStore.flushProjections(limit:)`.
///
/// Rules, relied on by the store:
/// - The store's checkpoint for the projection stays where its tables hold everything (the last position
///   before buffering began) until a flush writes the last buffered record. A crash loses only memory: on
///   open the projection catches up from that checkpoint, re-applying events some records already hold,
///   which `apply` being idempotent makes harmless. Records may therefore be written in any order and in
///   several transactions.
/// - Buffered state is lost, never wrong: whenever the projection cannot vouch for it (a transaction rolled
///   back, another connection wrote the file, its tables were restored or rebuilt), it drops it, and the
///   store then catches the tables up from the checkpoint.
public protocol BufferingProjection: Projection {
    /// Applies `events` (the non-rejected ones among the log's positions after `position`, up to `last`) to
    /// the state held in memory, without writing tables. Accepts only when memory holds the log's state at
    /// `position`: its tables at `checkpoint` plus what it buffered through `position`. Returns false,
    /// having changed nothing, otherwise; the store then applies the events the ordinary way.
    func buffer(_ events: [StoredEvent], after position: Int64, through last: Int64, checkpoint: Int64, in db: Database)
        throws -> Bool
    /// The log position the buffered state holds, or nil when nothing is buffered.
    var bufferedThrough: Int64? { get }
    /// Writes buffered records (only those of `streams` when given), at most `limit` of them, inside the
    /// caller's transaction.
    func flush(streams: Set<String>?, limit: Int, in db: Database) throws -> ProjectionFlush
    /// Whether memory is nearly full of buffered records: the store then writes them at once (in key order,
    /// a pass at a time) rather than letting later pages find no room and write their records one page at a
    /// time, scattered over the table's indexes. False by default.
    var needsFlush: Bool { get }
    /// Readies the next `flush(streams: nil, …)` outside its transaction (sorting what it will write, for
    /// one), so that the transaction holds the store's writer for the writing only. Nothing by default.
    func prepareFlush()
}

extension BufferingProjection {
    public var needsFlush: Bool { false }
    public func prepareFlush() {}
}

/// What one `BufferingProjection.flush` wrote.
public struct ProjectionFlush: Sendable, Hashable {
    /// The streams of the records written.
    public var streams: Set<String>
    /// The log position the tables hold in full, once the flush wrote the last buffered record; nil while
    /// some remain.
    public var heldThrough: Int64?

    public init(streams: Set<String>, heldThrough: Int64?) {
        self.streams = streams
        self.heldThrough = heldThrough
    }
}

/// A projection whose snapshot can move forward for some streams only, leaving the others' as they are.
///
/// A stable prune (`EventStore.prune(stablePoints:)`) then costs what it folds: when every projection
/// conforms, it folds in bounded steps, each one transaction, touching only the streams whose events it
/// deletes, instead of restoring, saving and rebuilding the whole projection in one transaction (which held
/// the store's writer, and so every local edit, for seconds after a large pull).
public protocol StreamSnapshotProjection: Projection {
    /// Saves the current state of `streams` as their snapshot, replacing what the snapshot held for them;
    /// the snapshot of every other stream stays as it was. `stable` as in `saveSnapshot(in:stable:)`: the
    /// state of these streams folds only history at or below the stable points, and may be purged.
    func saveSnapshot(streams: Set<String>, stable: Bool, in db: Database) throws
    /// Folds `events` (confirmed, in canonical order, all of `streams`) into the snapshot of `streams`,
    /// whose current state holds more than the fold (events the log keeps: pending, later, or of other
    /// scopes); their current state stays as it is. `stable` as in `saveSnapshot(in:stable:)`, for the
    /// folded state.
    func foldIntoSnapshot(_ events: [StoredEvent], streams: Set<String>, stable: Bool, in db: Database) throws
}

/// A projection that can take pulled events as folded history on arrival (docs/ARCHITECTURE.md, "Compaction and
/// retention"): events every other replica has acknowledged (at or below the answer's `othersStable`), of a stream this
/// replica has nothing of its own pending in, change the stream's state and its snapshot alike, and the log never holds
/// them.
///
/// It is what a stable prune right after the pull would leave, without the log's rows that the prune would
/// write and then delete: a new device pulling a long unfolded history (no server compaction, or one that
/// has not run yet) stores its state, not the history.
///
/// Rules, relied on by the store:
/// - A stream is *foldable* when its current state is its snapshot: nothing has been applied to it since
///   the snapshot was saved but folded events. Its events in the log, pending or confirmed, make it not
///   foldable until a prune folds them.
/// - Folded events may be held in memory (`applyFolded(…, deferSaves: true)`) and written by `flush`, like
///   buffered ones; they are written before any event the log holds is applied to the same stream, so that
///   the snapshot a later change copies holds them.
/// - Folded events held in memory are lost, never wrong: when the projection drops them unwritten (a
///   transaction rolled back, another connection wrote the file), it says so (`foldedLoss`); the log cannot
///   give them back, so the store moves its cursor back to before them and pulls them again.
/// - Folding applies no purge: an event still to come may have been made before its maker saw one folded
///   now. Once the pull has reached the stable point it folded at, the store purges the folded streams with
///   `saveSnapshot(streams:stable: true)`.
public protocol ArrivalFoldingProjection: BufferingProjection, StreamSnapshotProjection {
    /// Among `streams`, those whose current state is their snapshot (see the rules).
    func foldable(_ streams: Set<String>, in db: Database) throws -> Set<String>
    /// Applies `events` (confirmed, of foldable streams, in the order pulled) to the current state of their
    /// streams, which stays their snapshot. With `deferSaves`, the projection may keep them in memory until
    /// `flush`; returns whether it did.
    func applyFolded(_ events: [StoredEvent], deferSaves: Bool, in db: Database) throws -> Bool
    /// Whether folded events are held in memory, not written yet.
    var holdsFolded: Bool { get }
    /// Whether folded events held in memory were dropped unwritten since `clearFoldedLoss()`.
    var foldedLoss: Bool { get }
    /// Forgets a loss the store has dealt with (it moved its cursor back before the lost events).
    func clearFoldedLoss()
    /// The streams of `scope` whose current state is their snapshot: what a purge of folded history visits.
    func snapshotStreams(scope: String, in db: Database) throws -> [String]
}
