import Foundation
import GRDB
import SyncEventStoreTestSupport
import SyncModels
import SyncStorage
import Synchronization
import Testing

@testable import SyncEventStore

/// Stores opened on a file another store has open (`sync-agent status` while `sync-agent sync` pulls): only
/// the first opener runs crash recovery (`EventStore.openedFirst`), and a pull's deferred stream versions
/// are written, and its flush ends, whatever another store did to their key.
@Suite struct StoreOpenLockTests {
    struct Hang: Error, CustomStringConvertible {
        var description: String
    }

    /// A continuation resumed once, by whichever comes first.
    final class Once<T: Sendable>: Sendable {
        let continuation: Mutex<CheckedContinuation<T, any Error>?>

        init(_ continuation: CheckedContinuation<T, any Error>) {
            self.continuation = Mutex(continuation)
        }

        func resume(_ result: Result<T, any Error>) {
            continuation.withLock { continuation in
                continuation?.resume(with: result)
                continuation = nil
            }
        }
    }

    /// What `body` returns, or `Hang` when it has not returned after `limit`: a guard that reports a hang as
    /// a failure instead of waiting forever, not a bound on speed (the body is left running then).
    static func returns<T: Sendable>(
        _ what: String, within limit: Duration = .seconds(30), _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let once = Once(continuation)
            let timer = Task {
                try? await Task.sleep(for: limit)
                once.resume(.failure(Hang(description: "\(what) has not returned after \(limit)")))
            }
            Task {
                do {
                    let value = try await body()
                    once.resume(.success(value))
                } catch {
                    once.resume(.failure(error))
                }
                timer.cancel()
            }
        }
    }

    /// A store on `a.sqlite` that applied a page of another replica's events (four notes, three titles each)
    /// as a long pull does, more pages to follow and write-behind on: the streams' versions wait in memory,
    /// `streams_through` is set. The budget is the one the pull goes on with.
    static func pulling(_ directory: TemporaryDirectory) async throws -> (store: EventStore, budget: ApplyBudget) {
        let store = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        let other = try EventStore(path: directory.path("b.sqlite"))
        var drafts: [EventDraft] = []
        for round in 0..<3 {
            for note in 0..<4 { drafts.append(title("note:\(note)", "title \(round)")) }
        }
        let remote = confirmed(try await other.append(drafts), firstSeq: 1)
        var budget = ApplyBudget(
            transaction: .seconds(10), writeBehind: .seconds(3600), events: TransactionSize(100, in: 1...1000))
        try await store.apply(SyncAnswer(events: remote, cursor: "c1", hasMore: true), budget: &budget)
        return (store, budget)
    }

    /// The key that says which versions wait (`EventStore.deferredVersionsKey`).
    static func marker(_ store: EventStore) async throws -> String? {
        try await store.database.read { db in
            try String.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = 'streams_through'")
        }
    }

    /// The streams whose version in `streams` is not the highest their events have in the log, as
    /// `stream: streams' version / the log's`.
    static func versionsOffTheLog(_ store: EventStore) async throws -> [String] {
        try await store.database.read { db in
            try String.fetchAll(
                db,
                sql: """
                    SELECT log.stream || ': ' || coalesce(streams.version, 'none') || ' / ' || log.version
                    FROM (SELECT stream, max(stream_version) AS version FROM events GROUP BY stream) AS log
                    LEFT JOIN streams ON streams.stream = log.stream
                    WHERE streams.version IS NOT log.version
                    ORDER BY log.stream
                    """)
        }
    }

    /// `sync-agent status` opening the file while `sync-agent sync` pulls: the second store recovers nothing,
    /// the pull's key stays, and the pull's flush ends with every stream at the log's version.
    @Test func aSecondOpenerLeavesThePullsDeferredVersionsAndTheFlushEnds() async throws {
        let directory = try TemporaryDirectory()
        let (store, budget) = try await Self.pulling(directory)
        #expect(store.openedFirst)
        #expect(store.hasDeferredVersions)
        #expect(try await Self.marker(store) != nil)
        #expect(try await Self.versionsOffTheLog(store).count == 4, "the versions wait in memory")

        let second = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        #expect(!second.openedFirst)
        #expect(try await Self.marker(store) != nil, "the second opener left the pull's key alone")
        #expect(store.hasDeferredVersions)

        try await Self.returns("the flush") {
            var flushBudget = budget
            try await store.flushWriteBehind(budget: &flushBudget)
        }
        #expect(!store.hasDeferredVersions)
        #expect(try await Self.marker(store) == nil)
        #expect(try await Self.versionsOffTheLog(store) == [])
        #expect(try await Self.versionsOffTheLog(second) == [])
        withExtendedLifetime(second) {}
    }

    /// The key removed behind the store's back by another connection (as an older opener's recovery did):
    /// the flush still ends, with the versions memory held written, and memory clear.
    @Test func theFlushEndsWhenTheKeyIsRemovedBehindTheStoresBack() async throws {
        let directory = try TemporaryDirectory()
        let (store, budget) = try await Self.pulling(directory)
        #expect(store.hasDeferredVersions)
        do {
            // A connection of its own, not a store: nothing of it recovers, it only removes the key.
            let raw = try SyncDatabase(path: directory.path("a.sqlite"))
            try await raw.writer.write { db in
                try db.execute(sql: "DELETE FROM store_meta WHERE key = 'streams_through'")
            }
        }
        #expect(try await Self.marker(store) == nil)
        #expect(store.hasDeferredVersions, "memory still holds the versions")

        try await Self.returns("the flush") {
            var flushBudget = budget
            try await store.flushWriteBehind(budget: &flushBudget)
        }
        #expect(!store.hasDeferredVersions)
        #expect(try await Self.versionsOffTheLog(store) == [], "the versions memory held are written")
        let appended = try await store.append([title("note:0", "mine")])
        #expect(appended.first?.event.streamVersion == 4)
    }

    /// A local edit made by the second store while the first one's versions wait builds on them (it reads
    /// them from the log above the first store's key, and removes it); the first store's flush then ends.
    @Test func aSecondOpenersAppendBuildsOnThePullsDeferredVersions() async throws {
        let directory = try TemporaryDirectory()
        let (store, budget) = try await Self.pulling(directory)
        let second = try EventStore(path: directory.path("a.sqlite"), projections: [TitleProjection()])
        #expect(!second.openedFirst)
        let edited = try await second.append([title("note:1", "edited elsewhere")])
        #expect(edited.first?.event.streamVersion == 4, "built on the pulled version 3, which `streams` lacked")
        #expect(try await Self.marker(store) == nil)

        try await Self.returns("the flush") {
            var flushBudget = budget
            try await store.flushWriteBehind(budget: &flushBudget)
        }
        #expect(!store.hasDeferredVersions)
        #expect(try await Self.versionsOffTheLog(store) == [])
        let next = try await store.append([title("note:1", "edited here")])
        #expect(next.first?.event.streamVersion == 5)
        withExtendedLifetime(second) {}
    }

    /// While a store has the file open, another opener skips the recovery; once every store on it is gone
    /// (the process ended with the versions unwritten), the next opener is the first again and recovers.
    @Test func onlyTheFirstOpenerRecovers() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("a.sqlite")
        do {
            let (store, _) = try await Self.pulling(directory)
            #expect(store.openedFirst)
            let second = try EventStore(path: path, projections: [TitleProjection()])
            #expect(!second.openedFirst)
            #expect(try await Self.marker(second) != nil, "not written from the log: the first store holds them")
            #expect(try await Self.versionsOffTheLog(second).count == 4)
            // Another store of this process counts as another opener, a projection-less one too.
            let third = try EventStore(path: path)
            #expect(!third.openedFirst)
            withExtendedLifetime((store, second, third)) {}
        }
        #expect(FileManager.default.fileExists(atPath: path + SyncDatabase.lockSuffix))

        let reopened = try EventStore(path: path, projections: [TitleProjection()])
        #expect(reopened.openedFirst)
        #expect(!reopened.hasDeferredVersions)
        #expect(try await Self.marker(reopened) == nil)
        #expect(try await Self.versionsOffTheLog(reopened) == [], "the versions the pull left, from the log")
        let later = try EventStore(path: path, projections: [TitleProjection()])
        #expect(!later.openedFirst, "the first opener keeps the lock, shared, for as long as it is open")
        withExtendedLifetime((reopened, later)) {}
    }

    /// The lock file is one of the database's companions: removing the database removes it.
    @Test func removingTheDatabaseRemovesItsLockFile() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("a.sqlite")
        do { _ = try EventStore(path: path) }
        #expect(FileManager.default.fileExists(atPath: path + SyncDatabase.lockSuffix))
        try SyncDatabase.removeWithCompanions(path)
        #expect(!FileManager.default.fileExists(atPath: path + SyncDatabase.lockSuffix))
        #expect(try EventStore(path: path).openedFirst, "a new file, opened first")
    }

    /// A second opener still builds a projection it finds never built or of another version: no live store
    /// can be holding records of it, and this store could not read it otherwise.
    @Test func aSecondOpenerBuildsAProjectionOfAnotherVersion() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("a.sqlite")
        let first = try EventStore(path: path)
        try await first.append([title("note:1", "Milk"), tag("note:1", "food")])
        let second = try EventStore(path: path, projections: [TitleProjection()])
        #expect(!second.openedFirst)
        #expect(try await TitleProjection.dump(second) == ["note:1=Milk", "note:1#food"])
        let upgraded = try EventStore(path: path, projections: [TitleProjection(version: 2)])
        #expect(!upgraded.openedFirst)
        #expect(try await TitleProjection.dump(upgraded) == ["note:1=Milk", "note:1#food"])
        withExtendedLifetime((first, second, upgraded)) {}
    }
}
