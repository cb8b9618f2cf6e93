import Foundation
import SyncModels
import Synchronization

/// Events for tests: valid envelopes with fresh UUIDv7 ids from one replica per call site.
enum Fixtures {
    static let replica = ReplicaID(high: 0x6d2c_1f0e_9a8b_4c7d, low: 0x8e9f_0011_2233_4455)
    private static let generator = Mutex((EventIDGenerator(), UInt64(0)))

    static func nextID() -> (EventID, UInt64) {
        generator.withLock { state in
            state.1 += 1
            return (state.0.next(wall: UInt64(Date().timeIntervalSince1970 * 1000)), state.1)
        }
    }

    static func event(
        scope: Scope, stream: String = "note:018f4e3a-0000-7000-8000-000000000001", version: Int64 = 1,
        type: String = "note.titleSet", payload: JSONValue = .object(["title": .string("Groceries")]),
        replica: ReplicaID = Fixtures.replica
    ) -> Event {
        let (id, counter) = nextID()
        return Event(
            id: id, scope: scope, stream: stream, streamVersion: version, type: type,
            hlc: HLCTimestamp(physical: id.milliseconds, counter: 0, node: replica.high),
            dot: Dot(replica: replica, counter: counter), payload: payload)
    }

    static func noteStream() -> String {
        "note:" + UUID().uuidString.lowercased()
    }
}
