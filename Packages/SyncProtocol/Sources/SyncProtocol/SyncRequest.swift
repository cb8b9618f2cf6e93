import Foundation
import SyncModels

/// The body of `POST /v1/sync`: a push and a pull in one round trip. The pull runs after the push, so it
/// can return the events just accepted.
public struct SyncRequest: Codable, Hashable, Sendable {
    public var replica: ReplicaID
    public var events: [Event]
    /// The opaque cursor of an earlier answer; absent or empty is the beginning.
    public var cursor: String?
    /// The scopes to pull; absent means every scope in the token.
    public var scopes: [Scope]?
    /// Events per page; absent means the server's default.
    public var limit: Int?
    /// An opaque cursor no further than `cursor`: what the replica knew when it made the oldest event still
    /// in its outbox (see `PullRequest.acknowledged`); absent when the outbox is empty. A protocol addition.
    public var acknowledged: String?
    /// True: leave this replica's own events out of the page (see `PullRequest.exclude`). A protocol
    /// addition; absent is false.
    public var excludeOwn: Bool?
    /// Also answer the cursor after every `markEvery` events of the page (`SyncResponse.marks`), so the
    /// replica can apply a long page in several transactions (see `PullRequest.markEvery`). A protocol
    /// addition; absent asks for none.
    public var markEvery: Int?

    public init(
        replica: ReplicaID, events: [Event], cursor: String? = nil, scopes: [Scope]? = nil, limit: Int? = nil,
        acknowledged: String? = nil, excludeOwn: Bool? = nil, markEvery: Int? = nil
    ) {
        self.excludeOwn = excludeOwn
        self.markEvery = markEvery
        self.replica = replica
        self.events = events
        self.cursor = cursor
        self.scopes = scopes
        self.limit = limit
        self.acknowledged = acknowledged
    }

    /// The pull half as a `PullRequest` (no long-poll).
    /// - Throws: `SyncProtocolError` `request.invalid` for a bad cursor, repeated scopes or a limit out of range.
    public func pullRequest(limits: ProtocolLimits = .standard) throws(SyncProtocolError) -> PullRequest {
        let parsedCursor: ScopeCursor
        do {
            parsedCursor = try ScopeCursor(encoded: cursor)
        } catch {
            throw .invalid("cursor is not one this server issued")
        }
        if let limit, !(1...limits.maxPullLimit).contains(limit) {
            throw .invalid("limit must be an integer from 1 to \(limits.maxPullLimit)")
        }
        if let markEvery, !(1...limits.maxPullLimit).contains(markEvery) {
            throw .invalid("markEvery must be an integer from 1 to \(limits.maxPullLimit)")
        }
        let checkedScopes = try scopes.map { scopes throws(SyncProtocolError) in
            try PullRequest.parseScopes(scopes.map(\.name))
        }
        let parsedAcknowledged: ScopeCursor?
        do {
            parsedAcknowledged = try acknowledged.map { try ScopeCursor(encoded: $0) }
        } catch {
            throw .invalid("acknowledged is not a cursor this server issued")
        }
        return PullRequest(
            cursor: parsedCursor, scopes: checkedScopes, limit: limit, wait: 0, acknowledged: parsedAcknowledged,
            exclude: excludeOwn == true ? replica : nil, markEvery: markEvery)
    }
}

/// The body of a `200` answer to `POST /v1/sync`.
public struct SyncResponse: Codable, Hashable, Sendable {
    public var results: [PushResult]
    public var events: [Event]
    public var cursor: String
    public var hasMore: Bool
    /// As `PullResponse.remaining`.
    public var remaining: Int?
    /// As `PullResponse.stable`.
    public var stable: [String: Int64]?
    /// As `PullResponse.othersStable` (a sync request always names its replica).
    public var othersStable: [String: Int64]?
    /// As `PullResponse.marks`.
    public var marks: [String]?
    /// As `PullResponse.purged`.
    public var purged: [String: Int64]?
    /// Not on the wire: each event's payload bytes as they came, when already canonical (see
    /// `CanonicalPayloads`).
    public var canonicalPayloads = CanonicalPayloads()

    enum CodingKeys: String, CodingKey {
        case results, events, cursor, hasMore, remaining, stable, othersStable, marks, purged
    }

    public init(
        results: [PushResult], events: [Event], cursor: String, hasMore: Bool, remaining: Int? = nil,
        stable: [String: Int64]? = nil, othersStable: [String: Int64]? = nil, marks: [String]? = nil,
        purged: [String: Int64]? = nil
    ) {
        self.purged = purged
        self.marks = marks
        self.othersStable = othersStable
        self.results = results
        self.events = events
        self.cursor = cursor
        self.hasMore = hasMore
        self.remaining = remaining
        self.stable = stable
    }
}

/// The payload bytes of a decoded answer's events, kept when they are already what the client's log stores
/// (`JSONWriter.isCanonical`): `FastEventDecoding` fills it, so the client stores those bytes instead of
/// writing each payload again. Not part of the answer's value: any two are equal, and it hashes as nothing.
public struct CanonicalPayloads: Hashable, Sendable {
    /// By the index of the event; nil for a payload that was not canonical (or none decoded).
    public var bytes: [Data?] = []

    public init(bytes: [Data?] = []) {
        self.bytes = bytes
    }

    /// The bytes of event `index`, when kept.
    public subscript(index: Int) -> Data? { index < bytes.count ? bytes[index] : nil }

    public static func == (_: Self, _: Self) -> Bool { true }
    public func hash(into _: inout Hasher) {}
}
