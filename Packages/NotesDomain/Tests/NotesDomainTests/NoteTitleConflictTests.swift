import Foundation
import NotesDomain
import SyncCRDT
import SyncEventStoreTestSupport
import SyncModels
import Testing

/// A note's title keeps the titles written without seeing each other: as an open conflict in the state,
/// through merges, compaction, snapshots and every stored form, old ones included.
@Suite struct NoteTitleConflictTests {
    static let phone = ReplicaID(high: 1, low: 42)
    static let laptop = ReplicaID(high: 2, low: 42)

    static func hlc(_ physical: UInt64, _ replica: ReplicaID) -> HLCTimestamp {
        HLCTimestamp(physical: 1_700_000_000_000 + physical, counter: 0, node: replica.high)
    }

    /// A note created on the phone, then retitled on both devices offline; returns the two replicas' states.
    static func retitledOffline() -> (phone: NoteState, laptop: NoteState) {
        var phone = NoteState()
        let created = NotePayload.created(.init(title: "Groceries"))
        phone.apply(created, hlc: hlc(1, Self.phone), dot: Dot(replica: Self.phone, counter: 1))
        var laptop = phone
        phone.apply(
            .titleSet(.init(title: "Groceries (Sat)", overwrites: phone.titleOverwrites)), hlc: hlc(2, Self.phone),
            dot: Dot(replica: Self.phone, counter: 2))
        laptop.apply(
            .titleSet(.init(title: "Party shopping", overwrites: laptop.titleOverwrites)), hlc: hlc(3, Self.laptop),
            dot: Dot(replica: Self.laptop, counter: 1))
        return (phone, laptop)
    }

    @Test func mergeKeepsTheConflictAndShowsTheLaterTitle() throws {
        let (phone, laptop) = Self.retitledOffline()
        #expect(phone.titleConflict == nil && laptop.titleConflict == nil)
        let merged = phone.merging(laptop)
        #expect(merged == laptop.merging(phone))
        #expect(merged.view.title == "Party shopping")
        let conflict = try #require(merged.view.titleConflict)
        #expect(conflict.map(\.value) == ["Party shopping", "Groceries (Sat)"])
        #expect(conflict.map(\.replica) == [Self.laptop, Self.phone])
        #expect(merged.conflicts(of: NoteID()).first?.winner.value == "Party shopping")

        // The binary form, a snapshot and a stable compaction all keep it.
        #expect(try NoteState(stored: merged.binaryEncoded) == merged)
        var fresh = NoteState()
        fresh.apply(
            .snapshot(.init(state: merged)), hlc: Self.hlc(9, Self.phone), dot: Dot(replica: Self.phone, counter: 9))
        #expect(fresh.view == merged.view)
        var compacted = merged
        compacted.compactStable()
        #expect(compacted.view == merged.view && compacted.title.context.dotCloud.isEmpty)

        // A resolution that saw both closes it, whatever it meets later.
        var resolved = compacted
        resolved.apply(
            .titleSet(.init(title: "Groceries for the party", overwrites: merged.titleOverwrites)),
            hlc: Self.hlc(4, Self.phone), dot: Dot(replica: Self.phone, counter: 3))
        resolved.merge(phone)
        resolved.merge(laptop)
        #expect(resolved.view.title == "Groceries for the party" && resolved.titleConflict == nil)
        #expect(merged.merging(resolved) == resolved)
    }

    @Test func legacyTitleSetKeepsLastWriterWins() {
        var (phone, laptop) = Self.retitledOffline()
        // An old device's title, later than both: it replaces them, as LWW would.
        let legacy = NotePayload.titleSet(.init(title: "Old device"))
        laptop.apply(legacy, hlc: Self.hlc(5, Self.laptop), dot: Dot(replica: Self.laptop, counter: 2))
        phone.merge(laptop)
        #expect(phone.view.title == "Old device" && phone.titleConflict == nil)
        let json = legacy.json
        #expect(json == ["title": "Old device"], "a legacy payload is written as before")
    }

    /// The bytes format 2 wrote: the same fields, the title a last-writer-wins register.
    static func formatTwoBytes(_ state: NoteState) -> [UInt8] {
        var lww = LWWRegister<String>()
        if let winner = state.title.winner {
            lww.apply(.init(value: winner.value, timestamp: winner.timestamp, dot: winner.dot))
        }
        var writer = BinaryWriter()
        writer.writeByte(2)
        state.created.encode(to: &writer)
        lww.encode(to: &writer)
        state.body.encode(to: &writer)
        state.tags.encode(to: &writer)
        state.pinned.encode(to: &writer)
        state.views.encode(to: &writer)
        state.checklist.encode(to: &writer)
        state.itemText.encode(to: &writer)
        state.itemDone.encode(to: &writer)
        state.deleted.encode(to: &writer)
        return writer.bytes
    }

    /// The JSON format 1 wrote: the same members, the title a last-writer-wins register.
    static func formatOneBytes(_ state: NoteState) throws -> [UInt8] {
        var lww = LWWRegister<String>()
        if let winner = state.title.winner {
            lww.apply(.init(value: winner.value, timestamp: winner.timestamp, dot: winner.dot))
        }
        var object = try #require(
            try JSONSerialization.jsonObject(with: CanonicalJSON.encode(state)) as? [String: Any])
        object["title"] = try JSONSerialization.jsonObject(with: JSONEncoder().encode(lww))
        return [UInt8](try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func earlierFormatsStillRead(seed: UInt64) throws {
        let state = NoteStateEncodingTests.note(seed: seed, events: 200)
        for (format, bytes) in [(2, Self.formatTwoBytes(state)), (1, try Self.formatOneBytes(state))] {
            #expect(bytes.first == (format == 2 ? 2 : UInt8(ascii: "{")))
            let decoded = try NoteState(stored: bytes)
            #expect(decoded.view == state.view, "format \(format)")
            #expect(decoded.title.floor == state.title.winner?.stamp, "the old title is a legacy assignment")
            #expect(decoded.body == state.body && decoded.tags == state.tags && decoded.checklist == state.checklist)
            // An old snapshot (format 2 in a note.snapshot) merges into a replica that has the events.
            if format == 2 {
                var replica = state
                replica.apply(
                    .snapshot(.init(encodedState: bytes)), hlc: Self.hlc(0, Self.phone),
                    dot: Dot(replica: Self.phone, counter: 10_000))
                #expect(replica.view == state.view)
            }
        }
        // An old title below a newer writer's concurrent one is replaced, as it was.
        var migrated = try NoteState(stored: Self.formatTwoBytes(state))
        let winner = try #require(state.title.winner)
        migrated.apply(
            .titleSet(.init(title: "below", overwrites: [])),
            hlc: HLCTimestamp(physical: winner.timestamp.physical - 1, counter: 0, node: 9),
            dot: Dot(replica: ReplicaID(high: 9, low: 9), counter: 1))
        #expect(migrated.view.title == winner.value && migrated.titleConflict == nil)
    }
}

extension NoteState {
    fileprivate func merging(_ other: NoteState) -> NoteState {
        var copy = self
        copy.merge(other)
        return copy
    }
}
