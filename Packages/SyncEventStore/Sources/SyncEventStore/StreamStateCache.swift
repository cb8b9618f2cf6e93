import Dispatch
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
/// - past `capacity` states and a quarter, clean ones are dropped all at once rather than one by one;
///   buffered ones stay until written.
/// Emptying it loses buffered states, never their events: the projection's checkpoint is still where the
/// rows hold everything, and the store catches the rows up from there. Folded states dropped unwritten are a
/// loss the store is told of (`foldedLoss`): the log does not hold their events.
@usableFromInline
final class StreamStateCache<Key: Hashable & Comparable & Sendable, State: Sendable>: Sendable {
    @usableFromInline typealias Entry = StreamStateEntry<Key, State>

    @usableFromInline
    struct Storage: @unchecked Sendable {
        @usableFromInline var dataVersion: Int64?
        /// The states of `dirty` and `folded`: kept until written.
        @usableFromInline var held: [Key: Entry] = [:]
        /// The other states, as their rows hold them: dropped all at once (`dropClean`).
        @usableFromInline var clean: [Key: Entry] = [:]
        /// Streams whose rows are behind their state here.
        @usableFromInline var dirty: Set<Key> = []
        /// The log position buffered states hold; nil when none is buffered.
        @usableFromInline var heldThrough: Int64?
        /// Streams whose rows are behind their state here by folded events only: each row is its own
        /// snapshot and stays one when written.
        @usableFromInline var folded: Set<Key> = []
        /// Whether folded states were dropped unwritten since the store last dealt with it.
        @usableFromInline var foldedLost = false
        /// The order flushes take `dirty` and `folded` in, sorted once per pass rather than once per page.
        @usableFromInline var dirtyOrder = FlushOrder<Key>()
        @usableFromInline var foldedOrder = FlushOrder<Key>()
        /// Keys visited and comparisons made by passes over the cache since it was made (flushes taking pages
        /// of `dirty` and `folded`, drops of clean states): what a test reads to see that a long pull costs
        /// O(n log n), not O(n²), in the records it writes.
        @usableFromInline var work = 0

        @inlinable
        init() {}

        /// The state of `key`, held or clean.
        @inlinable
        func entry(_ key: Key) -> Entry? { held[key] ?? clean[key] }

        /// Keeps `entry` as held (its key buffered or folded) or clean.
        @inlinable
        mutating func keep(_ entry: Entry) {
            if dirty.contains(entry.key) || folded.contains(entry.key) {
                clean.removeValue(forKey: entry.key)
                held[entry.key] = entry
            } else {
                held.removeValue(forKey: entry.key)
                clean[entry.key] = entry
            }
        }

        /// Drops every clean state once the cache holds a quarter more than `capacity`: buffered and folded
        /// ones are at most `capacity` (`markDirty`, `markFolded`), so each drop frees at least a quarter of
        /// it. The clean states are a dictionary of their own, so dropping them is replacing it, and freeing
        /// them happens on another thread: filtering one dictionary of every state took 25–35 ms, inside the
        /// transaction that crossed the bound, which a local edit then waited for; dropping at `capacity`
        /// itself made every transaction do it once buffered states filled the cache.
        @inlinable
        mutating func dropClean(toFit capacity: Int) {
            guard held.count + clean.count > capacity + capacity / 4, !clean.isEmpty else { return }
            work += clean.count
            nonisolated(unsafe) let dropped = clean
            clean = [:]
            DispatchQueue.global(qos: .utility).async { withExtendedLifetime(dropped) {} }
        }

        /// Empties the cache, keeping `dataVersion`; folded states dropped unwritten are a loss.
        @inlinable
        mutating func empty() {
            let version = dataVersion
            let lost = foldedLost || !folded.isEmpty
            let done = work
            self = Storage()
            dataVersion = version
            foldedLost = lost
            work = done
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
        storage.withLock { $0.entry(key) }
    }

    /// Whether the states here and the rows together hold the log's state at `position`, the rows being at
    /// `checkpoint`.
    @inlinable
    func holds(position: Int64, checkpoint: Int64) -> Bool {
        storage.withLock { $0.dirty.isEmpty ? checkpoint == position : $0.heldThrough == position }
    }

    /// Whether buffered and folded states take three quarters of the capacity or more: the rest may not hold
    /// the next page, whose records would then be written with it, scattered over the table.
    var isNearlyFull: Bool {
        guard capacity > 0 else { return false }
        return storage.withLock { ($0.dirty.count + $0.folded.count) * 4 >= capacity * 3 }
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
            for entry in entries { storage.keep(entry) }
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
                storage.dirty.insert(entry.key)
                storage.keep(entry)
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
                storage.keep(entry)
            }
            storage.dropClean(toFit: capacity)
            guard storage.dirty.isEmpty, let held = storage.heldThrough else { return nil }
            storage.heldThrough = nil
            return held
        }
    }

    /// The buffered states among `keys`, in no order: the caller, compiled for its model, sorts them.
    @inlinable
    func dirtyEntries(among keys: Set<Key>) -> [Entry] {
        storage.withLock { storage in
            keys.compactMap { storage.dirty.contains($0) ? storage.held[$0] : nil }
        }
    }

    /// Up to `limit` buffered states, in key order within a pass over them (see `FlushOrder`): a flush of n
    /// states in pages costs O(n log n) in all, however small its pages.
    @inlinable
    func nextDirty(_ limit: Int) -> [Entry] {
        storage.withLock { storage in
            let keys = storage.dirtyOrder.take(limit, of: storage.dirty, work: &storage.work)
            return keys.compactMap { storage.held[$0] }
        }
    }

    /// Sorts the keys of the next pass of buffered and of folded states, when one is due, here rather than in
    /// the flush transaction that takes the pass's first page: sorting 15,000 keys took about 5 ms of a
    /// transaction that a local edit may wait for.
    func prepareFlush() {
        let due = storage.withLock { storage in
            (
                storage.dirtyOrder.needsPass && !storage.dirty.isEmpty ? Array(storage.dirty) : nil,
                storage.foldedOrder.needsPass && !storage.folded.isEmpty ? Array(storage.folded) : nil
            )
        }
        guard due.0 != nil || due.1 != nil else { return }
        var work = 0
        let dirty = due.0.map { FlushOrder.sorted($0, work: &work) }
        let folded = due.1.map { FlushOrder.sorted($0, work: &work) }
        storage.withLock { storage in
            if let dirty { storage.dirtyOrder.begin(dirty) }
            if let folded { storage.foldedOrder.begin(folded) }
            storage.work += work
        }
    }

    /// What passes over the cache have visited and compared so far (`Storage.work`).
    var work: Int { storage.withLock { $0.work } }

    @inlinable
    func clear() {
        storage.withLock { $0.empty() }
    }

    // MARK: Folded states

    func rowState(_ key: Key) -> RowState {
        storage.withLock { storage in
            if storage.dirty.contains(key) { return .buffered }
            if storage.folded.contains(key) { return .snapshot }
            switch storage.entry(key)?.rowIsSnapshot {
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
                storage.folded.insert(entry.key)
                storage.keep(entry)
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
                if capacity > 0 || storage.dirty.contains(entry.key) {
                    storage.keep(entry)
                } else {
                    storage.held.removeValue(forKey: entry.key)
                }
            }
            storage.dropClean(toFit: capacity)
        }
    }

    /// The states among `keys` holding folded events, in no order.
    @inlinable
    func foldedEntries(among keys: Set<Key>) -> [Entry] {
        storage.withLock { storage in
            keys.compactMap { storage.folded.contains($0) ? storage.held[$0] : nil }
        }
    }

    /// Up to `limit` states holding folded events, in key order within a pass over them (see `FlushOrder`).
    @inlinable
    func nextFolded(_ limit: Int) -> [Entry] {
        storage.withLock { storage in
            let keys = storage.foldedOrder.take(limit, of: storage.folded, work: &storage.work)
            return keys.compactMap { storage.held[$0] }
        }
    }
}

/// The order in which flushes take the keys of a set that changes between them: the set sorted once, then
/// walked page by page.
///
/// A flush writes buffered states in pages (one transaction each, sized so that local writes wait little), and
/// each page in key order, which is the order the table's index wants. Sorting the whole set for each page made
/// a flush of n states in pages of p cost n²/p·log n: 25,000 buffered states in pages of a few hundred stalled a
/// device for seconds. Here a pass sorts the set once and each page walks on from where the last stopped,
/// skipping keys written meanwhile by another way (a local write flushes its own records); keys added after
/// the sort wait for the next pass, which starts when this one is used up. Every key is visited once per pass
/// and sorted once per pass it is in, so a flush costs O(n log n) whatever its pages.
@usableFromInline
struct FlushOrder<Key: Hashable & Comparable & Sendable>: Sendable {
    @usableFromInline var keys: [Key] = []
    @usableFromInline var next = 0

    @inlinable
    init() {}

    /// Whether the next `take` starts a pass (sorts).
    @inlinable
    var needsPass: Bool { next == keys.count }

    /// Starts a pass with `sorted`, the collection's keys sorted by the caller (outside whatever it must not
    /// hold while sorting), unless one is under way.
    @inlinable
    mutating func begin(_ sorted: [Key]) {
        guard needsPass else { return }
        keys = sorted
        next = 0
    }

    /// `keys` sorted, the comparisons counted in `work`.
    @inlinable
    static func sorted(_ keys: [Key], work: inout Int) -> [Key] {
        var keys = keys
        var comparisons = 0
        keys.sort {
            comparisons += 1
            return $0 < $1
        }
        work += comparisons
        return keys
    }

    /// Up to `limit` keys of `set`, in key order within a pass; `work` counts the keys visited and the
    /// comparisons made.
    @inlinable
    mutating func take(_ limit: Int, of set: Set<Key>, work: inout Int) -> [Key] {
        take(limit, count: set.count, contains: { set.contains($0) }, keys: { Array(set) }, work: &work)
    }

    /// Up to `limit` keys of a collection of `count` keys, `contains` telling which are in it and `keys`
    /// listing them all (for a new pass), in key order within a pass.
    @inlinable
    mutating func take(
        _ limit: Int, count: Int, contains: (Key) -> Bool, keys all: () -> [Key], work: inout Int
    ) -> [Key] {
        var taken: [Key] = []
        guard limit > 0, count > 0 else { return taken }
        var sorted = false
        while taken.count < limit {
            if next == keys.count {
                // A new pass: what the collection holds now, once per call at most (it is not empty), and
                // only for a page that took nothing yet: the keys it took are still in it until written.
                guard !sorted, taken.isEmpty else { break }
                sorted = true
                keys = Self.sorted(all(), work: &work)
                next = 0
            }
            let key = keys[next]
            next += 1
            work += 1
            if contains(key) { taken.append(key) }
        }
        if next == keys.count {
            keys = []
            next = 0
        }
        return taken
    }
}
