import Foundation
import NotesDomain
import SyncCRDT
import SyncEventStoreTestSupport
import SyncModels
import Testing

@Suite struct ReplayTimingTmp {
    struct Log {
        var kinds: [NoteEventType] = []
        var notes: [Int] = []
        var hlcs: [HLCTimestamp] = []
        var dots: [Dot] = []
        var starts: [Int] = []
        var bytes: [UInt8] = []
    }

    static func makeLog(events: Int, notes: Int) -> Log {
        var random = SplitMix64(seed: 7)
        let replicas = (0..<4).map { _ in ReplicaID.random(using: &random) }
        var states = [NoteState](repeating: NoteState(), count: notes)
        var counters = [UInt64](repeating: 0, count: replicas.count)
        var physical: UInt64 = 1_700_000_000_000
        var log = Log()
        let words = ["milk", "plan", "call", "draft", "trip", "fix", "idea", "read"]
        for index in 0..<events {
            let note = Int.random(in: 0..<notes, using: &random)
            let device = Int.random(in: 0..<replicas.count, using: &random)
            let replica = replicas[device]
            counters[device] += 1
            physical += 1
            let dot = Dot(replica: replica, counter: counters[device])
            let hlc = HLCTimestamp(physical: physical, counter: 0, node: replica.high)
            var payload = NotePayload.created(.init(title: "note \(note)"))
            if states[note].created {
                let word = words[Int.random(in: 0..<words.count, using: &random)]
                switch Int.random(in: 0..<100, using: &random) {
                case 0..<30:
                    payload = .titleSet(.init(title: "\(word) \(index)"))
                case 30..<60:
                    let at = states[note].body.count
                    let op = states[note].body.insert(" \(word)", at: at, replica: replica)
                    payload = .bodyEdited(.init(ops: op.map { [$0] } ?? []))
                case 60..<68:
                    payload = .tagAdded(.init(tag: word, op: states[note].tags.add(word, replica: replica)))
                case 68..<70:
                    payload = .tagRemoved(.init(tag: word, op: states[note].tags.remove(word, replica: replica)))
                case 70..<85:
                    let next = states[note].views.increments[replica] + 1
                    payload = .viewed(
                        .init(count: 1, op: states[note].views.add(1, at: Dot(replica: replica, counter: next))))
                case 85..<90:
                    payload = .pinnedSet(.init(pinned: Bool.random(using: &random)))
                default:
                    let item = NoteID(uuid: UUID()).description
                    let op = states[note].checklist.insertElement(
                        item, at: states[note].checklist.count, replica: replica)
                    payload = .checklistItemAdded(.init(item: item, text: word, op: op))
                }
            }
            let type = payload.type
            states[note].apply(payload, hlc: hlc, dot: dot)
            log.kinds.append(type)
            log.notes.append(note)
            log.hlcs.append(hlc)
            log.dots.append(dot)
            log.starts.append(log.bytes.count)
            log.bytes.append(contentsOf: payload.json.canonicalData())
        }
        log.starts.append(log.bytes.count)
        return log
    }

    @Test func replayApplyTiming() {
        guard ProcessInfo.processInfo.environment["NOTES_TIMING"] != nil else { return }
        let notes = 2000
        let log = Self.makeLog(events: 300_000, notes: notes)
        var best = Double.infinity
        var check = ""
        for _ in 0..<7 {
            var states = [NoteState](repeating: NoteState(), count: notes)
            let start = ContinuousClock.now
            log.bytes.withUnsafeBytes { bytes in
                for index in 0..<log.kinds.count {
                    let payload = UnsafeRawBufferPointer(rebasing: bytes[log.starts[index]..<log.starts[index + 1]])
                    states[log.notes[index]].apply(
                        log.kinds[index], payloadBytes: payload, hlc: log.hlcs[index], dot: log.dots[index])
                }
            }
            let elapsed = ContinuousClock.now - start
            let seconds = Double(elapsed.components.attoseconds) / 1e18 + Double(elapsed.components.seconds)
            best = min(best, seconds)
            check =
                "\(states[0].view.title) \(states.map(\.views.value).reduce(0, +)) \(states.map(\.body.count).reduce(0, +)) \(states.map(\.checklist.count).reduce(0, +)) \(states.map(\.tags.elements.count).reduce(0, +))"
        }
        print(
            "REPLAY-TIMING best \(best * 1000) ms for \(log.kinds.count) events, \(log.bytes.count) bytes; check \(check)"
        )
    }
}
