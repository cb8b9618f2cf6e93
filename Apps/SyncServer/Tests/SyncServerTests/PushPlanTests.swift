import NotesDomain
import SyncModels
import SyncProtocol
import Testing

@testable import SyncServer

@Suite struct PushPlanTests {
    @Test func acceptedEventsGetConsecutiveSeqsPerScopeInRequestOrder() {
        let events = [
            Fixtures.event(scope: "b"), Fixtures.event(scope: "a"), Fixtures.event(scope: "b"),
            Fixtures.event(scope: "a"),
        ]
        var plan = PushPlan(events: events, allowedScopes: ["a", "b"])
        #expect(plan.pendingScopes == ["a", "b"])
        let heads = plan.assignSeqs(heads: ["a": 10])
        #expect(heads == ["a": 12, "b": 2])
        #expect(plan.results.map(\.seq) == [1, 11, 2, 12])
        #expect(plan.results.allSatisfy { $0.status == .accepted })
    }

    @Test func envelopeScopeAndRepeatedIDs() {
        var invalid = Fixtures.event(scope: "a")
        invalid.streamVersion = 0
        let first = Fixtures.event(scope: "a")
        let events = [first, invalid, Fixtures.event(scope: "secret"), first]
        var plan = PushPlan(events: events, allowedScopes: ["a"])
        _ = plan.assignSeqs(heads: [:])
        let results = plan.results
        #expect(results[0] == .accepted(first.id, seq: 1))
        #expect(results[1].code == .eventInvalid)
        #expect(results[2].code == .scopeForbidden)
        #expect(results[3] == .duplicate(first.id, seq: 1))
    }

    @Test func storedIDsAreDuplicatesWithTheirOriginalSeq() {
        let stored = Fixtures.event(scope: "a")
        let fresh = Fixtures.event(scope: "a")
        var plan = PushPlan(events: [stored, fresh], allowedScopes: ["a"])
        plan.markStored([stored.id: 7])
        _ = plan.assignSeqs(heads: ["a": 9])
        #expect(plan.results == [.duplicate(stored.id, seq: 7), .accepted(fresh.id, seq: 10)])
    }

    @Test func staleStreamVersionsConflictUnlessCommutative() {
        let commutative: (String) -> Bool = { $0.hasPrefix("note.") }
        let stale = Fixtures.event(scope: "a", stream: "order:1", version: 3, type: "order.placed")
        let next = Fixtures.event(scope: "a", stream: "order:1", version: 6, type: "order.paid")
        let again = Fixtures.event(scope: "a", stream: "order:1", version: 6, type: "order.shipped")
        let crdt = Fixtures.event(scope: "a", stream: "note:1", version: 1, type: "note.titleSet")
        var plan = PushPlan(events: [stale, next, again, crdt], allowedScopes: ["a"])
        let key = PushPlan.StreamKey(scope: "a", stream: "order:1")
        #expect(plan.versionCheckedStreams(isCommutative: commutative) == [key])
        let versions = plan.checkVersions(
            current: [key: 5, .init(scope: "a", stream: "note:1"): 9], isCommutative: commutative)
        #expect(versions == [key: 6])
        _ = plan.assignSeqs(heads: [:])
        let results = plan.results
        #expect(results[0].code == .conflictVersion && results[0].currentVersion == 5)
        #expect(results[1].status == .accepted)
        #expect(results[2].code == .conflictVersion && results[2].currentVersion == 6)
        #expect(results[3].status == .accepted)
    }

    @Test func eventsWithNoCandidatesNeedNoScopes() {
        let plan = PushPlan(events: [Fixtures.event(scope: "x")], allowedScopes: [])
        #expect(plan.pendingScopes.isEmpty)
        #expect(plan.results[0].code == .scopeForbidden)
    }
}

@Suite struct NoteQuotaWalkTests {
    static func note(_ type: String, _ stream: String, scope: Scope = "a") -> Event {
        Fixtures.event(scope: scope, stream: stream, type: type)
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
