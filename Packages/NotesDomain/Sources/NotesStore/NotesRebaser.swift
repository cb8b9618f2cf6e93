import Foundation
import GRDB
import NotesDomain
import SyncCRDT
import SyncEventStore
import SyncModels

/// Re-bases the Notes app's pending events after a reset (`EventRebaser`).
///
/// Only sequence operations can stop applying: an insertion into a note's body or checklist whose neighbours
/// the server purged, or a deletion of elements it purged. Registers, tags, views, creations and deletions
/// name what they change by value or by note, and always apply. An event that no longer applies is redone
/// against the note as it is now: inserted text goes after its left neighbour if that is still there, at the
/// end otherwise (nothing typed is lost); deletions delete what is still visible of their targets; an
/// added checklist item is added again with its text; a removed one is removed if it is still there.
public struct NotesRebaser: EventRebaser {
    public let replica: ReplicaID

    public init(replica: ReplicaID) {
        self.replica = replica
    }

    public func stillApplies(_ event: StoredEvent, in db: Database) throws -> Bool {
        guard let kind = NoteEventType(rawValue: event.event.type), let id = NoteID(event.event.stream),
            let state = try NotesProjection.state(of: id, in: db),
            let payload = try? NotePayload(type: kind, json: event.event.payload)
        else { return true }
        switch payload {
        case .bodyEdited(let edit): return edit.ops.allSatisfy { Self.isPlaced($0, in: state.body) }
        case .checklistItemAdded(let add): return Self.isPlaced(add.op, in: state.checklist)
        case .checklistItemRemoved(let remove): return Self.isPlaced(remove.op, in: state.checklist)
        default: return true
        }
    }

    public func reissue(_ event: StoredEvent, in db: Database) throws -> [EventDraft] {
        guard let kind = NoteEventType(rawValue: event.event.type), let id = NoteID(event.event.stream),
            var state = try NotesProjection.state(of: id, in: db),
            let payload = try? NotePayload(type: kind, json: event.event.payload)
        else { return [] }
        let redone: NotePayload?
        switch payload {
        case .bodyEdited(let edit):
            var ops: [FugueText.Operation] = []
            for op in edit.ops {
                switch op {
                case .insert(let insertion):
                    guard let elements = insertion.elements, !elements.isEmpty else { continue }
                    var text = String.UnicodeScalarView()
                    text.append(contentsOf: elements)
                    let position = Self.position(after: insertion.originLeft, in: state.body)
                    if let op = state.body.insert(String(text), at: position, replica: replica) { ops.append(op) }
                case .delete(let deletion):
                    for target in Self.dots(deletion.targets) {
                        guard let position = state.body.position(of: target),
                            let op = state.body.remove(at: position, count: 1, replica: replica)
                        else { continue }
                        ops.append(op)
                    }
                }
            }
            redone = ops.isEmpty ? nil : .bodyEdited(.init(ops: ops))
        case .checklistItemAdded(let add):
            guard case .insert(let insertion) = add.op, !state.checklist.elements.contains(add.item) else {
                redone = nil
                break
            }
            let position = Self.position(after: insertion.originLeft, in: state.checklist)
            redone = .checklistItemAdded(
                .init(
                    item: add.item, text: add.text,
                    op: state.checklist.insertElement(add.item, at: position, replica: replica)))
        case .checklistItemRemoved(let remove):
            redone = state.checklist.removeElement(remove.item, replica: replica).map {
                .checklistItemRemoved(.init(item: remove.item, op: $0))
            }
        default:
            redone = payload
        }
        return redone.map { [NotesClient.draft(event.event.scope, id, $0)] } ?? []
    }

    /// Whether an operation found everything it refers to: an insertion was placed (its first element is in
    /// the list), a deletion's targets are all there.
    static func isPlaced<Element>(_ op: FugueList<Element>.Operation, in list: FugueList<Element>) -> Bool {
        switch op {
        case .insert(let insertion): list.holds(insertion.id)
        case .delete(let deletion): dots(deletion.targets).allSatisfy(list.holds)
        }
    }

    /// Just after the visible element `left`, or at the start when there is none, or at the end when it is
    /// gone.
    static func position<Element>(after left: Dot?, in list: FugueList<Element>) -> Int {
        guard let left else { return 0 }
        return list.position(of: left).map { $0 + 1 } ?? list.count
    }

    static func dots(_ ranges: [DotRange]) -> [Dot] {
        ranges.flatMap { range in
            (0..<range.count).map { Dot(replica: range.replica, counter: range.first + $0) }
        }
    }
}
