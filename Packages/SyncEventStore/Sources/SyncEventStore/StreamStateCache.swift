import GRDB
import Synchronization

/// Decoded states of streams as the last transaction of this store's writer left them, and the streams
/// whose rows are behind them (buffered, see `StreamStateProjection.buffer`, or folded on arrival).
///
/// Applying a page of pulled events touches a few hundred streams; loading each from its row means decoding
/// its whole state. The cache keeps the states the writer just applied, so the next page finds most of them
/// decoded, and changes them in place.
///
/// It never serves a state other than the table's, or, for a buffered stream, the table's plus the events
/// buffered since:
/// - it is written inside the transaction, and emptied (buffered states included) when that transaction
///   rolls back;
/// - it is emptied when another connection (another process on the same file) has committed since it was
///   filled, which SQLite's `PRAGMA data_version` tells;
/// - it is emptied by every other way the projection changes rows (rebuilds, catch-up, snapshot restores);
/// - past `capacity` states, clean ones are dropped all at once rather than one by one; buffered ones stay
///   until written.
/// Emptying it loses buffered states, never their events: the projection's checkpoint is still where the
/// rows hold everything, and the store catches the rows up from there. Folded states dropped unwritten are a
/// loss the store is told of (`foldedLoss`): the log does not hold their events.
@usableFromInline
final class StreamStateCache<Key: Hashable & Comparable & Sendable, State: Sendable>: Sendable {
    @usableFromInline typealias Entry = StreamStateEntry<Key, State>

    @usableFromInline
    struct Storage: @unchecked Sendable {
        @usableFromInline var dataVersion: Int64?
        @usableFromInline var entries: [Key: Entry] = [:]
        /// Streams whose rows are behind their state here.
        @usableFromInline var dirty: Set<Key> = []
        /// The log position buffered states hold; nil when none is buffered.
        @usableFromInline var heldThrough: Int64?
        /// Streams whose rows are behind their state here by folded events only: each row is its own
        /// snapshot and stays one when written.
        @usableFromInline var folded: Set<Key> = []
        /// Whether folded states were dropped unwritten since the store last dealt with it.
        @usableFromInline var foldedLost = false

        @inlinable
        init() {}

        @inlinable
        mutating func dropClean(toFit capacity: Int) {
            guard entries.count > capacity else { return }
            entries = entries.filter { dirty.contains($0.key) || folded.contains($0.key) }
        }

        /// Empties the cache, keeping `dataVersion`; folded states dropped unwritten are a loss.
        @inlinable
        mutating func empty() {
            let version = dataVersion
            let lost = foldedLost || !folded.isEmpty
            self = Storage()
            dataVersion = version
            foldedLost = lost
        }
    }

    /// What the cache knows of a stream's row.
    enum RowState {
        /// Behind by buffered events the log holds.
        case buffered
        /// Its own snapshot (or no row), possibly behind by folded events held here.
        case snapshot
        /// Changed since its snapshot.
        case changed
        /// Not here, or not known.
        case unknown
    }

    @usableFromInline let capacity: Int
    @usableFromInline let storage = Mutex(Storage())

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// Called at the start of each apply, buffer and flush, inside the writer's transaction: drops everything
    /// if another connection committed since the cache was filled, and empties the cache if this transaction
    /// rolls back.
    @inlinable
    func begin(_ db: Database) throws {
        guard capacity > 0 else { return }
        let version = try Int64.fetchOne(db, sql: "PRAGMA data_version") ?? 0
        storage.withLock { storage in
            if storage.dataVersion != version {
                storage.empty()
                storage.dataVersion = version
            }
        }
        db.afterNextTransaction(onCommit: { _ in }, onRollback: { [weak self] _ in self?.clear() })
    }

    @inlinable
    func entry(_ key: Key) -> Entry? {
        storage.withLock { $0.entries[key] }
    }

    /// Whether the states here and the rows together hold the log's state at `position`, the rows being at
    /// `checkpoint`.
    @inlinable
    func holds(position: Int64, checkpoint: Int64) -> Bool {
        storage.withLock { $0.dirty.isEmpty ? checkpoint == position : $0.heldThrough == position }
    }

    var bufferedThrough: Int64? {
        storage.withLock { $0.dirty.isEmpty ? nil : $0.heldThrough }
    }

    /// Keeps the states just saved.
    @inlinable
    func store(_ entries: [Entry]) {
        guard capacity > 0 else { return }
        storage.withLock { storage in
            guard entries.count <= capacity else { return }
            for entry in entries { storage.entries[entry.key] = entry }
            storage.dropClean(toFit: capacity)
        }
    }

    /// Marks `entries`, which hold the log's state at `last`, as buffered; false, changing nothing, when that
    /// would buffer more than `capacity` states.
    @inlinable
    func markDirty(_ entries: [Entry], through last: Int64) -> Bool {
        storage.withLock { storage in
            let added = entries.reduce(0) { $0 + (storage.dirty.contains($1.key) ? 0 : 1) }
            guard storage.dirty.count + storage.folded.count + added <= capacity else { return false }
            for entry in entries {
                storage.entries[entry.key] = entry
                storage.dirty.insert(entry.key)
            }
            storage.heldThrough = last
            storage.dropClean(toFit: capacity)
            return true
        }
    }

    /// Marks `entries`, just written, as clean; when `last` is given, the log position every state here
    /// holds now. Returns the position the rows hold in full when no buffered state remains.
    @discardableResult @inlinable
    func markClean(_ entries: [Entry], through last: Int64?) -> Int64? {
        storage.withLock { storage in
            if let last { storage.heldThrough = last }
            for entry in entries {
                storage.dirty.remove(entry.key)
                storage.entries[entry.key] = entry
            }
            storage.dropClean(toFit: capacity)
            guard storage.dirty.isEmpty, let held = storage.heldThrough else { return nil }
            storage.heldThrough = nil
            return held
        }
    }

    /// The buffered states (those among `keys` when given), in no order: the caller, compiled for its
    /// model, sorts them.
    @inlinable
    func dirtyEntries(among keys: Set<Key>?) -> [Entry] {
        storage.withLock { storage in
            let candidates = keys.map { $0.intersection(storage.dirty) } ?? storage.dirty
            return candidates.compactMap { storage.entries[$0] }
        }
    }

    @inlinable
    func clear() {
        storage.withLock { $0.empty() }
    }

    // MARK: Folded states

    func rowState(_ key: Key) -> RowState {
        storage.withLock { storage in
            if storage.dirty.contains(key) { return .buffered }
            if storage.folded.contains(key) { return .snapshot }
            switch storage.entries[key]?.rowIsSnapshot {
            case true?: return .snapshot
            case false?: return .changed
            case nil: return .unknown
            }
        }
    }

    @inlinable
    var holdsFolded: Bool { storage.withLock { !$0.folded.isEmpty } }

    var foldedLoss: Bool { storage.withLock { $0.foldedLost } }

    func clearFoldedLoss() { storage.withLock { $0.foldedLost = false } }

    @inlinable
    func isFolded(_ key: Key) -> Bool { storage.withLock { $0.folded.contains(key) } }

    /// Marks `entries` as holding folded events not written; false, changing nothing, when that would hold
    /// more than `capacity` states unwritten.
    @inlinable
    func markFolded(_ entries: [Entry]) -> Bool {
        guard capacity > 0 else { return false }
        return storage.withLock { storage in
            let added = entries.reduce(0) { $0 + (storage.folded.contains($1.key) ? 0 : 1) }
            guard storage.dirty.count + storage.folded.count + added <= capacity else { return false }
            for entry in entries {
                storage.entries[entry.key] = entry
                storage.folded.insert(entry.key)
            }
            storage.dropClean(toFit: capacity)
            return true
        }
    }

    /// Marks `entries`, just written as their own snapshot, as clean.
    @inlinable
    func markFoldedWritten(_ entries: [Entry]) {
        storage.withLock { storage in
            for entry in entries {
                storage.folded.remove(entry.key)
                if capacity > 0 { storage.entries[entry.key] = entry }
            }
            storage.dropClean(toFit: capacity)
        }
    }

    /// The states holding folded events (those among `keys` when given), in no order.
    @inlinable
    func foldedEntries(among keys: Set<Key>?) -> [Entry] {
        storage.withLock { storage in
            let candidates = keys.map { $0.intersection(storage.folded) } ?? storage.folded
            return candidates.compactMap { storage.entries[$0] }
        }
    }
}
