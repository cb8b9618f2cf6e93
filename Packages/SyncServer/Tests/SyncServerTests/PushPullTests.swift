import Foundation
import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Testing

@testable import SyncServer

@Suite struct PushPullTests {
    @Test func pushedEventsArePulledInSeqOrderWithServerFields() async throws {
        try await TestServer.run { server in
            let events = (0..<5).map { _ in EventFixtures.event(scope: "p1") } + [EventFixtures.event(scope: "p2")]
            let results = try await server.push(events, scopes: ["p1", "p2"])
            #expect(results.map(\.status) == Array(repeating: .accepted, count: 6))
            #expect(results.map(\.seq) == [1, 2, 3, 4, 5, 1])
            #expect(results.map(\.id) == events.map(\.id))

            let page = try await server.pull(PullRequest(), scopes: ["p1", "p2"])
            #expect(page.events.map(\.id) == events.map(\.id))
            #expect(page.hasMore == false)
            for (pulled, pushed) in zip(page.events, events) {
                var stripped = pulled
                #expect(pulled.seq != nil && pulled.receivedAt != nil)
                stripped.seq = nil
                stripped.receivedAt = nil
                #expect(stripped == pushed)
            }
            let next = try await server.pull(
                PullRequest(cursor: try ScopeCursor(encoded: page.cursor)), scopes: ["p1", "p2"])
            #expect(next.events.isEmpty && next.cursor == page.cursor && !next.hasMore)
        }
    }

    @Test func pagesNeverSkipOrRepeat() async throws {
        try await TestServer.run { server in
            var pushed: [EventID] = []
            for scope in ["b", "a", "c"] {
                let events = (0..<7).map { _ in EventFixtures.event(scope: Scope(stringLiteral: scope)) }
                _ = try await server.push(events, scopes: [scope])
                pushed += events.map(\.id)
            }
            var cursor = ScopeCursor()
            var pulled: [Event] = []
            var pages = 0
            while true {
                let page = try await server.pull(PullRequest(cursor: cursor, limit: 4), scopes: ["a", "b", "c"])
                pulled += page.events
                cursor = try ScopeCursor(encoded: page.cursor)
                pages += 1
                #expect(page.remaining == 21 - pulled.count, "the progress of the pull")
                if !page.hasMore { break }
                #expect(page.events.count == 4)
            }
            #expect(pages == 6)
            #expect(
                pulled.map(\.scope.name) == Array(repeating: "a", count: 7) + Array(repeating: "b", count: 7)
                    + Array(repeating: "c", count: 7))
            #expect(Set(pulled.map(\.id)) == Set(pushed) && pulled.count == pushed.count)
            #expect(cursor["a"] == 7 && cursor["b"] == 7 && cursor["c"] == 7)
            // A scope filter reads only that scope and keeps the others' positions in the cursor.
            let only = try await server.pull(PullRequest(scopes: ["b"]), scopes: ["a", "b", "c"])
            #expect(Set(only.events.map(\.scope)) == ["b"])
        }
    }

    @Test func retriesAreIdempotentAndReturnTheOriginalSeq() async throws {
        try await TestServer.run { server in
            let events = (0..<3).map { _ in EventFixtures.event(scope: "r") }
            let first = try await server.push(events, scopes: ["r"])
            let fresh = EventFixtures.event(scope: "r")
            let retry = try await server.push(events + [fresh, events[1]], scopes: ["r"])
            #expect(retry[0...2].map(\.status) == [.duplicate, .duplicate, .duplicate])
            #expect(retry[0...2].map(\.seq) == first.map(\.seq))
            #expect(retry[3] == .accepted(fresh.id, seq: 4))
            #expect(retry[4] == .duplicate(events[1].id, seq: 2))
            let stored = try await server.database.integers("SELECT count(*) FROM events")
            #expect(stored == [4])
            let head = try await server.database.integers("SELECT head FROM scopes WHERE scope = 'r'")
            #expect(head == [4])
        }
    }

    @Test func syncPushesThenPullsInOneRoundTrip() async throws {
        try await TestServer.run { server in
            let earlier = EventFixtures.event(scope: "s")
            _ = try await server.push([earlier], scopes: ["s"])
            let event = EventFixtures.event(scope: "s")
            let body = try server.codec.encode(SyncRequest(replica: EventFixtures.replica, events: [event], limit: 10))
            let response = try await server.send(.post, "/v1/sync", headers: try await server.bearer(["s"]), body: body)
            #expect(response.status == .ok)
            let sync = try server.decode(SyncResponse.self, response)
            #expect(sync.results == [.accepted(event.id, seq: 2)])
            #expect(sync.events.map(\.id) == [earlier.id, event.id])
            #expect(!sync.hasMore)
            // The pull half recorded the replica's acknowledged position (its cursor as sent: 0).
            let progress = try await server.database.integers(
                "SELECT acknowledged_seq FROM replica_progress WHERE scope = 's'")
            #expect(progress == [0])
            let cursorBody = try server.codec.encode(
                SyncRequest(replica: EventFixtures.replica, events: [], cursor: sync.cursor))
            _ = try await server.send(.post, "/v1/sync", headers: try await server.bearer(["s"]), body: cursorBody)
            let advanced = try await server.database.integers(
                "SELECT acknowledged_seq FROM replica_progress WHERE scope = 's'")
            #expect(advanced == [2])

            // A replica whose outbox holds an edit made at seq 1 vouches for no more than that.
            var heldBack = ScopeCursor()
            heldBack.advance("s", to: 1)
            let other = ReplicaID(high: 3, low: 4)
            let holding = try server.codec.encode(
                SyncRequest(replica: other, events: [], cursor: sync.cursor, acknowledged: heldBack.encoded))
            let answer = try await server.send(
                .post, "/v1/sync", headers: try await server.bearer(["s"]), body: holding)
            #expect(answer.status == .ok)
            #expect(try server.decode(SyncResponse.self, answer).cursor == sync.cursor)
            let recorded = try await server.database.integers(
                "SELECT acknowledged_seq FROM replica_progress WHERE replica = \(other.description)")
            #expect(recorded == [1])
            let bad = try server.codec.encode(
                SyncRequest(replica: other, events: [], cursor: sync.cursor, acknowledged: "not a cursor"))
            let refused = try await server.send(.post, "/v1/sync", headers: try await server.bearer(["s"]), body: bad)
            #expect(refused.status == .badRequest)
        }
    }

    @Test func answersCarryEachScopesStablePointOverTheReplicasSeenWithinTheHorizon() async throws {
        try await TestServer.run(configure: {
            $0.evictionHorizonSeconds = 3600
            $0.stablePointRefreshMilliseconds = 0
        }) { server in
            _ = try await server.push((0..<5).map { _ in EventFixtures.event(scope: "t") }, scopes: ["t"])
            // The pushing replica never said what it has read: it holds the stable point at 0 while seen.
            let first = try await server.pull(PullRequest(), scopes: ["t"])
            #expect(first.stable == ["t": 0])
            #expect(first.othersStable == nil, "a pull that names no replica has no others")
            try await server.database.execute("UPDATE replica_progress SET seen_at = now() - interval '2 hours'")
            func sync(_ replica: ReplicaID, at seq: Int64, acknowledged: Int64? = nil) async throws -> SyncResponse {
                var cursor = ScopeCursor()
                cursor.advance("t", to: seq)
                var held: ScopeCursor?
                if let acknowledged {
                    held = ScopeCursor()
                    held?.advance("t", to: acknowledged)
                }
                let body = try server.codec.encode(
                    SyncRequest(
                        replica: replica, events: [], cursor: cursor.encoded, scopes: ["t"],
                        acknowledged: held?.encoded))
                let response = try await server.send(
                    .post, "/v1/sync", headers: try await server.bearer(["t"]), body: body)
                #expect(response.status == .ok)
                return try server.decode(SyncResponse.self, response)
            }
            let a = ReplicaID(high: 1, low: 1)
            let b = ReplicaID(high: 2, low: 2)
            let alone = try await sync(a, at: 4)
            #expect(alone.stable == ["t": 4], "the only replica seen vouches for seq 4")
            #expect(alone.othersStable == ["t": 5], "no other replica holds anything back from a: the head")
            let second = try await sync(b, at: 5, acknowledged: 2)
            #expect(second.stable == ["t": 2], "b's outbox holds an edit made at 2")
            #expect(second.othersStable == ["t": 4], "b's own edit does not hold b back; a does")
            let third = try await sync(a, at: 5)
            #expect(third.stable == ["t": 2])
            #expect(third.othersStable == ["t": 2])
            // A third replica starting from nothing holds the stable point at 0, but not what it may fold.
            let c = ReplicaID(high: 3, low: 3)
            let fresh = try await sync(c, at: 0)
            #expect(fresh.stable == ["t": 0] && fresh.othersStable == ["t": 2])
            let uri = TestServer.uri(PullRequest(cursor: ScopeCursor(), replica: c))
            let pulled = try server.decode(
                PullResponse.self, try await server.send(.get, uri, headers: try await server.bearer(["t"])))
            #expect(pulled.othersStable == ["t": 2], "a pull that names its replica says it too")
            try await server.database.execute(
                "UPDATE replica_progress SET seen_at = now() - interval '2 hours' WHERE replica = \(c.description)")
            // b falls silent past the horizon: it stops holding the stable point back.
            try await server.database.execute(
                "UPDATE replica_progress SET seen_at = now() - interval '2 hours' WHERE replica = \(b.description)")
            #expect(try await sync(a, at: 5).stable == ["t": 5])
        }
    }

    @Test func pullRecordsReplicaProgressWhenNamed() async throws {
        try await TestServer.run { server in
            _ = try await server.push([EventFixtures.event(scope: "q")], scopes: ["q"])
            var cursor = ScopeCursor()
            cursor.advance("q", to: 1)
            let replica = ReplicaID(high: 7, low: 9)
            let uri = TestServer.uri(PullRequest(cursor: cursor, replica: replica))
            let response = try await server.send(.get, uri, headers: try await server.bearer(["q"]))
            #expect(response.status == .ok)
            let progress = try await server.database.integers(
                "SELECT acknowledged_seq FROM replica_progress WHERE replica = \(replica.description)")
            #expect(progress == [1])
            // With pending edits made before it read anything, it vouches for the beginning only.
            let holding = ReplicaID(high: 7, low: 10)
            let heldURI = TestServer.uri(PullRequest(cursor: cursor, replica: holding, acknowledged: ScopeCursor()))
            #expect(try await server.send(.get, heldURI, headers: try await server.bearer(["q"])).status == .ok)
            let held = try await server.database.integers(
                "SELECT acknowledged_seq FROM replica_progress WHERE replica = \(holding.description)")
            #expect(held == [0])
        }
    }

    @Test func staleStreamVersionsConflictWithTheCurrentVersion() async throws {
        try await TestServer.run { server in
            let placed = EventFixtures.event(scope: "o", stream: "order:1", version: 1, type: "order.placed")
            let paid = EventFixtures.event(scope: "o", stream: "order:1", version: 2, type: "order.paid")
            _ = try await server.push([placed, paid], scopes: ["o"])
            let stale = EventFixtures.event(scope: "o", stream: "order:1", version: 2, type: "order.cancelled")
            let next = EventFixtures.event(scope: "o", stream: "order:1", version: 3, type: "order.shipped")
            let results = try await server.push([stale, next], scopes: ["o"])
            #expect(results[0].status == .rejected && results[0].code == .conflictVersion)
            #expect(results[0].currentVersion == 2)
            #expect(results[1] == .accepted(next.id, seq: 3))
            // Types the domain declares commutative (CRDT operations) never conflict, whatever their versions.
            let doc = EventFixtures.stream()
            let a = EventFixtures.event(scope: "o", stream: doc, version: 1, type: "doc.edited")
            let b = EventFixtures.event(scope: "o", stream: doc, version: 1, type: "doc.edited")
            #expect(try await server.push([a, b], scopes: ["o"]).map(\.status) == [.accepted, .accepted])
        }
    }

    @Test func domainRulesRejectInsideThePushAndRecordTheirEffects() async throws {
        try await TestServer.run { server in
            let counted = (0..<3).map { _ in
                EventFixtures.event(scope: "r", stream: EventFixtures.stream(), type: "doc.counted")
            }
            let rejected = EventFixtures.event(scope: "r", type: "doc.rejected")
            let results = try await server.push([counted[0], rejected, counted[1]], scopes: ["r"])
            #expect(results.map(\.status) == [.accepted, .rejected, .accepted])
            #expect(results[1].code == .validationFailed && results[1].message == TestRule.rejectedMessage)
            // A retry is a duplicate: the rule never sees it again, so its effect is not counted twice.
            let again = try await server.push([counted[0], counted[2]], scopes: ["r"])
            #expect(again.map(\.status) == [.duplicate, .accepted])
            #expect(try await server.database.integers("SELECT n FROM test_counts WHERE scope = 'r'") == [3])
            // Rejected events get no seq: the scope stays gap-free.
            let seqs = try await server.database.integers("SELECT seq FROM events WHERE scope = 'r' ORDER BY seq")
            #expect(seqs == [1, 2, 3])
        }
    }

    @Test func retentionFloorAsksOldCursorsToReset() async throws {
        try await TestServer.run { server in
            _ = try await server.push((0..<5).map { _ in EventFixtures.event(scope: "t") }, scopes: ["t"])
            try await server.database.execute("UPDATE scopes SET retained_from_seq = 4 WHERE scope = 't'")
            // 0 holds nothing yet and reads the folded history from the start.
            for (position, status) in [(0, 200), (2, 410), (3, 200), (5, 200)] {
                var cursor = ScopeCursor()
                cursor.advance("t", to: Int64(position))
                let response = try await server.send(
                    .get, TestServer.uri(PullRequest(cursor: cursor)), headers: try await server.bearer(["t"]))
                #expect(response.status.code == status, "cursor at \(position)")
                if status == 410 { #expect(try server.error(response).code == .resetRequired) }
            }
            // A replica that read from 0 since the floor last rose goes on from below it (its bootstrap pages);
            // one that read from 0 before the floor rose, or does not say who it is, resets.
            let fresh = ReplicaID(high: 7, low: 7)
            _ = try await server.pull(PullRequest(limit: 2, replica: fresh), scopes: ["t"])
            var paging = ScopeCursor()
            paging.advance("t", to: 2)
            #expect(try await server.pull(PullRequest(cursor: paging, replica: fresh), scopes: ["t"]).events.count == 3)
            let anonymous = try await server.send(
                .get, TestServer.uri(PullRequest(cursor: paging)), headers: try await server.bearer(["t"]))
            #expect(anonymous.status.code == 410)
            try await server.database.execute("UPDATE scopes SET retained_from_seq = 5 WHERE scope = 't'")
            let afterPurge = try await server.send(
                .get, TestServer.uri(PullRequest(cursor: paging, replica: fresh)),
                headers: try await server.bearer(["t"]))
            #expect(afterPurge.status.code == 410)
            // A cursor ahead of the server's history (another database) also resets.
            var ahead = ScopeCursor()
            ahead.advance("t", to: 99)
            let response = try await server.send(
                .get, TestServer.uri(PullRequest(cursor: ahead)), headers: try await server.bearer(["t"]))
            #expect(response.status.code == 410)
        }
    }
}

/// `exclude` (pull) and `excludeOwn` (sync) leave a replica's own events out of its pages: the cursor still
/// moves past them, and a long-poll is not answered for them.
@Suite struct ExcludeOwnTests {
    static let mine = ReplicaID(high: 0xAA, low: 1)
    static let theirs = ReplicaID(high: 0xBB, low: 2)

    @Test func ownEventsAreLeftOutAndTheCursorMovesPastThem() async throws {
        try await TestServer.run { server in
            let own = (0..<3).map { _ in EventFixtures.event(scope: "x1", replica: Self.mine) }
            let other = (0..<3).map { _ in EventFixtures.event(scope: "x1", replica: Self.theirs) }
            _ = try await server.push([own[0]], scopes: ["x1"], replica: Self.mine)
            _ = try await server.push([other[0]], scopes: ["x1"], replica: Self.theirs)
            _ = try await server.push([own[1], own[2]], scopes: ["x1"], replica: Self.mine)
            _ = try await server.push([other[1]], scopes: ["x1"], replica: Self.theirs)

            let all = try await server.pull(PullRequest(exclude: Self.mine), scopes: ["x1"])
            #expect(all.events.map(\.id) == [other[0].id, other[1].id] && !all.hasMore)
            #expect(try ScopeCursor(encoded: all.cursor)["x1"] == 5)
            // Page by page: a page may hold fewer events than the limit (even none, with more after it).
            var cursor = ScopeCursor()
            var paged: [EventID] = []
            for _ in 0..<10 {
                let page = try await server.pull(
                    PullRequest(cursor: cursor, limit: 1, exclude: Self.mine), scopes: ["x1"])
                #expect(page.events.count <= 1)
                paged += page.events.map(\.id)
                cursor = try ScopeCursor(encoded: page.cursor)
                if !page.hasMore { break }
            }
            #expect(paged == [other[0].id, other[1].id] && cursor["x1"] == 5)
            // Without it, everything as before.
            #expect(try await server.pull(PullRequest(), scopes: ["x1"]).events.count == 5)

            // A long-poll is not answered for the replica's own push, only for another's. On a loaded machine
            // the two pushes may come after its wait is over: its empty answer must then be its deadline's,
            // never earlier, and the next long-poll from its cursor gets the other's event.
            let wait = 10
            let started = ContinuousClock.now
            let waiting = Task {
                try await server.pull(
                    PullRequest(cursor: try ScopeCursor(encoded: all.cursor), wait: wait, exclude: Self.mine),
                    scopes: ["x1"])
            }
            try await Task.sleep(for: .milliseconds(300))
            _ = try await server.push(
                [EventFixtures.event(scope: "x1", replica: Self.mine)], scopes: ["x1"], replica: Self.mine)
            try await Task.sleep(for: .milliseconds(300))
            _ = try await server.push([other[2]], scopes: ["x1"], replica: Self.theirs)
            var woken = try await waiting.value
            if woken.events.isEmpty {
                #expect(ContinuousClock.now - started >= .seconds(wait), "answered before its deadline")
                woken = try await server.pull(
                    PullRequest(cursor: try ScopeCursor(encoded: woken.cursor), wait: wait, exclude: Self.mine),
                    scopes: ["x1"])
            }
            #expect(woken.events.map(\.id) == [other[2].id])
            #expect(try ScopeCursor(encoded: woken.cursor)["x1"] == 7)

            // /v1/sync with excludeOwn: the push results give the seqs; the page has only the others' events.
            let pushed = EventFixtures.event(scope: "x1", replica: Self.mine)
            let body = try WireCodec().encode(
                SyncRequest(replica: Self.mine, events: [pushed], scopes: ["x1"], excludeOwn: true))
            let response = try await server.send(
                .post, "/v1/sync", headers: try await server.bearer(["x1"]), body: body)
            #expect(response.status == .ok)
            let answer = try server.decode(SyncResponse.self, response)
            #expect(answer.results.map(\.seq) == [8])
            #expect(answer.events.map(\.id) == [other[0].id, other[1].id, other[2].id])
            #expect(try ScopeCursor(encoded: answer.cursor)["x1"] == 8 && !answer.hasMore)
        }
    }

    @Test func theQueryParameterIsChecked() async throws {
        try await TestServer.run { server in
            let response = try await server.send(
                .get, "/v1/pull?exclude=not-a-replica", headers: try await server.bearer(["x1"]))
            #expect(response.status == .badRequest)
        }
    }
}

/// `markEvery` (pull and sync) asks for the cursor after every so many events of the page (`marks`): a
/// replica that stores one and pulls from it later reads exactly the events after it, across scopes and with
/// its own events left out.
@Suite struct PageMarksTests {
    static let mine = ReplicaID(high: 0xAA, low: 3)
    static let theirs = ReplicaID(high: 0xBB, low: 4)

    @Test func pullingFromAnyMarkReadsExactlyTheRestOfThePage() async throws {
        try await TestServer.run { server in
            for scope in ["m1", "m2"] {
                _ = try await server.push(
                    (0..<7).map { _ in EventFixtures.event(scope: try Scope(scope), replica: Self.theirs) },
                    scopes: [scope],
                    replica: Self.theirs)
                _ = try await server.push(
                    [EventFixtures.event(scope: try Scope(scope), replica: Self.mine)], scopes: [scope],
                    replica: Self.mine)
            }
            // Through /v1/pull: 16 events, a mark after every 3.
            let page = try await server.pull(PullRequest(markEvery: 3), scopes: ["m1", "m2"])
            #expect(page.events.count == 16)
            let marks = try #require(page.marks)
            #expect(marks.count == 5)
            for (index, mark) in marks.enumerated() {
                let rest = try await server.pull(
                    PullRequest(cursor: try ScopeCursor(encoded: mark)), scopes: ["m1", "m2"])
                #expect(rest.events.map(\.id) == page.events.dropFirst((index + 1) * 3).map(\.id), "mark \(index)")
                #expect(rest.cursor == page.cursor)
            }
            // None asked for, none answered; a page no longer than one interval has none.
            #expect(try await server.pull(PullRequest(), scopes: ["m1", "m2"]).marks == nil)
            #expect(try await server.pull(PullRequest(markEvery: 16), scopes: ["m1", "m2"]).marks == [])

            // Through /v1/sync, leaving the replica's own events out: the marks count what the page holds.
            let body = try WireCodec().encode(
                SyncRequest(replica: Self.mine, events: [], scopes: ["m1", "m2"], excludeOwn: true, markEvery: 4))
            let response = try await server.send(
                .post, "/v1/sync", headers: try await server.bearer(["m1", "m2"]), body: body)
            #expect(response.status == .ok)
            let answer = try server.decode(SyncResponse.self, response)
            #expect(answer.events.count == 14)
            let syncMarks = try #require(answer.marks)
            #expect(syncMarks.count == 3)
            for (index, mark) in syncMarks.enumerated() {
                let rest = try await server.pull(
                    PullRequest(cursor: try ScopeCursor(encoded: mark), exclude: Self.mine), scopes: ["m1", "m2"])
                #expect(rest.events.map(\.id) == answer.events.dropFirst((index + 1) * 4).map(\.id), "mark \(index)")
            }
        }
    }

    @Test func anIntervalOutOfRangeIsABadRequest() async throws {
        try await TestServer.run { server in
            for value in ["0", "-1", "5001", "x"] {
                let response = try await server.send(
                    .get, "/v1/pull?markEvery=\(value)", headers: try await server.bearer(["m1"]))
                #expect(response.status == .badRequest, "markEvery=\(value)")
            }
            let body = Data(#"{"replica":"\#(Self.mine)","events":[],"markEvery":0}"#.utf8)
            let response = try await server.send(
                .post, "/v1/sync", headers: try await server.bearer(["m1"]), body: body)
            #expect(response.status == .badRequest)
        }
    }
}
