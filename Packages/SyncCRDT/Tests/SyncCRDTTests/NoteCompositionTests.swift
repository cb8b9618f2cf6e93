import Foundation
import SyncCRDT
import SyncModels
import SyncTestSupport
import Testing

/// A note (docs/ARCHITECTURE.md, "Conflicts and rejections") as one CRDT: an `ORMap<String, CRDTValue>` of a title
/// register, a body text, add-wins tags, a pinned register, a view counter, and a checklist (a list of item ids plus a
/// map of item fields).
@Suite(.onOwnThreads) struct NoteCompositionTests {
    typealias Note = ORMap<String, CRDTValue>

    struct Device {
        var note = Note()
        let replica: ReplicaID
        var clock: UInt64 = 0

        init(_ index: Int) { replica = SyncCRDTTests.replica(index) }

        mutating func stamp() -> HLCTimestamp {
            clock += 1
            return HLCTimestamp(physical: 1_700_000_000_000 + clock, counter: 0, node: replica.high)
        }

        mutating func setRegister(_ key: String, _ value: JSONValue) -> Note {
            let timestamp = stamp()
            return note.update(key, replica: replica) { _, dot in
                .register(LWWRegister(.init(value: value, timestamp: timestamp, dot: dot)))
            }
        }

        mutating func editBody(_ change: (inout FugueText, ReplicaID) -> Void) -> Note {
            let replica = replica
            return note.update("body", replica: replica) { current, _ in
                var text = current.text
                let before = text.version
                change(&text, replica)
                return .text(text.delta(since: before))
            }
        }

        mutating func tag(_ tag: String, add: Bool) -> Note {
            note.update("tags", replica: replica) { current, dot in
                var tags = current.set
                let operation = add ? tags.add(.string(tag), dot: dot) : tags.remove(.string(tag), dot: dot)
                return .set(AddWinsSet.delta(of: operation))
            }
        }

        mutating func countView() -> Note {
            let replica = replica
            return note.update("views", replica: replica) { current, _ in
                var counter = current.counter
                return .counter(counter.add(1, replica: replica))
            }
        }

        mutating func addChecklistItem(_ id: String, text: String) -> [Note] {
            let replica = replica
            let list = note.update("checklist", replica: replica) { current, _ in
                var items = current.list
                let before = items.version
                items.append(id, replica: replica)
                return .list(items.delta(since: before))
            }
            let timestamp = stamp()
            let fields = note.update("items", replica: replica) { current, dot in
                var items = current.map
                return .map(
                    items.update(id, dot: dot) { _, itemDot in
                        .map(
                            ORMap<String, CRDTValue>().updating("text", dot: itemDot) { _, textDot in
                                .register(LWWRegister(.init(value: .string(text), timestamp: timestamp, dot: textDot)))
                            })
                    })
            }
            return [list, fields]
        }

        var shown: (title: String?, body: String, tags: Set<JSONValue>, views: Int64, checklist: [String]) {
            (
                note["title"]?.register.value.flatMap { if case .string(let s) = $0 { s } else { nil } },
                note["body"]?.text.text ?? "", note["tags"]?.set.elements ?? [], note["views"]?.counter.value ?? 0,
                note["checklist"]?.list.elements ?? []
            )
        }
    }

    @Test func twoDevicesEditingOfflineConverge() throws {
        var phone = Device(0)
        var laptop = Device(1)
        var toLaptop: [Note] = []
        var toPhone: [Note] = []
        toLaptop.append(phone.setRegister("title", .string("Groceries")))
        toLaptop.append(phone.editBody { text, replica in text.insert("milk, eggs", at: 0, replica: replica) })
        for delta in toLaptop { laptop.note.merge(delta) }
        toLaptop = []
        // Offline on both devices.
        toLaptop.append(phone.editBody { text, replica in text.insert(", bread", at: 10, replica: replica) })
        toLaptop.append(phone.tag("shopping", add: true))
        toLaptop.append(phone.countView())
        toLaptop += phone.addChecklistItem("item-1", text: "call mum")
        toPhone.append(laptop.editBody { text, replica in text.insert("Buy: ", at: 0, replica: replica) })
        toPhone.append(laptop.setRegister("title", .string("Groceries (Sat)")))
        toPhone.append(laptop.tag("weekend", add: true))
        toPhone.append(laptop.countView())
        toPhone += laptop.addChecklistItem("item-2", text: "pay rent")
        for delta in toLaptop.reversed() { laptop.note.merge(delta) }
        for delta in toPhone + toPhone { phone.note.merge(delta) }

        #expect(phone.note == laptop.note)
        let view = phone.shown
        #expect(view.title == "Groceries (Sat)")
        #expect(view.body == "Buy: milk, eggs, bread")
        #expect(view.tags == [.string("shopping"), .string("weekend")])
        #expect(view.views == 2)
        #expect(Set(view.checklist) == ["item-1", "item-2"])
        let item = phone.note["items"]?.map["item-2"]?.map["text"]?.register.value
        #expect(item == .string("pay rent"))
        // The whole note round-trips through JSON.
        let decoded = try JSONDecoder().decode(Note.self, from: JSONEncoder().encode(phone.note))
        #expect(decoded == phone.note)
    }
}

extension ORMap {
    /// This map with `key` changed: a convenience for building nested deltas.
    func updating(_ key: Key, dot: Dot, _ change: (Value, Dot) -> Value) -> ORMap {
        var copy = self
        copy.update(key, dot: dot, change)
        return copy
    }
}
