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
