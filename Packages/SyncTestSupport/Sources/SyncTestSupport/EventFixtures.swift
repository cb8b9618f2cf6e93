import Foundation
import SyncModels
import Synchronization

/// Valid event envelopes for tests: fresh UUIDv7 ids, a dot counter that grows per call, an HLC from the
/// id's time. The defaults describe no domain (`doc.edited` on `doc:…` streams).
public enum EventFixtures {
    /// The replica events are made by unless a test says otherwise.
    public static let replica = ReplicaID(high: 0x6d2c_1f0e_9a8b_4c7d, low: 0x8e9f_0011_2233_4455)
    /// The stream events are on unless a test says otherwise.
    public static let defaultStream = "doc:018f4e3a-0000-7000-8000-000000000001"
    private static let generator = Mutex((EventIDGenerator(), UInt64(0)))

    /// A new event id and the next dot counter.
    public static func nextID() -> (EventID, UInt64) {
        generator.withLock { state in
            state.1 += 1
            return (state.0.next(wall: UInt64(Date().timeIntervalSince1970 * 1000)), state.1)
        }
    }

    /// A valid event of `scope`; every other field can be set.
    public static func event(
        scope: Scope, stream: String = defaultStream, version: Int64 = 1, type: String = "doc.edited",
        payload: JSONValue = .object(["title": .string("Groceries")]), replica: ReplicaID = EventFixtures.replica
    ) -> Event {
        let (id, counter) = nextID()
        return Event(
            id: id, scope: scope, stream: stream, streamVersion: version, type: type,
            hlc: HLCTimestamp(physical: id.milliseconds, counter: 0, node: replica.high),
            dot: Dot(replica: replica, counter: counter), payload: payload)
    }

    /// A new stream name `<prefix>:<uuid>` (lowercase UUID).
    public static func stream(_ prefix: String = "doc") -> String {
        prefix + ":" + UUID().uuidString.lowercased()
    }
}
