import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Testing

@testable import SyncServer

@Suite struct PushPlanTests {
    @Test func acceptedEventsGetConsecutiveSeqsPerScopeInRequestOrder() {
        let events = [
            EventFixtures.event(scope: "b"), EventFixtures.event(scope: "a"), EventFixtures.event(scope: "b"),
            EventFixtures.event(scope: "a"),
        ]
        var plan = PushPlan(events: events, allowedScopes: ["a", "b"])
        #expect(plan.pendingScopes == ["a", "b"])
        let heads = plan.assignSeqs(heads: ["a": 10])
        #expect(heads == ["a": 12, "b": 2])
        #expect(plan.results.map(\.seq) == [1, 11, 2, 12])
        #expect(plan.results.allSatisfy { $0.status == .accepted })
    }

    @Test func envelopeScopeAndRepeatedIDs() {
        var invalid = EventFixtures.event(scope: "a")
        invalid.streamVersion = 0
        let first = EventFixtures.event(scope: "a")
        let events = [first, invalid, EventFixtures.event(scope: "secret"), first]
        var plan = PushPlan(events: events, allowedScopes: ["a"])
        _ = plan.assignSeqs(heads: [:])
        let results = plan.results
        #expect(results[0] == .accepted(first.id, seq: 1))
        #expect(results[1].code == .eventInvalid)
        #expect(results[2].code == .scopeForbidden)
        #expect(results[3] == .duplicate(first.id, seq: 1))
    }

    @Test func storedIDsAreDuplicatesWithTheirOriginalSeq() {
        let stored = EventFixtures.event(scope: "a")
        let fresh = EventFixtures.event(scope: "a")
        var plan = PushPlan(events: [stored, fresh], allowedScopes: ["a"])
        plan.markStored([stored.id: 7])
        _ = plan.assignSeqs(heads: ["a": 9])
        #expect(plan.results == [.duplicate(stored.id, seq: 7), .accepted(fresh.id, seq: 10)])
    }

    @Test func staleStreamVersionsConflictUnlessCommutative() {
        let commutative: (String) -> Bool = { $0.hasPrefix("doc.") }
        let stale = EventFixtures.event(scope: "a", stream: "order:1", version: 3, type: "order.placed")
        let next = EventFixtures.event(scope: "a", stream: "order:1", version: 6, type: "order.paid")
        let again = EventFixtures.event(scope: "a", stream: "order:1", version: 6, type: "order.shipped")
        let crdt = EventFixtures.event(scope: "a", stream: "doc:1", version: 1, type: "doc.edited")
        var plan = PushPlan(events: [stale, next, again, crdt], allowedScopes: ["a"])
        let key = PushPlan.StreamKey(scope: "a", stream: "order:1")
        #expect(plan.versionCheckedStreams(isCommutative: commutative) == [key])
        let versions = plan.checkVersions(
            current: [key: 5, .init(scope: "a", stream: "doc:1"): 9], isCommutative: commutative)
        #expect(versions == [key: 6])
        _ = plan.assignSeqs(heads: [:])
        let results = plan.results
        #expect(results[0].code == .conflictVersion && results[0].currentVersion == 5)
        #expect(results[1].status == .accepted)
        #expect(results[2].code == .conflictVersion && results[2].currentVersion == 6)
        #expect(results[3].status == .accepted)
    }

    @Test func eventsWithNoCandidatesNeedNoScopes() {
        let plan = PushPlan(events: [EventFixtures.event(scope: "x")], allowedScopes: [])
        #expect(plan.pendingScopes.isEmpty)
        #expect(plan.results[0].code == .scopeForbidden)
    }
}
