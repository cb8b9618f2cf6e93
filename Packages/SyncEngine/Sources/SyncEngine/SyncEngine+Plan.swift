import SyncEventStore

/// What one round trip of a cycle asks for: pure values, built from the outbox and the last answer.
extension SyncEngine {
    /// One round trip's request: a push batch and where to pull from.
    struct Plan: Sendable {
        var batch: [StoredEvent]
        /// The outbox position the batch was read after; the next batch is read after the last of this one.
        var after: Int64
        var cursor: String?
        var limit: Int
        /// What the replica vouches for while its outbox holds events (`EventStore.acknowledgedCursor`).
        var acknowledged: String?
        /// Whether to ask the server to leave this replica's own events out of the page: it holds them all,
        /// unless it is bootstrapping after a reset.
        var excludeOwn = false
        /// The `markEvery` the request asks for (nil: none).
        var markEvery: Int? = nil

        var lastPosition: Int64 { batch.last?.position ?? after }
    }

    /// The `markEvery` a request for pages of `limit` events from `cursor` asks for: `configured`, or more
    /// when the cursor is long, and none when a page fits between two marks (or `configured` is 0).
    ///
    /// Each mark is a cursor as long as the request's (a position for every scope it has read), so marks are
    /// spaced at least `cursor.count / 20` events apart: with events of about 200 bytes on the wire, they then
    /// add a tenth of a page at most. A replica that reads 16 scopes gets a mark every 100 events; one that
    /// reads 1,000 scopes (a cursor of about 20 KB) one every 1,000.
    static func markSpacing(_ configured: Int, limit: Int, cursor: String?) -> Int? {
        guard configured > 0 else { return nil }
        let every = max(configured, (cursor?.utf8.count ?? 0) / 20)
        return limit > every ? every : nil
    }

    /// What a request takes from the store: the next batch of the outbox, the stored cursor and the
    /// acknowledged position, read in one snapshot.
    struct OutboxRead: Sendable {
        var batch: [StoredEvent]
        var storedCursor: String?
        var acknowledged: String?

        func plan(after: Int64, cursor: String?, limit: Int, excludeOwn: Bool, markEvery: Int?) -> Plan {
            Plan(
                batch: batch, after: after, cursor: cursor, limit: limit, acknowledged: acknowledged,
                excludeOwn: excludeOwn, markEvery: markEvery)
        }
    }
}
