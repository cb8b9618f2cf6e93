import Foundation
import SyncModels
import SyncProtocol

/// A logic-only stand-in for `sync-server`, for deterministic tests of clients: per-scope gap-free `seq`,
/// deduplication by event id (a retry gets the original `seq`), cursor paging, and optional rejection
/// rules. It has no persistence, authentication or HTTP; the real server is tested against PostgreSQL.
public actor InMemorySyncServer {
    private var log: [Scope: [Event]] = [:]
    private var seqByID: [EventID: (Scope, Int64)] = [:]
    private let rule: @Sendable (Event) -> EventRejection?
    public private(set) var requestCount = 0

    /// - Parameter rule: decides per event whether to reject it (nil accepts).
    public init(rule: @escaping @Sendable (Event) -> EventRejection? = { _ in nil }) {
        self.rule = rule
    }

    /// Handles one `/v1/sync` request: push first, then pull.
    public func handle(_ request: SyncRequest, pageSize: Int = 500) throws(SyncFailure) -> SyncResponse {
        requestCount += 1
        var results: [PushResult] = []
        for event in request.events {
            if let (_, seq) = seqByID[event.id] {
                results.append(.duplicate(event.id, seq: seq))
            } else if let rejection = rule(event) {
                results.append(.rejected(event.id, rejection))
            } else {
                var stored = event
                let seq = Int64(log[event.scope, default: []].count + 1)
                stored.seq = seq
                stored.receivedAt = Date(timeIntervalSince1970: 1_700_000_000 + Double(requestCount))
                log[event.scope, default: []].append(stored)
                seqByID[event.id] = (event.scope, seq)
                results.append(.accepted(event.id, seq: seq))
            }
        }
        var cursor: ScopeCursor
        do {
            cursor = try ScopeCursor(encoded: request.cursor)
        } catch {
            throw .permanent(code: "request.invalid", message: "cursor is not one this server issued")
        }
        let scopes = request.scopes ?? log.keys.sorted()
        let limit = request.limit ?? pageSize
        var events: [Event] = []
        var hasMore = false
        for scope in scopes.sorted() {
            let available = log[scope, default: []].dropFirst(Int(cursor[scope]))
            let room = limit - events.count
            if available.count > room { hasMore = true }
            let page = available.prefix(max(0, room))
            events += page
            if let last = page.last?.seq { cursor.advance(scope, to: last) }
        }
        return SyncResponse(results: results, events: events, cursor: cursor.encoded, hasMore: hasMore)
    }

    /// Every event of `scope` in `seq` order.
    public func events(in scope: Scope) -> [Event] { log[scope, default: []] }
}
