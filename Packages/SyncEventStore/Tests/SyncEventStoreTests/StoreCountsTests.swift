import Foundation
import GRDB
import SyncEventStoreTestSupport
import SyncModels
import Testing

@testable import SyncEventStore

/// `event_counts` and `streams` are kept by the store's write paths (and triggers for status changes and
/// deletes) instead of being computed from the log: after any mix of writes they must say exactly what a
/// scan of the log says.
@Suite struct StoreCountsTests {
    /// What a scan of the log says: counts by status and each stream's highest version.
    static func scanned(_ store: EventStore) async throws -> ([SyncStatus: Int], [String: Int64]) {
        try await store.database.writer.read { db in
            var counts: [SyncStatus: Int] = [.pending: 0, .confirmed: 0, .rejected: 0]
            for row in try Row.fetchAll(db, sql: "SELECT status, count(*) FROM events GROUP BY status") {
                counts[SyncStatus(rawValue: row[0])!] = row[1]
            }
            var versions: [String: Int64] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT stream, max(stream_version) FROM events GROUP BY stream") {
                versions[row[0]] = row[1]
            }
            return (counts, versions)
        }
    }

    static func kept(_ store: EventStore) async throws -> [String: Int64] {
        try await store.database.writer.read { db in
            Dictionary(
                uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT stream, version FROM streams").map {
                    ($0[0] as String, $0[1] as Int64)
                })
        }
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func countsAndStreamVersionsMatchTheLogAfterAnyMixOfWrites(seed: UInt64) async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("counts.sqlite"), projections: [TitleProjection()])
        var random = SplitMix64(seed: seed)
        var nextSeq: Int64 = 1
        var pruned = false
        for _ in 0..<60 {
            switch random.int(below: 7) {
            case 0, 1:
                // Now and then in a second scope: `streams.scope` must then say the stream is in several.
                try await store.append(
                    (0..<random.int(1...5)).map { _ in
                        title(
                            "note:\(random.int(below: 8))", "t", scope: random.int(below: 8) == 0 ? "team-2" : "team-1")
                    })
            case 2:
                // The server confirms some pending events (as a push answer would).
                let pending = try await store.pendingEvents(limit: random.int(1...3))
                var seqs: [EventID: Int64] = [:]
                for event in pending {
                    seqs[event.event.id] = nextSeq
                    nextSeq += 1
                }
                try await store.markConfirmed(seqs)
            case 3:
                if let victim = try await store.pendingEvents(limit: 1).first {
                    try await store.markRejected([victim.event.id], code: "validation.failed", message: "no")
                }
            case 4:
                // A page of another replica's events, some of them again (a repeated page).
                let other = try EventStore(path: directory.path("other-\(nextSeq).sqlite"))
                let made = try await other.append(
                    (0..<random.int(1...4)).map { _ in tag("note:\(random.int(below: 8))", "x") })
                let page = confirmed(made, firstSeq: nextSeq)
                nextSeq += Int64(page.count)
                try await store.applyConfirmed(page, cursor: "c\(nextSeq)")
                try await store.applyConfirmed(page, cursor: "c\(nextSeq)")
            case 5:
                // The server lost what came after some seq (a restore): those events are pending again.
                try await store.repend(scope: "team-1", above: Int64(random.int(below: Int(nextSeq))))
            default:
                _ = try await store.prune(stablePoints: ["team-1": nextSeq / 2], olderThan: .distantFuture)
                pruned = true
            }
            let (counts, versions) = try await Self.scanned(store)
            #expect(try await store.counts() == counts)
            #expect(try await store.scopeChecksums().values.allSatisfy(\.isConsistent))
            // Each stream's scope: the one its events in the log have, or '' (several, or not known to be one).
            let (held, said) = try await store.database.writer.read { db in
                (
                    try Row.fetchAll(db, sql: "SELECT stream, min(scope), max(scope) FROM events GROUP BY stream"),
                    Dictionary(
                        uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT stream, scope FROM streams").map {
                            ($0[0] as String, $0[1] as String?)
                        })
                )
            }
            for row in held {
                let stream: String = row[0]
                let scopes: (String, String) = (row[1], row[2])
                if scopes.0 == scopes.1 {
                    #expect(said[stream] == scopes.0 || said[stream] == "", "\(stream)")
                } else {
                    #expect(said[stream] == "", "\(stream) has events in two scopes")
                }
            }
            // Pruning deletes rows, never versions: `streams` keeps the highest version ever written.
            let kept = try await Self.kept(store)
            for (stream, version) in versions {
                if pruned {
                    #expect((kept[stream] ?? 0) >= version, "\(stream)")
                } else {
                    #expect(kept[stream] == version, "\(stream)")
                }
            }
        }
    }

    /// Events the server lost become pending again in their places in the log, ahead of later local edits;
    /// the sums forget them until the server confirms them again, then count each once.
    @Test func eventsMadePendingAgainGoBackInTheirPlacesAndCountOnceConfirmedAgain() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("repend.sqlite"), projections: [TitleProjection()])
        let mine = try await store.append([title("note:1", "a"), title("note:2", "b")])
        try await store.markConfirmed([mine[0].event.id: 1, mine[1].event.id: 2])
        let other = try EventStore(path: directory.path("other.sqlite"))
        let theirs = confirmed(try await other.append([tag("note:1", "x")]), firstSeq: 3)
        try await store.applyConfirmed(theirs, cursor: "c3")
        let later = try await store.append([title("note:1", "c")])
        let whole = try #require(try await store.scopeChecksums()["team-1"])

        #expect(try await store.repend(scope: "team-1", above: 1) == 2)
        let pending = try await store.pendingEvents(limit: 10)
        #expect(pending.map(\.event.id) == [mine[1].event.id, theirs[0].id, later[0].event.id])
        #expect(try await store.counts() == [.pending: 3, .confirmed: 1, .rejected: 0])
        let rewound = try #require(try await store.scopeChecksums()["team-1"])
        #expect(
            rewound.isConsistent
                && rewound.applied == EventChecksum.of(mine[0].event, payload: PayloadCodec.encode(mine[0].event)))

        try await store.markConfirmed([mine[1].event.id: 2, theirs[0].id: 3])
        let again = try #require(try await store.scopeChecksums()["team-1"])
        #expect(again.isConsistent && again.applied == whole.applied && again.held == whole.held)
        #expect(try await store.repend(scope: "team-1", above: 3) == 0)
    }
}
