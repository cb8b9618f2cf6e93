import GRDB
import SyncModels

/// The streams' versions of pulled pages applied with deferred saves, held in memory until the projections
/// flush.
///
/// **Why.** A page raises the version of every stream it brings (`streams`, what the next local append
/// builds on). A bootstrap applies a page in many short transactions, and each one rewrote the `streams`
/// rows of its streams, scattered over the table: on the churn history (1,000,000 events, 46,000 streams)
/// the device wrote 3.0 GB, against 1.9 GB with the versions deferred, and `sync-agent sync` pulled it in
/// 24.3–24.5 s against 20.6–20.7 s. Deferred, a stream's row is written once per flush (about once a
/// second), in transactions of their own (`SyncEngine` sizes them as it sizes the projections' flushes).
///
/// **Safety.** The log rows are written with their page as before; only the `streams` rows wait. The
/// `streams_through` meta key holds the last position before the first deferred page: `streams` lacks at
/// most the versions of events above it, and the log holds those events. While the key is set, the versions
/// are in memory (`DeferredVersions`); when memory does not have them all (a transaction rolled back, or a
/// process ended with the key set), they are read back from the log above the key. A local append reads a
/// stream's version from `streams` and from memory; a prune and a reset write or drop the deferred versions
/// before they touch `streams`; opening the store writes those a crash left (only when no other store has the
/// file open, `EventStore.openedFirst`).
///
/// **Another store on the file** (another process) may find the key set by this one: memory does not hold
/// those versions there, so it reads them from the log (and removes the key) before it appends, prunes or
/// defers its own. This store then finds the key gone with versions still in memory: it writes them anyway
/// (raising never lowers a version, and memory also holds the versions of events folded on arrival, which
/// no log holds) and clears memory, rather than looking for a key that will not come back.
struct DeferredVersions: Sendable {
    /// Per stream, the highest version deferred and its scope (`""` once a stream has events in two scopes).
    var versions: [String: (version: Int64, scope: String)] = [:]
    /// Whether `streams_through` is set, as of the last commit.
    var marked = false
    /// Whether `versions` holds every version the log has above `streams_through` that `streams` lacks.
    var complete = true
    /// Pages deferred by transactions not yet ended: until they end, memory is not the whole story (a flush
    /// or an append in the same transaction reads the log).
    var inFlight = 0

    /// The order flushes write `versions` in: by stream name, sorted once per pass, so that consecutive
    /// flush transactions touch neighbouring pages of `streams`' unique index rather than pages all over it
    /// (a dictionary's order is random, as are most stream names).
    var order = FlushOrder<String>()
    /// Keys visited and comparisons made by `order` (see `StreamStateCache`'s own count).
    var work = 0

    /// Whether memory holds what `streams` lacks.
    var usable: Bool { complete && inFlight == 0 }

    /// The streams of the next pass, when one is due: sorted by the caller outside the lock and the
    /// transaction, then given to `order` (`FlushOrder.begin`).
    func streamsToSort() -> [String]? {
        order.needsPass && !versions.isEmpty ? Array(versions.keys) : nil
    }

    /// Up to `limit` deferred versions, in stream order within a pass over them.
    mutating func next(_ limit: Int) -> [(String, (version: Int64, scope: String))] {
        let versions = self.versions
        let streams = order.take(
            limit, count: versions.count, contains: { versions[$0] != nil }, keys: { Array(versions.keys) },
            work: &work)
        return streams.compactMap { stream in versions[stream].map { (stream, $0) } }
    }

    /// Nothing deferred (`streams_through` gone); transactions in flight stay counted.
    mutating func clear() {
        versions = [:]
        marked = false
        complete = true
        order = FlushOrder()
    }

    mutating func merge(_ stream: String, _ version: Int64, _ scope: String) {
        if let known = versions[stream] {
            versions[stream] = (max(known.version, version), known.scope == scope ? scope : "")
        } else {
            versions[stream] = (version, scope)
        }
    }
}

extension EventStore {
    static let deferredVersionsKey = "streams_through"

    /// Defers the versions of one page (`versions`, its streams' highest versions and scopes), inserted
    /// after `positionBefore`, inside the caller's transaction.
    func deferVersions(
        _ versions: [String: (version: Int64, scope: String)], after positionBefore: Int64, _ db: Database
    )
        throws
    {
        guard !versions.isEmpty else { return }
        let marked = try Self.meta(Self.deferredVersionsKey, db) != nil
        if !marked { try Self.setMeta(Self.deferredVersionsKey, String(positionBefore), db) }
        deferredVersions.withLock { $0.inFlight += 1 }
        db.afterNextTransaction(
            onCommit: { [self] _ in
                deferredVersions.withLock { state in
                    state.inFlight -= 1
                    if !marked {
                        if state.marked && state.complete {
                            // The key went while memory held versions (another store on the file wrote them
                            // from the log): kept, for those of folded events, which no log holds.
                            for (stream, held) in versions { state.merge(stream, held.version, held.scope) }
                        } else {
                            state.versions = versions
                            state.complete = true
                        }
                        state.marked = true
                    } else if state.marked && state.complete {
                        for (stream, held) in versions { state.merge(stream, held.version, held.scope) }
                    } else {
                        // The key is another store's (another process's): memory never held what it covers.
                        // Taken as this store's, known incomplete: the flush reads the versions from the log
                        // above it, as after a rollback.
                        state.marked = true
                        state.complete = false
                    }
                }
            },
            onRollback: { [self] _ in
                // Whatever memory holds now, the log says it: read it from there next time.
                deferredVersions.withLock { state in
                    state.inFlight -= 1
                    state.complete = false
                }
            })
    }

    /// Whether pulled pages' versions wait in memory (`flushDeferredVersions(limit:)` writes them).
    public var hasDeferredVersions: Bool { deferredVersions.withLock { $0.marked } }

    /// Writes up to `limit` of the streams' versions that pages applied with deferred saves left in memory,
    /// in one transaction. Each dirties a page of `streams` of its own: the sync engine writes them after the
    /// projections' records, in transactions of their own size.
    /// - Returns: true when none is left.
    @discardableResult
    public func flushDeferredVersions(limit: Int) async throws -> Bool {
        // A new pass's streams are sorted here rather than in the transaction (about as long as the writes).
        if let streams = deferredVersions.withLock({ $0.streamsToSort() }) {
            var work = 0
            let sorted = FlushOrder.sorted(streams, work: &work)
            deferredVersions.withLock { state in
                state.order.begin(sorted)
                state.work += work
            }
        }
        return try await database.writer.write { db in try self.flushDeferredVersions(limit: limit, db) }
    }

    /// The version `stream` has in memory above what `streams` holds (0 when none), for a local append (after
    /// `catchUpOthersDeferredVersions`, once per transaction).
    func deferredVersion(of stream: String, _ db: Database) throws -> Int64 {
        let (marked, usable, held) = deferredVersions.withLock { ($0.marked, $0.usable, $0.versions[stream]) }
        guard marked || !usable else { return 0 }
        if usable { return held?.version ?? 0 }
        // Memory lost track (a rollback): write them all from the log, then `streams` has this one too.
        _ = try flushDeferredVersions(limit: .max, db)
        return 0
    }

    /// Before a local append's lookups, once per transaction: with nothing deferred here, another store on
    /// the file (another process) may have deferred versions, which memory does not hold; they are written
    /// from the log first, so that `streams` has them.
    func catchUpOthersDeferredVersions(_ db: Database) throws {
        let (marked, usable) = deferredVersions.withLock { ($0.marked, $0.usable) }
        guard usable, !marked, try Self.meta(Self.deferredVersionsKey, db) != nil else { return }
        _ = try flushDeferredVersions(limit: .max, db)
    }

    /// Writes up to `limit` deferred versions to `streams`, inside the caller's transaction; returns whether
    /// none is left (then `streams_through` is removed, and memory is cleared once the transaction commits).
    func flushDeferredVersions(limit: Int, _ db: Database) throws -> Bool {
        let marker = try Self.meta(Self.deferredVersionsKey, db).flatMap(Int64.init)
        let state = deferredVersions.withLock { $0 }
        // Nothing deferred, in the file or here.
        if marker == nil && !state.marked && state.complete { return true }
        guard state.usable, state.marked else {
            // Memory lost track (a rollback), or the key is another store's (another process's) and memory
            // never held what it covers: the versions are read from the log. Versions of folded events are in
            // no log: those pages are pulled again.
            try rewindIfFoldedLost(db)
            if let marker {
                try Self.raiseVersions(fromLogAfter: marker, db)
                try Self.removeMeta(Self.deferredVersionsKey, db)
            }
            db.afterNextTransaction(
                onCommit: { [self] _ in deferredVersions.withLock { $0.clear() } }, onRollback: { _ in })
            return true
        }
        // With the key gone (another store on the file wrote the versions from the log and removed it), the
        // versions in memory are written all the same, then memory is cleared: raising never lowers a version,
        // and memory also holds those of events folded on arrival, which no log holds. Looking for the key
        // instead would never end (`flushWriteBehind` flushed until memory was clear).
        let written = deferredVersions.withLock { $0.next(max(1, limit)) }
        let raise = try StreamVersionRaise(db)
        for (stream, held) in written { try raise(stream, in: held.scope, to: held.version) }
        let done = written.count == state.versions.count
        if done {
            if marker != nil { try Self.removeMeta(Self.deferredVersionsKey, db) }
            try settleFoldedCursor(db)
        }
        db.afterNextTransaction(
            onCommit: { [self] _ in
                deferredVersions.withLock { state in
                    if done {
                        state.clear()
                    } else {
                        for (stream, _) in written { state.versions[stream] = nil }
                    }
                }
            },
            onRollback: { [self] _ in deferredVersions.withLock { $0.complete = false } })
        return done
    }

    /// Versions a process left deferred when it ended: written from the log, at open (by the first opener
    /// only: the key of a store still open elsewhere is not a leftover, see `EventStore.openedFirst`).
    func catchUpDeferredVersions(_ db: Database) throws {
        guard let marker = try Self.meta(Self.deferredVersionsKey, db).flatMap(Int64.init) else { return }
        try Self.raiseVersions(fromLogAfter: marker, db)
        try Self.removeMeta(Self.deferredVersionsKey, db)
    }

    /// Drops the deferred versions, inside a transaction that rewrites `streams` from the log (a reset).
    func dropDeferredVersions(_ db: Database) throws {
        try Self.removeMeta(Self.deferredVersionsKey, db)
        db.afterNextTransaction(
            onCommit: { [self] _ in deferredVersions.withLock { $0.clear() } }, onRollback: { _ in })
    }

    /// Raises `streams` to the versions of the log's events after `position`, by `StreamVersionRaise`'s rule.
    static func raiseVersions(fromLogAfter position: Int64, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO streams (stream, version, scope)
                SELECT stream, max(stream_version), CASE WHEN min(scope) = max(scope) THEN min(scope) ELSE '' END
                FROM events WHERE position > ? GROUP BY stream \(StreamVersionRaise.onConflict)
                """, arguments: [position])
    }
}
