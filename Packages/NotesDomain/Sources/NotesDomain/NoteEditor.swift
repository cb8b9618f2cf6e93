import Foundation
import SyncCRDT
import SyncModels

/// The kinds of edit a person makes to a note, for seeded workloads (tests, `sync-bench`, load).
public enum NoteEdit: String, CaseIterable, Sendable, Codable {
    case create, title, typing, erase, tagAdd, tagRemove, itemAdd, itemRemove, itemText, itemDone, pin, view, delete
}

/// Makes realistic, valid note payloads from a replica's view of a note, with a seeded generator: a burst
/// of typing at a random place, a word erased, a tag of a small shared vocabulary added or removed (so
/// replicas collide), a checklist item added, ticked, renamed or removed, a pin, views, a delete.
///
/// The CRDT operations a payload carries are already applied to `state`; the register fields (title,
/// pinned, item text and done flags, deleted) are not: apply the payload to `state` with the event's HLC
/// and dot (`NoteState.apply(_:hlc:dot:)`), which is idempotent for the rest.
public enum NoteEditor {
    /// Tags drawn from, shared by every replica.
    public static let tags = ["work", "home", "ideas", "todo", "urgent", "later", "books", "travel", "food", "music"]

    private static let words = [
        "the", "meeting", "notes", "about", "plan", "call", "ship", "fix", "draft", "review", "milk", "eggs",
        "budget", "trip", "idea", "write", "read", "sync", "offline", "device", "garden", "weekend",
    ]

    /// A payload for `edit`, or nil when it does not apply to the note as `state` holds it (erasing an empty
    /// body, removing a tag from a note with none, …).
    public static func payload<G: RandomNumberGenerator>(
        _ edit: NoteEdit, state: inout NoteState, replica: ReplicaID, using random: inout G
    ) -> NotePayload? {
        func phrase(_ count: ClosedRange<Int>) -> String {
            (0..<Int.random(in: count, using: &random)).map { _ in words.randomElement(using: &random)! }
                .joined(separator: " ")
        }
        switch edit {
        case .create:
            return .created(.init(title: phrase(1...4)))
        case .title:
            return .titleSet(.init(title: phrase(1...6), overwrites: state.titleOverwrites))
        case .typing:
            let length = state.body.count
            let text = (length == 0 ? "" : " ") + phrase(1...5)
            guard let op = state.body.insert(text, at: Int.random(in: 0...length, using: &random), replica: replica)
            else { return nil }
            return .bodyEdited(.init(ops: [op]))
        case .erase:
            let length = state.body.count
            guard length > 0 else { return nil }
            let count = min(length, Int.random(in: 1...30, using: &random))
            let start = Int.random(in: 0...(length - count), using: &random)
            guard let op = state.body.remove(at: start, count: count, replica: replica) else { return nil }
            return .bodyEdited(.init(ops: [op]))
        case .tagAdd:
            let tag = tags.randomElement(using: &random)!
            return .tagAdded(.init(tag: tag, op: state.tags.add(tag, replica: replica)))
        case .tagRemove:
            guard let tag = state.tags.elements.sorted().randomElement(using: &random) else { return nil }
            return .tagRemoved(.init(tag: tag, op: state.tags.remove(tag, replica: replica)))
        case .itemAdd:
            let item = NoteID(uuid: UUID(uuid: randomUUID(&random))).description
            let position = Int.random(in: 0...state.checklist.count, using: &random)
            let op = state.checklist.insertElement(item, at: position, replica: replica)
            return .checklistItemAdded(.init(item: item, text: phrase(1...3), op: op))
        case .itemRemove:
            guard let item = state.checklist.elements.randomElement(using: &random),
                let op = state.checklist.removeElement(item, replica: replica)
            else { return nil }
            return .checklistItemRemoved(.init(item: item, op: op))
        case .itemText:
            guard let item = state.checklist.elements.randomElement(using: &random) else { return nil }
            return .checklistItemTextSet(.init(item: item, text: phrase(1...3)))
        case .itemDone:
            guard let item = state.checklist.elements.randomElement(using: &random) else { return nil }
            return .checklistItemDoneSet(.init(item: item, done: Bool.random(using: &random)))
        case .pin:
            return .pinnedSet(.init(pinned: !(state.pinned.value ?? false)))
        case .view:
            let views = Int.random(in: 1...3, using: &random)
            let dot = Dot(replica: replica, counter: state.views.increments[replica] + 1)
            return .viewed(.init(count: views, op: state.views.add(Int64(views), at: dot)))
        case .delete:
            return .deleted(.init())
        }
    }

    /// A random UUID (version 4 bits set) from `random`, so seeded runs repeat.
    public static func randomUUID<G: RandomNumberGenerator>(_ random: inout G) -> uuid_t {
        let high: UInt64 = random.next()
        let low: UInt64 = random.next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<8 {
            bytes[index] = UInt8(truncatingIfNeeded: high >> (8 * (7 - index)))
            bytes[8 + index] = UInt8(truncatingIfNeeded: low >> (8 * (7 - index)))
        }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        return (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
            bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
        )
    }
}
