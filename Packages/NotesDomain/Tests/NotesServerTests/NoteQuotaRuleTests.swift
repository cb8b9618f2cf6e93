import ArgumentParser
import Foundation
import NotesDomain
import SyncModels
import SyncProtocol
import SyncServer
import SyncServerTesting
import SyncTestSupport
import Testing

@testable import NotesServer

@Suite struct NoteQuotaRuleTests {
    @Test func noteQuotaRejectsCreationsPastItAndRetriesNeverCountTwice() async throws {
        try await TestServer.run(domain: NotesServerDomain(quota: 2)) { server in
            let first = EventFixtures.event(scope: "n", stream: EventFixtures.stream("note"), type: "note.created")
            let second = EventFixtures.event(scope: "n", stream: EventFixtures.stream("note"), type: "note.created")
            #expect(try await server.push([first], scopes: ["n"]).map(\.status) == [.accepted])
            // The retry of `first` is a duplicate and does not use a second slot.
            let results = try await server.push([first, second], scopes: ["n"])
            #expect(results.map(\.status) == [.duplicate, .accepted])
            let third = EventFixtures.event(scope: "n", stream: EventFixtures.stream("note"), type: "note.created")
            let refused = try await server.push([third], scopes: ["n"])
            #expect(refused[0].code == .validationFailed)
            #expect(refused[0].message == NoteRules.quotaMessage(quota: 2))
            // Other scopes have their own quota; deleting a note frees room.
            #expect(
                try await server.push(
                    [EventFixtures.event(scope: "n2", stream: EventFixtures.stream("note"), type: "note.created")],
                    scopes: ["n2"])[
                        0
                    ].status == .accepted)
            let deleted = EventFixtures.event(scope: "n", stream: first.stream, version: 2, type: "note.deleted")
            let retried = EventFixtures.event(scope: "n", stream: third.stream, type: "note.created")
            #expect(try await server.push([deleted, retried], scopes: ["n"]).map(\.status) == [.accepted, .accepted])
            let live = try await server.database.integers("SELECT live FROM note_counts WHERE scope = 'n'")
            #expect(live == [2])
            // Rejected events get no seq: the scope stays gap-free.
            let seqs = try await server.database.integers("SELECT seq FROM events WHERE scope = 'n' ORDER BY seq")
            #expect(seqs == [1, 2, 3, 4])
        }
    }

    /// Creations and deletions decided inside the push's one statement (`note_quota_append`) are answered as
    /// `walk` answers them, push after push, and leave the rule's tables as its writes would: creations past the
    /// quota, a second creation of a live note, streams that are not `note:<uuid>` (an uppercase id passes
    /// `walk` but not the function, which leaves it to the steps), deletions of live and unknown notes.
    @Test func theQuotaInsideTheOneStatementDecidesAsTheRuleDoes() async throws {
        try await TestServer.run(domain: NotesServerDomain(quota: 3)) { server in
            var random = SplitMix64(seed: 0x0A07_E501)
            var state = NoteQuotaRule.State(live: [], counts: [:])
            var streams: [Scope: [String]] = [:]
            for _ in 0..<150 {
                var events: [Event] = []
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    let scope: Scope = Bool.random(using: &random) ? "q1" : "q2"
                    let roll = Int.random(in: 0..<100, using: &random)
                    let known = streams[scope]?.randomElement(using: &random)
                    let event: Event
                    if roll < 40 || known == nil {
                        let stream = EventFixtures.stream("note")
                        streams[scope, default: []].append(stream)
                        event = EventFixtures.event(scope: scope, stream: stream, type: NoteQuotaRule.created)
                    } else if roll < 45 {
                        let stream = "note:" + UUID().uuidString
                        streams[scope, default: []].append(stream)
                        event = EventFixtures.event(scope: scope, stream: stream, type: NoteQuotaRule.created)
                    } else if roll < 48 {
                        event = EventFixtures.event(scope: scope, stream: "note:1", type: NoteQuotaRule.created)
                    } else if roll < 55 {
                        event = EventFixtures.event(scope: scope, stream: known!, type: NoteQuotaRule.created)
                    } else if roll < 90 {
                        event = EventFixtures.event(scope: scope, stream: known!, type: NoteQuotaRule.deleted)
                    } else {
                        event = EventFixtures.event(
                            scope: scope, stream: EventFixtures.stream("note"), type: NoteQuotaRule.deleted)
                    }
                    events.append(event)
                }
                let (rejections, next) = NoteQuotaRule.walk(events, from: state, quota: 3)
                let results = try await server.push(events, scopes: ["q1", "q2"])
                for (index, result) in results.enumerated() {
                    #expect(
                        (result.status == .rejected) == (rejections[index] != nil),
                        "\(events[index].type) on \(events[index].stream): \(result)")
                }
                state = next
            }
            let live = try await server.database.strings(
                "SELECT scope || ' ' || stream FROM live_notes ORDER BY 1")
            #expect(live == state.live.map { "\($0.scope.name) \($0.stream)" }.sorted())
            let counts = try await server.database.strings(
                "SELECT scope || ' ' || live FROM note_counts WHERE live <> 0 ORDER BY 1")
            #expect(counts == state.counts.filter { $0.value != 0 }.map { "\($0.key.name) \($0.value)" }.sorted())
            let metrics = String(buffer: try await server.send(.get, "/metrics").body)
            #expect(metrics.contains(#"sync_push_one_statement_total{outcome="appended"}"#))
            #expect(metrics.contains(#"sync_push_one_statement_total{outcome="refused"}"#))
        }
    }

    @Test func concurrentCreationsAcrossTheQuotaAcceptExactlyOne() async throws {
        try await TestServer.run(domain: NotesServerDomain(quota: 1)) { server in
            let attempts = (0..<6).map { _ in
                EventFixtures.event(scope: "race", stream: EventFixtures.stream("note"), type: "note.created")
            }
            let statuses = try await withThrowingTaskGroup(of: PushResult.Status.self) { group in
                for event in attempts {
                    group.addTask { try await server.push([event], scopes: ["race"])[0].status }
                }
                var statuses: [PushResult.Status] = []
                for try await status in group { statuses.append(status) }
                return statuses
            }
            #expect(statuses.filter { $0 == .accepted }.count == 1)
            #expect(statuses.filter { $0 == .rejected }.count == 5)
        }
    }

    @Test func noteEventsAreCommutativeAndOtherTypesAreNot() async throws {
        try await TestServer.run(domain: NotesServerDomain()) { server in
            let note = EventFixtures.stream("note")
            let created = EventFixtures.event(scope: "c", stream: note, type: "note.created")
            let a = EventFixtures.event(scope: "c", stream: note, version: 1, type: "note.titleSet")
            #expect(try await server.push([created, a], scopes: ["c"]).map(\.status) == [.accepted, .accepted])
            let first = EventFixtures.event(scope: "c", stream: "order:1", version: 1, type: "order.placed")
            let stale = EventFixtures.event(scope: "c", stream: "order:1", version: 1, type: "order.paid")
            let results = try await server.push([first, stale], scopes: ["c"])
            #expect(results.map(\.status) == [.accepted, .rejected] && results[1].code == .conflictVersion)
        }
    }

    @Test func optionsReadTheQuotaFromTheFlagThenTheEnvironment() throws {
        #expect(try NotesServerOptions.parse([]).domain(environment: [:]).quota == NotesServerOptions.defaultQuota)
        #expect(try NotesServerOptions.parse([]).domain(environment: ["SYNC_NOTE_QUOTA": "7"]).quota == 7)
        #expect(
            try NotesServerOptions.parse(["--note-quota", "3"]).domain(environment: ["SYNC_NOTE_QUOTA": "7"]).quota
                == 3)
        #expect(throws: ConfigurationError.self) {
            try NotesServerOptions.parse([]).domain(environment: ["SYNC_NOTE_QUOTA": "lots"])
        }
    }
}

@Suite struct NoteQuotaWalkTests {
    static func note(_ type: String, _ stream: String, scope: Scope = "a") -> Event {
        EventFixtures.event(scope: scope, stream: stream, type: type)
    }

    @Test func creationsPastTheQuotaAreRejectedAndDeletesFreeRoom() {
        let n1 = "note:00000000-0000-7000-8000-000000000001"
        let n2 = "note:00000000-0000-7000-8000-000000000002"
        let n3 = "note:00000000-0000-7000-8000-000000000003"
        let events = [
            Self.note("note.created", n1), Self.note("note.created", n2), Self.note("note.created", n3),
            Self.note("note.deleted", n1), Self.note("note.created", n3), Self.note("note.created", n2),
        ]
        let (rejections, state) = NoteQuotaRule.walk(
            events, from: .init(live: [], counts: [:]), quota: 2)
        #expect(rejections.keys.sorted() == [2])
        #expect(rejections[2]?.code == .validationFailed)
        #expect(rejections[2]?.message == NoteRules.quotaMessage(quota: 2))
        #expect(state.counts["a"] == 2)
        #expect(state.live.count == 2)
    }

    @Test func noteEventsNeedANoteStream() {
        let (rejections, _) = NoteQuotaRule.walk(
            [Self.note("note.created", "note:nope"), Self.note("note.deleted", "other")],
            from: .init(live: [], counts: [:]), quota: 10)
        #expect(rejections.count == 2)
    }

    @Test func writesTurnOneStateIntoAnother() {
        let key = PushPlan.StreamKey(scope: "a", stream: "note:1")
        let queries = NoteQuotaRule.writes(
            from: .init(live: [], counts: [:]), to: .init(live: [key], counts: ["a": 1]))
        #expect(queries.count == 2)
        #expect(
            NoteQuotaRule.writes(from: .init(live: [key], counts: ["a": 1]), to: .init(live: [key], counts: ["a": 1]))
                .isEmpty)
    }
}
