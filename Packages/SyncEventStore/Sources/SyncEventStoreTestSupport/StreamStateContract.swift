import Foundation
import GRDB
import SyncEventStore
import SyncModels
import SyncTestSupport

/// The contract of a `StreamStateProjection` with a given model, as checks any domain's tests run: whichever
/// way a server's pages reach the projection (incrementally, by a rebuild on one thread or several,
/// buffered for a flush, folded on arrival, through a crash or a rollback at any step of a page), its rows
/// and snapshot copies end byte for byte where logging every event (and pruning it) ends.
///
/// `SyncEventStore`'s own tests run it with `LabelModel`; an app runs it with its model (the Tasks example
/// does). Each check throws `StreamStateContract.Violation`, naming what differed, when the contract does
/// not hold.
public struct StreamStateContract: Sendable {
    /// Opens the store with the projection under test (`cachedStreams` and `workers` as the projection's
    /// own parameters) on a SQLite file at `path`.
    public var open: @Sendable (_ path: String, _ cachedStreams: Int, _ workers: Int) throws -> EventStore
    /// The projection's table and its snapshot copies.
    public var table: String
    /// The table's key column.
    public var keyColumn: String
    /// Pages a server would send, in order, each event with its `seq`: events of other replicas on several
    /// records, some retired (`StreamStateContract.pages(of:size:)` cuts them).
    public var pages: [[Event]]
    /// Where the checks' files go.
    public var directory: TemporaryDirectory

    public init(
        table: String, keyColumn: String = "stream", pages: [[Event]], directory: TemporaryDirectory,
        open: @escaping @Sendable (_ path: String, _ cachedStreams: Int, _ workers: Int) throws -> EventStore
    ) {
        self.open = open
        self.table = table
        self.keyColumn = keyColumn
        self.pages = pages
        self.directory = directory
    }

    /// What a check found different.
    public struct Violation: Error, CustomStringConvertible {
        public var description: String
    }

    /// Events of other replicas (`confirmed` with seqs from 1) in pages of `size`.
    public static func pages(of events: [StoredEvent], size: Int = 25) -> [[Event]] {
        let all = confirmed(events, firstSeq: 1)
        return stride(from: 0, to: all.count, by: size).map { Array(all[$0..<min($0 + size, all.count)]) }
    }

    /// Every check below.
    public func checkAll() async throws {
        try await rebuildEqualsIncrementalApplication()
        for step in EventStore.SyncResponseStep.allCases { try await aCrashResumesExactly(at: step) }
        try await writeBehindAndFoldingOnArrivalGiveTheRowsOfLoggingEveryEvent()
    }

    /// The pages applied one by one, then a rebuild from the log (on one thread and on several, for a model
    /// that replays rows): the same rows.
    public func rebuildEqualsIncrementalApplication() async throws {
        let store = try store("rebuild", workers: 1)
        try await apply(pages, to: store, deferring: false)
        let incremental = try await rows(store, withSnapshots: false)
        guard incremental.count > 1 else { throw Violation(description: "the pages gave \(incremental.count) rows") }
        for workers in [1, 4] {
            let reopened = try open(directory.path("rebuild.sqlite"), 20_000, workers)
            try await reopened.rebuildAll()
            try expect(try await rows(reopened, withSnapshots: false), incremental, "a rebuild on \(workers) threads")
        }
    }

    /// A fault at `step` of a page's transaction, with the page buffered or not, leaves the rows as before the
    /// page; going on (in the same process, or after opening the file again) ends where a clean run ends.
    public func aCrashResumesExactly(at step: EventStore.SyncResponseStep) async throws {
        let reference = try store("reference-\(step)")
        try await apply(pages, to: reference, deferring: false)
        let expected = try await rows(reference, withSnapshots: false)
        for deferring in [false, true] {
            let name = "crash-\(step)-\(deferring)"
            var opened: EventStore? = try self.store(name)
            try await applyHalf(failingAt: step, to: opened!, deferring: deferring)
            if deferring {
                // The process ends: its store is gone before the file opens again (a store opened beside a
                // live one leaves the crash recovery to it, `EventStore.openedFirst`).
                opened = nil
                opened = try open(directory.path("\(name).sqlite"), 20_000, 2)
                guard opened?.openedFirst == true else {
                    throw Violation(description: "the file opened again at \(step) was still open")
                }
            }
            let resumed = opened!
            try await apply(Array(pages.dropFirst(pages.count / 2)), to: resumed, deferring: deferring)
            try expect(
                try await rows(resumed, withSnapshots: false), expected,
                "the rows after a fault at \(step) (deferring: \(deferring)) and the rest of the pages")
        }
    }

    /// The first half of the pages, then the next page with a fault at `step` of its transaction: the rows
    /// stay as they were before it.
    func applyHalf(failingAt step: EventStore.SyncResponseStep, to store: EventStore, deferring: Bool) async throws {
        struct InjectedFault: Error {}
        let half = pages.count / 2
        try await apply(Array(pages.prefix(half)), to: store, deferring: deferring)
        let before = try await rows(store)
        let page = pages[half]
        do {
            try await EventStore.$syncResponseFault.withValue({ if $0 == step { throw InjectedFault() } }) {
                _ = try await store.applySyncResponse(
                    acknowledged: [:], rejected: [:], pulled: page, cursor: Self.cursor(after: page),
                    deferProjections: deferring, follows: try await store.cursor() ?? "")
            }
            throw Violation(description: "the fault at \(step) did not stop the page")
        } catch is InjectedFault {}
        try expect(try await rows(store), before, "the rows after a fault at \(step)")
    }

    /// Every page buffered and written by small flushes, with the cache large and with it tiny: the rows of
    /// logging every event. Every page folded on arrival, then purged: the rows and snapshot copies of logging
    /// every event and pruning it at the head, and a rebuild gives them back.
    public func writeBehindAndFoldingOnArrivalGiveTheRowsOfLoggingEveryEvent() async throws {
        let logged = try store("logged")
        try await apply(pages, to: logged, deferring: false)
        let expected = try await rows(logged)
        for cached in [20_000, 3] {
            let buffered = try store("buffered-\(cached)", cached: cached)
            try await apply(pages, to: buffered, deferring: true)
            try expect(try await rows(buffered), expected, "write-behind with a cache of \(cached)")
        }
        var head: [Scope: Int64] = [:]
        for event in pages.joined() { head[event.scope] = max(head[event.scope] ?? 0, event.seq ?? 0) }
        _ = try await logged.prune(stablePoints: head)
        let pruned = try await rows(logged)
        for deferring in [true, false] {
            let folded = try store("folded-\(deferring)")
            try await apply(pages, to: folded, deferring: deferring, foldThrough: head)
            guard try await folded.hasFoldedToPurge() else {
                throw Violation(description: "nothing was folded on arrival (deferring: \(deferring))")
            }
            try await folded.purgeFolded(step: 9)
            try expect(try await rows(folded), pruned, "folding on arrival (deferring: \(deferring)) and a purge")
            try await folded.rebuildAll()
            try expect(try await rows(folded), pruned, "a rebuild of the folded state")
        }
    }

    // MARK: - Helpers

    func store(_ name: String, cached: Int = 20_000, workers: Int = 2) throws -> EventStore {
        try open(directory.path("\(name).sqlite"), cached, workers)
    }

    static func cursor(after page: [Event]) -> String { "after-\(page.last?.seq ?? 0)" }

    /// Applies `pages` as the engine does, each following the cursor the one before stored, then writes
    /// everything held in memory in small flushes.
    func apply(_ pages: [[Event]], to store: EventStore, deferring: Bool, foldThrough: [Scope: Int64] = [:])
        async throws
    {
        var follows = try await store.cursor() ?? ""
        for page in pages {
            let outcome = try await store.applySyncResponse(
                acknowledged: [:], rejected: [:], pulled: page, cursor: Self.cursor(after: page),
                deferProjections: deferring, foldThrough: foldThrough, follows: follows)
            guard !outcome.rewound else { throw Violation(description: "a page did not follow the stored cursor") }
            follows = Self.cursor(after: page)
        }
        while try await !store.flushProjections(limit: 7) {}
        while try await !store.flushDeferredVersions(limit: 7) {}
    }

    /// Every column of every row in key order (`changed` included), then the snapshot copies; without
    /// them, the rows without `changed` (whether a row is its own snapshot depends on the way there, not on
    /// what it holds).
    func rows(_ store: EventStore, withSnapshots: Bool = true) async throws -> [String] {
        let (table, key) = (table, keyColumn)
        return try await store.database.read { db in
            func describe(_ row: Row, dropping: String? = nil) -> String {
                zip(row.columnNames, row.databaseValues).filter { $0.0 != dropping }.map { "\($0.0)=\($0.1)" }
                    .joined(separator: " ")
            }
            let rows = try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY \(key)")
            guard withSnapshots else { return rows.map { describe($0, dropping: "changed") } }
            let copies = try Row.fetchAll(db, sql: "SELECT * FROM \(table)_snapshot ORDER BY \(key)")
            return rows.map { describe($0) } + copies.map { "copy " + describe($0) }
        }
    }

    func expect(_ actual: [String], _ expected: [String], _ what: String) throws {
        guard actual != expected else { return }
        let first = zip(actual, expected).first { $0 != $1 }
        throw Violation(
            description: """
                \(what): \(actual.count) rows against \(expected.count) expected; first difference:
                  got      \(first?.0 ?? actual.last ?? "nothing")
                  expected \(first?.1 ?? expected.last ?? "nothing")
                """)
    }
}
