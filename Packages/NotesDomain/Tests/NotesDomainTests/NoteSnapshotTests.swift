import Foundation
import NotesDomain
import SyncEventStoreTestSupport
import SyncModels
import Testing

/// `note.snapshot`: a note's history folded into its state, merged by replicas at any point of that history.
@Suite struct NoteSnapshotTests {
    struct Applied {
        var payload: NotePayload
        var hlc: HLCTimestamp
        var dot: Dot
        /// How much of the log its replica had seen when it made it (besides its own events).
        var knew = 0
    }

    /// Whether the log up to `fold` is causally stable for what follows: every later event was made by a
    /// replica that knew every event before `fold` (what the server's stable point guarantees).
    static func isStable(_ log: [Applied], at fold: Int) -> Bool {
        log[fold...].allSatisfy { event in
            event.knew >= fold || log[event.knew..<fold].allSatisfy { $0.dot.replica == event.dot.replica }
        }
    }

    /// A seeded history of one note edited by three replicas that see each other's edits late: each edits its
    /// own view of the note, and now and then catches up with the shared log.
    static func history(seed: UInt64, events: Int) -> [Applied] {
        simulate(seed: seed, events: events).log
    }

    /// The shared log, and each replica's state at the end (what it had seen plus its own edits).
    static func simulate(seed: UInt64, events: Int) -> (log: [Applied], replicas: [NoteState]) {
        var random = SplitMix64(seed: seed)
        let replicas = (1...3).map { ReplicaID(high: seed &* 31 &+ UInt64($0), low: UInt64($0)) }
        var states = [NoteState](repeating: NoteState(), count: replicas.count)
        var seen = [Int](repeating: 0, count: replicas.count)
        var counters = [UInt64](repeating: 0, count: replicas.count)
        var log: [Applied] = []
        let edits = NoteEdit.allCases.filter { $0 != .create }
        while log.count < events {
            let index = Int.random(in: 0..<replicas.count, using: &random)
            if Bool.random(using: &random) {
                for applied in log[seen[index]...] {
                    states[index].apply(applied.payload, hlc: applied.hlc, dot: applied.dot)
                }
                seen[index] = log.count
            }
            let edit = log.isEmpty ? .create : edits.randomElement(using: &random)!
            guard
                let payload = NoteEditor.payload(
                    edit, state: &states[index], replica: replicas[index], using: &random)
            else { continue }
            counters[index] += 1
            let applied = Applied(
                payload: payload,
                hlc: HLCTimestamp(physical: UInt64(1_000 + log.count), counter: 0, node: replicas[index].high),
                dot: Dot(replica: replicas[index], counter: counters[index]), knew: seen[index])
            states[index].apply(applied.payload, hlc: applied.hlc, dot: applied.dot)
            log.append(applied)
        }
        return (log, states)
    }

    static func replay(_ events: some Sequence<Applied>, onto state: NoteState = NoteState()) -> NoteState {
        var state = state
        for applied in events { state.apply(applied.payload, hlc: applied.hlc, dot: applied.dot) }
        return state
    }

    /// The snapshot event's payload for `state`, through its JSON (what the server stores and sends).
    static func snapshotJSON(_ state: NoteState) -> JSONValue {
        NotePayload.Snapshot(state: state).json
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func aReplicaAtAnyCursorMergesTheSnapshotIntoTheReplayedState(seed: UInt64) throws {
        let log = Self.history(seed: seed, events: 240)
        let expected = Self.replay(log).view
        var random = SplitMix64(seed: seed ^ 0xFEED)
        for _ in 0..<12 {
            // History up to `fold` became a snapshot; a replica had applied up to `cursor`, before or after it.
            let fold = Int.random(in: 1...log.count, using: &random)
            let cursor = Int.random(in: 0...log.count, using: &random)
            let snapshot = Self.snapshotJSON(Self.replay(log[..<fold]))
            var replica = Self.replay(log[..<cursor])
            replica.apply(
                type: NoteEventType.snapshot.rawValue, payload: snapshot, hlc: log[fold - 1].hlc, dot: log[fold - 1].dot
            )
            // The replica then gets what it lacks past the snapshot (anything at or below its cursor it has).
            replica = Self.replay(log[max(fold, cursor)...], onto: replica)
            #expect(replica.view == expected, "seed \(seed), folded \(fold), cursor \(cursor)")
            // Merging is idempotent: the same snapshot again changes nothing.
            var again = replica
            again.apply(
                type: NoteEventType.snapshot.rawValue, payload: snapshot, hlc: log[fold - 1].hlc, dot: log[fold - 1].dot
            )
            #expect(again.view == replica.view)
        }
    }

    @Test func foldingASnapshotWithLaterEventsEqualsFoldingTheWholeHistory() throws {
        let log = Self.history(seed: 42, events: 300)
        var state = NoteState()
        // Three passes of compaction, each folding its predecessor's snapshot and the events since.
        for end in [100, 180, 300] {
            let start = [100, 180, 300].last { $0 < end } ?? 0
            var folded = NoteState()
            if start > 0 {
                folded.apply(
                    try NotePayload(type: .snapshot, json: Self.snapshotJSON(state)), hlc: log[start - 1].hlc,
                    dot: log[start - 1].dot)
            }
            state = Self.replay(log[start..<end], onto: folded)
        }
        #expect(state.view == Self.replay(log).view)
    }

    /// On states replicas can hold (each has seen a prefix of the log and made its own edits since).
    @Test func mergeIsCommutativeAssociativeAndIdempotent() {
        let (log, replicas) = Self.simulate(seed: 7, events: 200)
        let (a, b, c) = (replicas[0], replicas[1], Self.replay(log[..<120]))
        func merged(_ states: NoteState...) -> NoteState {
            var result = NoteState()
            for state in states { result.merge(state) }
            return result
        }
        #expect(merged(a, b).view == merged(b, a).view)
        #expect(merged(merged(a, b), c).view == merged(a, merged(b, c)).view)
        #expect(merged(a, a).view == a.view)
        #expect(
            merged(replicas[0], replicas[1], replicas[2]).view == Self.replay(log).view,
            "together they hold every event")
    }

    @Test func devicesCannotPushSnapshotsAndABrokenOneChangesNothing() throws {
        let stream = NoteID().stream
        let payload = Self.snapshotJSON(Self.replay(Self.history(seed: 9, events: 20)))
        #expect(
            NoteRules.violation(type: NoteEventType.snapshot.rawValue, stream: stream, payload: payload)
                == "note.snapshot events are written only by the server's compaction")
        #expect(
            NoteRules.violation(type: NoteEventType.snapshot.rawValue, stream: stream, payload: ["state": 3])
                == "note.snapshot events are written only by the server's compaction")
        var state = Self.replay(Self.history(seed: 10, events: 30))
        let before = state.view
        state.apply(
            type: NoteEventType.snapshot.rawValue, payload: ["state": "bm90IGEgc3RhdGU="],
            hlc: HLCTimestamp(physical: 1, counter: 0, node: 1),
            dot: Dot(replica: ReplicaID(high: 1, low: 1), counter: 1))
        #expect(state.view == before)
    }
}

extension NoteSnapshotTests {
    /// A compacted snapshot (tombstones purged) merged into a fresh replica shows the history's state, later
    /// events apply on top, and every state survives its binary form (the notes projection stores them so).
    /// (A replica that had applied only part of the folded history must not merge it: it could hold alive
    /// what the purge dropped. The server tells it to reset instead.)
    @Test(arguments: [31, 32, 33, 34] as [UInt64])
    func compactedSnapshotsBootstrapAFreshReplicaAndRoundTrip(seed: UInt64) throws {
        let log = Self.history(seed: seed, events: 260)
        var random = SplitMix64(seed: seed)
        for _ in 0..<8 {
            let stable = (1...log.count).filter { Self.isStable(log, at: $0) }
            let fold = stable.randomElement(using: &random)!
            let cursor = 0
            var folded = Self.replay(log[..<fold])
            folded.compactStable()
            let decoded: NoteState
            do { decoded = try NoteState(binaryEncoded: folded.binaryEncoded) } catch {
                Issue.record("compacted state does not decode: \(error)")
                continue
            }
            #expect(decoded.view == folded.view)
            var replica = Self.replay(log[..<cursor])
            replica.apply(
                type: NoteEventType.snapshot.rawValue, payload: Self.snapshotJSON(folded), hlc: log[fold - 1].hlc,
                dot: log[fold - 1].dot)
            let stored: NoteState
            do { stored = try NoteState(binaryEncoded: replica.binaryEncoded) } catch {
                Issue.record("merged state does not decode: \(error)")
                continue
            }
            #expect(stored.view == Self.replay(log[..<fold]).view, "seed \(seed) fold \(fold) cursor \(cursor)")
            let rest = Self.replay(log[fold...], onto: stored)
            #expect(rest.view == Self.replay(log).view, "later events apply on top")
            do { _ = try NoteState(binaryEncoded: rest.binaryEncoded) } catch {
                Issue.record("state after later events does not decode: \(error)")
            }
        }
    }

    /// A note's current state, which holds operations past the stable point too, drops the tombstones of the
    /// operations a stable fold holds (what a device's prune does to a note it cannot replace by its fold):
    /// it shows the same, stays decodable, later events apply on top, and it still ends where the whole
    /// history does.
    @Test(arguments: [41, 42, 43] as [UInt64])
    func aCurrentStateDropsWhatItsStableFoldDrops(seed: UInt64) throws {
        let log = Self.history(seed: seed, events: 260)
        var random = SplitMix64(seed: seed)
        var dropped = 0
        for _ in 0..<8 {
            let stable = (1...log.count).filter { Self.isStable(log, at: $0) }
            let fold = stable.randomElement(using: &random)!
            let now = Int.random(in: fold...log.count, using: &random)
            let folded = Self.replay(log[..<fold])
            var current = Self.replay(log[..<now])
            let before = current.view
            let size = current.binaryEncoded.count
            if current.compactStable(through: folded) { dropped += 1 }
            #expect(current.view == before, "seed \(seed) fold \(fold) now \(now)")
            #expect(current.binaryEncoded.count <= size)
            let decoded = try NoteState(binaryEncoded: current.binaryEncoded)
            let rest = Self.replay(log[now...], onto: decoded)
            #expect(rest.view == Self.replay(log).view, "later events apply on top")
        }
        #expect(dropped > 0, "some fold dropped something")
    }
}
