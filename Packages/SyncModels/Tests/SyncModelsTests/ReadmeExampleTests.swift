import Foundation
import SyncModels
import Testing

/// Keeps the README example compiling and working: the body below is the README's code.
@Suite struct ReadmeExampleTests {
    @Test func readmeExampleRuns() throws {
        // README begins
        let replica = ReplicaID.random()
        let clock = HybridLogicalClock(replica: replica)
        var ids = EventIDGenerator()
        let event = Event(
            id: ids.next(wall: HybridLogicalClock.systemMilliseconds()), scope: "team-1", stream: "note:1",
            streamVersion: 1, type: "note.created", hlc: clock.now(), dot: Dot(replica: replica, counter: 1),
            payload: .object(["title": .string("Groceries")]))
        try event.validate()
        print(String(decoding: try CanonicalJSON.encode(event), as: UTF8.self))
        // README ends
        #expect(try CanonicalJSON.decode(Event.self, from: CanonicalJSON.encode(event)) == event)
    }
}
