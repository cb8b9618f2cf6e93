import Foundation
import GRDB
import SyncModels

/// One answer of the server as the store applies it: what the push got (acknowledgements, rejections), the
/// pulled page with the cursors inside it, and what the engine decided about it (folding on arrival, the
/// cursor it follows). The sync engine makes one from each `/v1/sync` answer, long-poll page and live batch.
public struct SyncAnswer: Sendable {
    /// Pushed events the server took, with their `seq` (accepted or duplicate).
    public var acknowledged: [EventID: Int64]
    /// Pushed events the server refused.
    public var rejected: [EventID: StoredEvent.Rejection]
    /// The pushed events' log positions by id (`StoredEvent.position`): their acknowledgements are found by
    /// the table's own key.
    public var pushedPositions: [EventID: Int64]
    /// The pulled page, in the server's order.
    public var events: [Event]
    /// By index, the bytes of the pulled payloads as they came when canonical (see
    /// `EventStore.applySyncResponse`); shorter than `events` or nil entries: written from the payload.
    public var payloads: [Data?]
    /// The cursor after the page.
    public var cursor: String?
    /// Cursors inside the page: `marks[i]` is the cursor after event `(i + 1) * markEvery - 1`. A long page
    /// is applied in several transactions, each ending at a mark and storing it as the cursor.
    public var marks: [String]
    /// The spacing of `marks`; nil: the page is applied in one transaction.
    public var markEvery: Int?
    /// Whether more pages follow this one: the store may then keep what the page does to the projections in
    /// memory (write-behind, see `ApplyBudget.writeBehind`).
    public var hasMore: Bool
    /// Per scope, the stable point among the other replicas: with projections that fold on arrival, events
    /// at or below it are folded, not logged (see `EventStore.applySyncResponse`).
    public var foldThrough: [Scope: Int64]
    /// The cursor the page was asked from (empty for none): a transaction whose store holds another one
    /// applies nothing of the page and the outcome says `rewound`. Nil: not checked.
    public var follows: String?
    /// Per scope read from position 0, what the server's compaction purged carried (`PullResponse.purged`):
    /// added to the scope's checksums with the first transaction.
    public var purged: [Scope: Int64]

    public init(
        acknowledged: [EventID: Int64] = [:], rejected: [EventID: StoredEvent.Rejection] = [:],
        pushedPositions: [EventID: Int64] = [:], events: [Event] = [], payloads: [Data?] = [],
        cursor: String? = nil, marks: [String] = [], markEvery: Int? = nil, hasMore: Bool = false,
        foldThrough: [Scope: Int64] = [:], follows: String? = nil, purged: [Scope: Int64] = [:]
    ) {
        self.purged = purged
        self.acknowledged = acknowledged
        self.rejected = rejected
        self.pushedPositions = pushedPositions
        self.events = events
        self.payloads = payloads
        self.cursor = cursor
        self.marks = marks
        self.markEvery = markEvery
        self.hasMore = hasMore
        self.foldThrough = foldThrough
        self.follows = follows
    }

    /// The transaction of the page that starts at event `start` when it should hold about `chunk` events:
    /// the events it applies and the cursor it stores. It ends at the first mark at or past `chunk` more
    /// events, or at the page's end with `cursor` (without marks, or when the rest fits in `chunk`).
    public func transaction(from start: Int, chunk: Int) -> (range: Range<Int>, cursor: String?) {
        if let markEvery, markEvery > 0, start + max(1, chunk) < events.count {
            let index = (start + max(1, chunk) + markEvery - 1) / markEvery
            if index <= marks.count { return (start..<(index * markEvery), marks[index - 1]) }
        }
        return (start..<events.count, cursor)
    }
}

/// A size that adapts so that each transaction holds the store's writer for about a budget: a pure value,
/// told how long each transaction of this size took.
public struct TransactionSize: Sendable, Hashable {
    /// The current size.
    public private(set) var value: Int
    /// The bounds `value` stays in.
    public let bounds: ClosedRange<Int>

    public init(_ value: Int, in bounds: ClosedRange<Int>) {
        self.bounds = bounds
        self.value = min(max(value, bounds.lowerBound), bounds.upperBound)
    }

    /// After a transaction of this size that took `took`: halved when it took more than `budget`, doubled
    /// when it was `full` (it had as many units as the size allows) and took less than half of it.
    public mutating func record(took: Duration, budget: Duration, full: Bool = true) {
        if took > budget {
            value = max(bounds.lowerBound, value / 2)
        } else if full && took * 2 < budget {
            value = min(bounds.upperBound, value * 2)
        }
    }

    /// Doubled, up to the upper bound.
    public mutating func grow() {
        value = min(bounds.upperBound, value * 2)
    }
}

/// How long the store may hold its writer per transaction while it applies answers and writes what
/// projections hold in memory, and the sizes it has learned for that: a local write waits for one such
/// transaction at most. Kept by the caller from answer to answer (the sizes carry over).
public struct ApplyBudget: Sendable {
    /// How long one transaction may take.
    public var transaction: Duration
    /// How long, during a long pull (answers with `hasMore`), projections that can (`BufferingProjection`)
    /// may hold pulled events in memory before their tables show them; zero writes each page's records with
    /// the page.
    public var writeBehind: Duration
    /// Events per transaction of a marked page.
    public var events: TransactionSize
    /// Buffered records per flush transaction.
    public var records: TransactionSize
    /// Deferred stream versions per flush transaction (they cost another amount than records).
    public var versions: TransactionSize
    /// When the oldest write still held in memory was buffered.
    var bufferedSince: ContinuousClock.Instant?

    /// - Parameters:
    ///   - transaction: how long one transaction may take.
    ///   - writeBehind: how long projections may hold a long pull's pages in memory (zero: not at all).
    ///   - events: the first and the bounds of the events per transaction of a marked page.
    public init(transaction: Duration, writeBehind: Duration, events: TransactionSize) {
        self.transaction = transaction
        self.writeBehind = writeBehind
        self.events = events
        self.records = TransactionSize(Self.firstFlush, in: 16...(1 << 16))
        self.versions = TransactionSize(Self.firstFlush, in: 16...(1 << 16))
    }

    /// Records or versions a flush transaction writes first.
    public static let firstFlush = 256
}

/// What applying one answer did, in one transaction or several.
public struct AppliedAnswer: Sendable {
    /// The sum over its transactions.
    public var outcome: EventStore.SyncResponseOutcome
    public var transactions: Int
    /// The longest of its transactions: what a local write waited for at most.
    public var longest: Duration
    /// How long writing what projections held in memory took after it (zero when not due).
    public var flushed: Duration

    public init(
        outcome: EventStore.SyncResponseOutcome = .init(), transactions: Int = 0, longest: Duration = .zero,
        flushed: Duration = .zero
    ) {
        self.outcome = outcome
        self.transactions = transactions
        self.longest = longest
        self.flushed = flushed
    }
}

/// One transaction of an answer, as `EventStore.apply(_:budget:also:)` tells the caller's records.
public struct AnswerTransaction: Sendable {
    /// The first of the answer's transactions: the one that holds the acknowledgements and rejections.
    public var isFirst: Bool
    /// The last: the one that stores the answer's own cursor.
    public var isLast: Bool
    /// What the answer did up to and including this transaction.
    public var total: EventStore.SyncResponseOutcome
}

extension EventStore.ConfirmedPageResult {
    public static func + (lhs: Self, rhs: Self) -> Self {
        Self(
            inserted: lhs.inserted + rhs.inserted, confirmedLocal: lhs.confirmedLocal + rhs.confirmedLocal,
            alreadyKnown: lhs.alreadyKnown + rhs.alreadyKnown, folded: lhs.folded + rhs.folded)
    }
}

extension EventStore.SyncResponseOutcome {
    public static func + (lhs: Self, rhs: Self) -> Self {
        Self(
            acknowledged: lhs.acknowledged + rhs.acknowledged, rolledBack: lhs.rolledBack + rhs.rolledBack,
            pulled: lhs.pulled + rhs.pulled, rewound: lhs.rewound || rhs.rewound)
    }
}

extension EventStore {
    /// Applies one answer of the server: the acknowledgements, rejections and page in transactions that each
    /// fit `budget` (a marked page is split at its marks, each transaction storing the mark it ends at as
    /// the cursor, so a crash between two resumes exactly there; the events per transaction adapt as they
    /// go), then, when due, writes what projections hold in memory (write-behind) in transactions that fit
    /// it too. Each transaction is `applySyncResponse`; `also` writes the caller's records of each in it.
    ///
    /// Write-behind: while more pages follow (`SyncAnswer.hasMore`) and `budget.writeBehind` is not zero,
    /// projections that can keep the pages in memory, and their records are written once the oldest has
    /// waited `writeBehind`, or with the last page. A page that says it is the last always leaves the
    /// tables current.
    ///
    /// Stops at the first transaction that finds the store no longer at the cursor it follows (`rewound`).
    /// - Throws: as `applySyncResponse`; the transactions before the failing one stay committed, each whole.
    @discardableResult
    public func apply(
        _ answer: SyncAnswer, budget: inout ApplyBudget,
        also: (@Sendable (AnswerTransaction, Database) throws -> Void)? = nil
    ) async throws -> AppliedAnswer {
        let started = ContinuousClock.now
        let deferring = budget.writeBehind > .zero && answer.hasMore
        var applied = AppliedAnswer()
        var start = 0
        var follows = answer.follows
        while true {
            let chunk = budget.events.value
            let (range, cursor) = answer.transaction(from: start, chunk: chunk)
            let first = start == 0
            let last = range.upperBound == answer.events.count
            let before = applied.outcome
            let took = ContinuousClock.now
            let outcome = try await applySyncResponse(
                acknowledged: first ? answer.acknowledged : [:], rejected: first ? answer.rejected : [:],
                pulled: Array(answer.events[range]),
                payloads: range.map { $0 < answer.payloads.count ? answer.payloads[$0] : nil }, cursor: cursor,
                deferProjections: last ? deferring : budget.writeBehind > .zero, positions: answer.pushedPositions,
                foldThrough: answer.foldThrough, follows: follows, purged: first ? answer.purged : [:]
            ) { outcome, db in
                try also?(AnswerTransaction(isFirst: first, isLast: last, total: before + outcome), db)
            }
            let duration = ContinuousClock.now - took
            if answer.markEvery != nil {
                budget.events.record(took: duration, budget: budget.transaction, full: range.count >= chunk)
            }
            applied.transactions += 1
            applied.longest = max(applied.longest, duration)
            applied.outcome = applied.outcome + outcome
            if outcome.rewound { return applied }
            if follows != nil { follows = cursor ?? "" }
            if hasFullProjectionBuffers() {
                // Memory is nearly full of buffered records: written now, a pass in key order, rather than
                // the next transactions finding no room and writing theirs with them, scattered over the
                // table's indexes (most of a 200,000-note bootstrap's records went that way).
                let flushStart = ContinuousClock.now
                try await flushWriteBehind(budget: &budget)
                applied.flushed += ContinuousClock.now - flushStart
            }
            start = range.upperBound
            if start >= answer.events.count { break }
        }
        if hasDeferredWrites() {
            let since = budget.bufferedSince ?? started
            budget.bufferedSince = since
            if !deferring || ContinuousClock.now - since >= budget.writeBehind {
                let flushStart = ContinuousClock.now
                try await flushWriteBehind(budget: &budget)
                applied.flushed += ContinuousClock.now - flushStart
            }
        }
        return applied
    }

    /// Writes everything projections hold in memory (buffered records, folded events, then the streams'
    /// versions deferred with them), in transactions sized by `budget` so that local writes wait for one of
    /// them at most. A sync that stops (it reached the head, failed, or hit its bound on rounds) calls it so
    /// that nothing stays in memory past it.
    public func flushWriteBehind(budget: inout ApplyBudget) async throws {
        while hasBufferedProjections() {
            let start = ContinuousClock.now
            let done = try await flushProjections(limit: budget.records.value)
            budget.records.record(took: ContinuousClock.now - start, budget: budget.transaction)
            if done { break }
        }
        // Then the versions, in transactions sized on their own: sized by the records' limit they made the
        // next records' flush too long. Until a flush says it is done, and never on after one that wrote
        // nothing: looping on the flag alone once spun on empty transactions, thousands a second, when
        // another process had removed `streams_through` (see `flushDeferredVersions(limit:_:)`).
        while hasDeferredVersions {
            let start = ContinuousClock.now
            let before = deferredVersions.withLock { $0.versions.count }
            let done = try await flushDeferredVersions(limit: budget.versions.value)
            budget.versions.record(took: ContinuousClock.now - start, budget: budget.transaction)
            if done || deferredVersions.withLock({ $0.versions.count }) >= before { break }
        }
        budget.bufferedSince = nil
    }

    /// Once a pull has reached the head: purges what it folded on arrival (`purgeFolded()`); nil when
    /// nothing waited for it.
    public func purgeFoldedIfAny() async throws -> FoldedPurgeReport? {
        guard try await hasFoldedToPurge() else { return nil }
        return try await purgeFolded()
    }
}
