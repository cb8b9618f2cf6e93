import Foundation
import SyncModels
import Testing

@testable import NotesServer

@Suite struct NotePayloadRuleTests {
    static func event(
        _ type: String, _ payload: JSONValue, stream: String = "note:018f4e3a-0000-7000-8000-000000000001"
    )
        -> Event
    {
        let replica = ReplicaID(high: 1, low: 2)
        var ids = EventIDGenerator()
        return Event(
            id: ids.next(wall: 1), scope: "team-1", stream: stream, streamVersion: 1, type: type,
            hlc: HLCTimestamp(physical: 1, counter: 0, node: 1), dot: Dot(replica: replica, counter: 1),
            payload: payload)
    }

    @Test func rejectsNoteEventsThatBreakTheSharedRulesOnly() {
        let rule = NotePayloadRule()
        #expect(rule.applies(to: "note.tagAdded") && !rule.applies(to: "todo.added"))
        let events = [
            Self.event("note.created", ["title": "fine"]),
            Self.event("note.tagAdded", ["tag": .string(String(repeating: "x", count: 40))]),
            Self.event("note.created", ["title": "x"], stream: "not-a-note"),
            Self.event("note.teleported", [:]),
        ]
        let rejections = NotePayloadRule.rejections(events)
        #expect(rejections.keys.sorted() == [1, 2, 3])
        #expect(rejections[1]?.code == .validationFailed && rejections[1]?.message == "tag names are 1-32 characters")
    }
}
