import Foundation
import NotesDomain
import SyncModels
import SyncTestSupport

/// A reproducible log of many records rather than many events: each event creates a note of its own, except
/// a share `hotShare` of them that edit one of `hot` notes (a long tail: most notes with one event, a few with
/// thousands). What a device bootstrapping it writes scales with the records, not the events: the shape that
/// the Notes workload (a few hundred notes per scope, many events each) never exercises.
struct RecordsWorkload {
    let seed: UInt64
    var scope: Scope = "bench"
    var hot = 0
    var hotShare = 0.0

    func events(count: Int) -> [Event] {
        var random = SplitMix64(seed: seed)
        let replica = ReplicaID.random(using: &random)
        var generator = EventIDGenerator()
        var physical: UInt64 = 1_700_000_000_000
        var counter: UInt64 = 0
        let hotIDs = (0..<hot).map { _ in NoteID(uuid: UUID.random(using: &random)) }
        var hotStates = [NoteState](repeating: NoteState(), count: hot)
        var hotVersions = [Int64](repeating: 0, count: hot)
        var events: [Event] = []
        events.reserveCapacity(count)
        for index in 0..<count {
            counter += 1
            physical += 1
            let dot = Dot(replica: replica, counter: counter)
            let hlc = HLCTimestamp(physical: physical, counter: 0, node: replica.high)
            let stream: String
            let version: Int64
            let payload: NotePayload
            if hot > 0, Double.random(in: 0..<1, using: &random) < hotShare {
                let note = Int.random(in: 0..<hot, using: &random)
                if !hotStates[note].created {
                    payload = .created(.init(title: "hot \(note)"))
                } else if index % 2 == 0 {
                    payload = .titleSet(.init(title: "hot \(note) at \(index)"))
                } else {
                    let at = hotStates[note].body.count
                    let op = hotStates[note].body.insert(" w\(index % 10)", at: at, replica: replica)
                    payload = .bodyEdited(.init(ops: op.map { [$0] } ?? []))
                }
                hotStates[note].apply(payload, hlc: hlc, dot: dot)
                hotVersions[note] += 1
                stream = hotIDs[note].stream
                version = hotVersions[note]
            } else {
                payload = .created(.init(title: "note \(index)"))
                stream = NoteID(uuid: UUID.random(using: &random)).stream
                version = 1
            }
            events.append(
                Event(
                    id: generator.next(wall: physical, using: &random), scope: scope, stream: stream,
                    streamVersion: version, type: payload.type.rawValue, hlc: hlc, dot: dot, payload: payload.json,
                    seq: Int64(index + 1), receivedAt: Date(timeIntervalSince1970: Double(physical) / 1000)))
        }
        return events
    }
}
