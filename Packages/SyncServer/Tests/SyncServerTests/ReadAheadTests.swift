import Foundation
import HTTPTypes
import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Testing

@testable import SyncServer

@Suite struct ReadAheadTests {
    static let device = ReplicaID(high: 7, low: 7)
    static let writer = ReplicaID(high: 8, low: 8)

    /// A device catching up through `/v1/sync` while it pushes its own edits and another replica keeps
    /// writing: every page but the first is read ahead, and each is what a fresh read at that moment gives.
    @Test func aReplicaCatchingUpGetsEveryEventOnceFromPagesReadAhead() async throws {
        // Pages read ahead are dropped after 10 s by default; under a loaded test run a round can take longer.
        try await TestServer.run(configure: { $0.readAheadMaxAge = .seconds(600) }) { server in
            let scopes = ["a", "b", "c"]
            var others: [EventID] = []
            for scope in scopes {
                let events = (0..<25).map { _ in EventFixtures.event(scope: Scope(stringLiteral: scope)) }
                _ = try await server.push(events, scopes: scopes)
                others += events.map(\.id)
            }
            var headers = try await server.bearer(scopes)
            headers[.acceptEncoding] = "gzip"
            var cursor: String? = nil
            var pulled: [EventID] = []
            var round = 0
            var compared = 0
            while true {
                round += 1
                // The device pushes an edit every other round; the other replica writes every third.
                let own = round % 2 == 0 ? [EventFixtures.event(scope: "a", replica: Self.device)] : []
                let concurrent = round % 3 == 0
                if concurrent {
                    let event = EventFixtures.event(scope: "b", replica: Self.writer)
                    _ = try await server.push([event], scopes: scopes, replica: Self.writer)
                    others.append(event.id)
                }
                let request = SyncRequest(
                    replica: Self.device, events: own, cursor: cursor, limit: 10, excludeOwn: true, markEvery: 4)
                let response = try await server.send(
                    .post, "/v1/sync", headers: headers, body: try server.codec.encode(request))
                #expect(response.status == .ok)
                let answer = try server.decode(SyncResponse.self, response)
                #expect(answer.results.map(\.status) == own.map { _ in .accepted })
                // Nothing written since the answer before: the page is the one a fresh read gives now (a pull
                // naming the replica, which leaves its events out in the database as a sync does).
                if !concurrent && own.isEmpty {
                    let fresh = try await server.pull(
                        PullRequest(
                            cursor: try ScopeCursor(encoded: cursor), limit: 10, replica: Self.device,
                            exclude: Self.device, markEvery: 4),
                        scopes: scopes)
                    #expect(fresh.events == answer.events)
                    #expect(fresh.cursor == answer.cursor && fresh.hasMore == answer.hasMore)
                    #expect(fresh.marks == answer.marks && fresh.remaining == answer.remaining)
                    compared += 1
                }
                // The request records the replica's progress: the cursor it sent.
                let sent = try ScopeCursor(encoded: cursor)
                let progress = try await server.database.integers(
                    "SELECT acknowledged_seq FROM replica_progress WHERE replica = \(Self.device.description) ORDER BY scope"
                )
                #expect(progress == scopes.map { sent[Scope(stringLiteral: $0)] })
                pulled += answer.events.map(\.id)
                cursor = answer.cursor
                if !answer.hasMore { break }
            }
            let metrics = String(buffer: try await server.send(.get, "/metrics").body)
            let used = Self.sample(metrics, #"sync_pull_read_ahead_total{outcome="used"}"#)
            #expect(used == Double(round - 1), "\(round) rounds, \(used) answered from pages read ahead")
            // The last page may have been read before the other replica's last write: it comes with the next.
            let last = try await server.send(
                .post, "/v1/sync", headers: headers,
                body: try server.codec.encode(
                    SyncRequest(replica: Self.device, events: [], cursor: cursor, limit: 10, excludeOwn: true)))
            pulled += try server.decode(SyncResponse.self, last).events.map(\.id)
            // Every event of the others once, none of the device's own, nothing written meanwhile missed.
            #expect(pulled.count == others.count)
            #expect(Set(pulled) == Set(others))
            #expect(compared >= 3)
        }
    }

    /// A request that differs from the one read ahead for (here its limit) is read afresh and gets what it
    /// asked for; with read-ahead off, nothing is read ahead.
    @Test func aRequestThatDiffersIsReadAfresh() async throws {
        try await TestServer.run { server in
            let events = (0..<30).map { _ in EventFixtures.event(scope: "d") }
            _ = try await server.push(events, scopes: ["d"])
            let headers = try await server.bearer(["d"])
            let first = try await server.send(
                .post, "/v1/sync", headers: headers,
                body: try server.codec.encode(SyncRequest(replica: Self.device, events: [], limit: 10)))
            let page = try server.decode(SyncResponse.self, first)
            #expect(page.events.map(\.id) == Array(events.prefix(10).map(\.id)) && page.hasMore)
            let second = try await server.send(
                .post, "/v1/sync", headers: headers,
                body: try server.codec.encode(
                    SyncRequest(replica: Self.device, events: [], cursor: page.cursor, limit: 15)))
            let next = try server.decode(SyncResponse.self, second)
            #expect(next.events.map(\.id) == Array(events[10..<25].map(\.id)))
            // A request like the one read ahead for, but pushing an event it does not exclude: read after its
            // push, so its event comes back in this answer.
            let mine = EventFixtures.event(scope: "d", replica: Self.device)
            let third = try await server.send(
                .post, "/v1/sync", headers: headers,
                body: try server.codec.encode(
                    SyncRequest(replica: Self.device, events: [mine], cursor: next.cursor, limit: 15)))
            #expect(try server.decode(SyncResponse.self, third).events.map(\.id) == events[25...].map(\.id) + [mine.id])
            let metrics = String(buffer: try await server.send(.get, "/metrics").body)
            #expect(Self.sample(metrics, #"sync_pull_read_ahead_total{outcome="used"}"#) == 0)
            #expect(Self.sample(metrics, #"sync_pull_read_ahead_total{outcome="started"}"#) == 2)
        }
        try await TestServer.run(configure: { $0.readAheadEvents = 0 }) { server in
            _ = try await server.push((0..<30).map { _ in EventFixtures.event(scope: "d") }, scopes: ["d"])
            let response = try await server.send(
                .post, "/v1/sync", headers: try await server.bearer(["d"]),
                body: try server.codec.encode(SyncRequest(replica: Self.device, events: [], limit: 10)))
            #expect(try server.decode(SyncResponse.self, response).hasMore)
            let metrics = String(buffer: try await server.send(.get, "/metrics").body)
            #expect(Self.sample(metrics, #"sync_pull_read_ahead_total{outcome="started"}"#) == 0)
        }
    }

    /// A replica whose pages double while they come back full (as the reference engine's do) gets them read
    /// ahead at the size it asks for next; one whose pages stop growing short of the maximum misses once.
    @Test func pagesThatGrowAreReadAheadAtTheirNextSize() async throws {
        try await TestServer.run(configure: { $0.readAheadMaxAge = .seconds(600) }) { server in
            let events = (0..<250).map { _ in EventFixtures.event(scope: "g") }
            _ = try await server.push(events, scopes: ["g"])
            let headers = try await server.bearer(["g"])
            var cursor: String? = nil
            var pulled: [EventID] = []
            for limit in [10, 20, 40, 40, 40, 40] {
                let response = try await server.send(
                    .post, "/v1/sync", headers: headers,
                    body: try server.codec.encode(
                        SyncRequest(replica: Self.device, events: [], cursor: cursor, limit: limit)))
                let page = try server.decode(SyncResponse.self, response)
                #expect(page.events.count == limit && page.hasMore)
                pulled += page.events.map(\.id)
                cursor = page.cursor
            }
            #expect(pulled == events.prefix(pulled.count).map(\.id))
            // Read ahead at 10 (missed by 20), at 40 (taken), at 80 (missed by 40), then at 40 (taken twice).
            let metrics = String(buffer: try await server.send(.get, "/metrics").body)
            #expect(Self.sample(metrics, #"sync_pull_read_ahead_total{outcome="used"}"#) == 3)
        }
        #expect(ReadAhead.predictedLimit(asked: 500, before: nil, max: 5000) == 500)
        #expect(ReadAhead.predictedLimit(asked: 1000, before: 500, max: 5000) == 2000)
        #expect(ReadAhead.predictedLimit(asked: 4000, before: 2000, max: 5000) == 5000)
        #expect(ReadAhead.predictedLimit(asked: 5000, before: 5000, max: 5000) == 5000)
        #expect(ReadAhead.predictedLimit(asked: 300, before: 600, max: 5000) == 300)
    }

    /// The budget of events bounds what is read ahead; a replica holds one page at most, and a page not
    /// asked for in time is dropped.
    @Test func theBudgetAndTheAgeBoundWhatIsHeld() async throws {
        // A long age for the budget and the replacements (nothing expires however slow the machine), a
        // short one for the expiry.
        let readAhead = ReadAhead(maxEvents: 25, maxAge: .seconds(60))
        let shortLived = ReadAhead(maxEvents: 25, maxAge: .milliseconds(100))
        func key(_ replica: UInt64, cursor: Int64 = 0, limit: Int = 10) -> ReadAhead.Key {
            var position = ScopeCursor()
            position.advance("s", to: cursor)
            return ReadAhead.Key(
                replica: ReplicaID(high: replica, low: 1), scopes: ["s"], cursor: position, limit: limit,
                exclude: nil, markEvery: nil, gzip: true)
        }
        let prepared = ReadAhead.Prepared(
            page: PullService.Page(events: [], cursor: ScopeCursor(), hasMore: true, remaining: 0, stable: [:]),
            eventCount: 10, tail: Array("\"events\":[]}".utf8), segment: nil)
        #expect(readAhead.start(key(1)) { prepared })
        #expect(readAhead.start(key(2)) { prepared })
        #expect(!readAhead.start(key(3)) { prepared }, "30 events would pass the budget of 25")
        // The same replica again: its earlier page is replaced, not added to.
        #expect(readAhead.start(key(2, cursor: 5)) { prepared })
        #expect(readAhead.count == 2)
        #expect(await readAhead.take(key(2)).prepared == nil, "read ahead for another cursor: dropped")
        #expect(readAhead.count == 1)
        #expect(await readAhead.take(key(1)).prepared?.eventCount == 10)
        #expect(readAhead.count == 0)
        #expect(shortLived.start(key(4)) { prepared })
        try await Task.sleep(for: .milliseconds(300))
        #expect(await shortLived.take(key(4)).prepared == nil, "not asked for within maxAge")
        // Pages whose replicas never came back give their room back.
        #expect(shortLived.start(key(5)) { prepared } && shortLived.start(key(6)) { prepared })
        try await Task.sleep(for: .milliseconds(300))
        #expect(shortLived.start(key(7, limit: 20)) { prepared })
        #expect(shortLived.count == 1)
    }

    /// The value of the `/metrics` sample whose name and labels are `prefix`, 0 when absent.
    static func sample(_ text: String, _ prefix: String) -> Double {
        for line in text.split(separator: "\n") where line.hasPrefix(prefix + " ") {
            return Double(line.dropFirst(prefix.count + 1)) ?? 0
        }
        return 0
    }
}
