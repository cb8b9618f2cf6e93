import SyncModels

/// The query of `GET /v1/pull?cursor=&scopes=&limit=&wait=`.
///
/// `scopes` nil means every scope in the token; `limit` nil means the server's default page size.
public struct PullRequest: Hashable, Sendable {
    public var cursor: ScopeCursor
    public var scopes: [Scope]?
    public var limit: Int?
    /// Seconds to long-poll when nothing is new (0 answers at once).
    public var wait: Int
    /// The pulling replica (an addition to PROTOCOL.md): when given, the server records `cursor` as what
    /// this replica has acknowledged, for compaction.
    public var replica: ReplicaID?
    /// What the replica vouches for, for compaction (a protocol addition): a cursor no further than `cursor`,
    /// covering only what the replica knew when it made the oldest event still in its outbox. A replica
    /// whose outbox holds an edit made offline against old state must not let the server fold or purge
    /// past that state, or the edit could arrive anchored on something already gone. The server records
    /// the lower of this and `cursor`, scope by scope; absent, it records `cursor`.
    public var acknowledged: ScopeCursor?
    /// Leave out the events this replica made (a protocol addition): a replica that holds all its own events
    /// (it is not bootstrapping) need not have them served back. Folded history (snapshots at or below a
    /// scope's compacted point) is served whoever made it. The cursor still moves past what was left out, and
    /// a long-poll is not woken by it.
    public var exclude: ReplicaID?
    /// Also answer the cursor after every `markEvery` events of the page (`PullResponse.marks`; a protocol
    /// addition). A replica that asks for long pages (fewer round trips, less work per event on both sides)
    /// can then apply one in several short transactions, each stored with the mark it ends at, so that its
    /// local writes never wait for a whole page.
    public var markEvery: Int?

    public init(
        cursor: ScopeCursor = ScopeCursor(), scopes: [Scope]? = nil, limit: Int? = nil, wait: Int = 0,
        replica: ReplicaID? = nil, acknowledged: ScopeCursor? = nil, exclude: ReplicaID? = nil,
        markEvery: Int? = nil
    ) {
        self.markEvery = markEvery
        self.cursor = cursor
        self.scopes = scopes
        self.limit = limit
        self.wait = wait
        self.replica = replica
        self.acknowledged = acknowledged
        self.exclude = exclude
    }

    /// The query items a client sends, in a stable order; empty values are left out.
    public var queryItems: [(name: String, value: String)] {
        var items: [(name: String, value: String)] = []
        let encoded = cursor.encoded
        if !encoded.isEmpty { items.append(("cursor", encoded)) }
        if let scopes { items.append(("scopes", scopes.map(\.name).joined(separator: ","))) }
        if let limit { items.append(("limit", String(limit))) }
        if wait > 0 { items.append(("wait", String(wait))) }
        if let replica { items.append(("replica", replica.description)) }
        if let acknowledged { items.append(("acknowledged", acknowledged.encoded)) }
        if let exclude { items.append(("exclude", exclude.description)) }
        if let markEvery { items.append(("markEvery", String(markEvery))) }
        return items
    }

    /// Parses the query a server received.
    /// - Throws: `SyncProtocolError` `request.invalid` for a bad cursor, a bad scope name, a repeated scope,
    ///   or a `limit` or `wait` that is not an integer in range (`limit` 1...`maxPullLimit`, `wait`
    ///   0...`maxWaitSeconds`), or a `replica` that is not 32 hexadecimal digits.
    public init(query: [(name: String, value: String)], limits: ProtocolLimits = .standard) throws(SyncProtocolError) {
        self.init()
        for (name, value) in query {
            switch name {
            case "cursor":
                do {
                    cursor = try ScopeCursor(encoded: value)
                } catch {
                    throw .invalid("cursor is not one this server issued")
                }
            case "scopes":
                if value.isEmpty { continue }
                scopes = try Self.parseScopes(
                    value.split(separator: ",", omittingEmptySubsequences: false).map(String.init))
            case "limit":
                guard let number = Int(value), (1...limits.maxPullLimit).contains(number) else {
                    throw .invalid("limit must be an integer from 1 to \(limits.maxPullLimit)")
                }
                limit = number
            case "wait":
                guard let number = Int(value), (0...limits.maxWaitSeconds).contains(number) else {
                    throw .invalid("wait must be an integer from 0 to \(limits.maxWaitSeconds)")
                }
                wait = number
            case "replica":
                guard let id = try? ReplicaID(value) else { throw .invalid("replica must be 32 hexadecimal digits") }
                replica = id
            case "acknowledged":
                do {
                    acknowledged = try ScopeCursor(encoded: value)
                } catch {
                    throw .invalid("acknowledged is not a cursor this server issued")
                }
            case "exclude":
                guard let id = try? ReplicaID(value) else { throw .invalid("exclude must be 32 hexadecimal digits") }
                exclude = id
            case "markEvery":
                guard let number = Int(value), (1...limits.maxPullLimit).contains(number) else {
                    throw .invalid("markEvery must be an integer from 1 to \(limits.maxPullLimit)")
                }
                markEvery = number
            default:
                continue
            }
        }
    }

    /// Validates scope names from a query or a body: valid names, no repeats.
    static func parseScopes(_ names: [String]) throws(SyncProtocolError) -> [Scope] {
        var scopes: [Scope] = []
        var seen: Set<Scope> = []
        for name in names {
            guard let scope = try? Scope(name) else {
                throw .invalid("scopes must be names of 1-128 characters of A-Z a-z 0-9 . _ : -")
            }
            guard seen.insert(scope).inserted else { throw .invalid("scope \(scope) is listed twice") }
            scopes.append(scope)
        }
        return scopes
    }
}

/// The body of a `200` answer to `GET /v1/pull`: events ordered by `(scope, seq)`, the cursor to send
/// next, and whether more events were already waiting.
public struct PullResponse: Codable, Hashable, Sendable {
    public var events: [Event]
    public var cursor: String
    public var hasMore: Bool
    /// Events past `cursor` up to the head of each requested scope when the page was read, summed over the
    /// scopes: how much of a long pull (a bootstrap) is left, for progress. An upper bound once compaction
    /// has folded events (it counts seqs). Absent from servers older than this field.
    public var remaining: Int?
    /// Each requested scope's stable point, by scope name: the highest `seq` every replica seen within the
    /// server's eviction horizon has acknowledged (the lower of its cursor and its `acknowledged`). History at
    /// or below it may be folded by compaction, and a replica may prune its own copy of it. A protocol
    /// addition: absent from older servers.
    public var stable: [String: Int64]?
    /// Each requested scope's stable point among the other replicas, by scope name: as `stable`, leaving out
    /// the replica the request names (`replica`). Only in answers to a request that names its replica. Such
    /// a replica may fold on arrival, instead of logging, the events at or below it of a stream it has
    /// nothing of its own pending in: every other replica has seen them, and it makes what it makes next
    /// after applying them. A protocol addition: absent from older servers.
    public var othersStable: [String: Int64]?
    /// With `markEvery` in the request: the cursor after every `markEvery` events of the page, in order (the
    /// i-th where the page would have ended after its first `(i + 1) * markEvery` events), the page's end
    /// left out. Storing one and pulling from it later reads exactly the events after it. A protocol
    /// addition: absent from older servers and when not asked for.
    public var marks: [String]?
    /// For each scope read from position 0 (a bootstrap) whose compaction purged streams: the sum of the
    /// checksums of the purged events (docs/PROTOCOL.md, "Checksums"), which the replica adds to its own sum
    /// in their place. A protocol addition: absent from older servers and when there is none.
    public var purged: [String: Int64]?

    public init(
        events: [Event], cursor: String, hasMore: Bool, remaining: Int? = nil, stable: [String: Int64]? = nil,
        othersStable: [String: Int64]? = nil, marks: [String]? = nil, purged: [String: Int64]? = nil
    ) {
        self.purged = purged
        self.marks = marks
        self.othersStable = othersStable
        self.events = events
        self.cursor = cursor
        self.hasMore = hasMore
        self.remaining = remaining
        self.stable = stable
    }
}
