import Foundation
import SyncModels
import Testing

/// The event checksum is part of the protocol (docs/PROTOCOL.md, "Checksums"): a client in another language
/// computes the same number, so its value for a fixed event is pinned here.
@Suite struct EventChecksumTests {
    static let event = Event(
        id: try! EventID("01890a5d-ac96-774b-bcce-b302099a8057"), scope: try! Scope("team-1"),
        stream: "note:1", streamVersion: 3, type: "note.titleSet", schemaVersion: 1,
        hlc: HLCTimestamp(physical: 1_700_000_000_000, counter: 7, node: 0x1234),
        dot: Dot(
            replica: ReplicaID(high: 0x0102_0304_0506_0708, low: 0x090A_0B0C_0D0E_0F10), counter: 42),
        payload: .object(["title": .string("Groceries")]))

    @Test func theChecksumOfAFixedEventIsPinned() {
        let payload = Data(#"{"title":"Groceries"}"#.utf8)
        #expect(Self.event.canonicalPayloadData == payload)
        #expect(EventChecksum.of(Self.event, payload: payload) == 2_621_182_262)
    }

    @Test func neitherSeqNorReceivedAtNorTheStreamVersionCount() {
        var confirmed = Self.event
        confirmed.seq = 99
        confirmed.receivedAt = Date(timeIntervalSince1970: 1_700_000_000)
        let payload = Self.event.canonicalPayloadData
        #expect(EventChecksum.of(confirmed, payload: payload) == EventChecksum.of(Self.event, payload: payload))
    }

    @Test func everyIdentifyingFieldAndEveryPayloadByteCounts() {
        let payload = Self.event.canonicalPayloadData
        let base = EventChecksum.of(Self.event, payload: payload)
        var changed: [Int64] = []
        for index in payload.indices {
            var altered = payload
            altered[index] ^= 0x01
            changed.append(EventChecksum.of(Self.event, payload: altered))
        }
        var stream = Self.event
        stream.stream = "note:2"
        changed.append(EventChecksum.of(stream, payload: payload))
        var type = Self.event
        type.type = "note.titleSeu"
        changed.append(EventChecksum.of(type, payload: payload))
        var dot = Self.event
        dot.dot = Dot(replica: Self.event.dot.replica, counter: 43)
        changed.append(EventChecksum.of(dot, payload: payload))
        // Bytes moved from the stream to the type: the lengths keep the fields apart.
        var moved = Self.event
        moved.stream = "note:"
        moved.type = "1note.titleSet"
        changed.append(EventChecksum.of(moved, payload: payload))
        #expect(!changed.contains(base))
        #expect(changed.allSatisfy { (0...Int64(UInt32.max)).contains($0) }, "32-bit terms: sums are exact")
    }

    @Test func aFoldedRowContributesWhatItCarries() {
        var folded = Self.event
        folded.carries = 12_345
        #expect(EventChecksum.contribution(of: folded, payload: Self.event.canonicalPayloadData) == 12_345)
    }
}

extension Event {
    fileprivate var canonicalPayloadData: Data { canonicalPayload ?? payload.canonicalData() }
}
