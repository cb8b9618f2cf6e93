import Foundation
import NotesDomain
import NotesServer
import SyncModels
import SyncServer
import SyncTestSupport
import Testing

/// `NoteFolder` on histories alone, without a server: what a stable fold keeps and what it drops. Only a live
/// note (created, not deleted) is kept; a note whose creation the server rejected, of which only later events
/// were accepted (an attachment made while the creation was pending), is dropped with the blob references
/// its events held, as replaying its unfolded history shows nothing either.
@Suite struct NoteFolderTests {
    static let replica = ReplicaID(high: 0xF0, low: 0xF1)
    static let blob = BlobReference(hash: try! BlobHash(String(repeating: "5e", count: 32)), size: 1234)
    static let attachment = NoteAttachment(name: "scan.pdf", blob: blob)

    /// The events of one note carrying `payloads`, in order, and the state replaying them gives (what a
    /// replica that never saw a fold holds).
    static func history(_ payloads: [NotePayload]) throws -> (events: [Event], replayed: NoteState) {
        let stream = NoteID().stream
        var state = NoteState()
        var events: [Event] = []
        for payload in payloads {
            let event = EventFixtures.event(
                scope: try Scope("f"), stream: stream, type: payload.type.rawValue, payload: payload.json,
                replica: replica)
            state.apply(type: event.type, payload: event.payload, hlc: event.hlc, dot: event.dot)
            events.append(event)
        }
        return (events, state)
    }

    /// The payload of attaching `attachment` to a note held as `state`.
    static func attach(_ state: inout NoteState) -> NotePayload {
        .attachmentAdded(
            .init(attachment: attachment.element, op: state.attachments.add(attachment.element, replica: replica)))
    }

    @Test func aNoteWithOnlyAnAttachmentAndNoCreationFoldsToADrop() throws {
        var state = NoteState()
        let (events, replayed) = try Self.history([Self.attach(&state)])
        #expect(!replayed.isLive, "unfolded, it shows nothing")
        #expect(NotesServerDomain().blobReferences(in: events[0]) == [Self.blob], "its event holds the blob")
        let folder = NoteFolder()
        #expect(try folder.foldStable(events) == .drop, "folded, it is gone: nothing holds the blob")
        #expect(folder.mayDropLoneEvent(ofType: events[0].type), "compaction asks about a lone attachment")
    }

    @Test func aNeverCreatedNoteOfSeveralEventsFoldsToADrop() throws {
        var state = NoteState()
        let attached = Self.attach(&state)
        let (events, replayed) = try Self.history([
            .titleSet(.init(title: "draft")), attached, .pinnedSet(.init(pinned: true)),
        ])
        #expect(!replayed.isLive && replayed.attachmentList == [Self.attachment])
        #expect(try NoteFolder().foldStable(events) == .drop)
    }

    @Test func aCreatedNoteStillFoldsToASnapshotThatKeepsItsAttachment() throws {
        var state = NoteState()
        let attached = Self.attach(&state)
        let (events, replayed) = try Self.history([.created(.init(title: "trip")), attached])
        let folder = NoteFolder()
        #expect(!folder.mayDropLoneEvent(ofType: NoteEventType.created.rawValue), "a lone creation stays unread")
        guard case .snapshot(let payload, _) = try folder.foldStable(events) else {
            Issue.record("a created note is kept")
            return
        }
        let folded = try NotePayload.Snapshot(json: payload).state()
        #expect(folded.isLive && folded.view == replayed.view)
        let snapshot = EventFixtures.event(
            scope: try Scope("f"), stream: events[0].stream, type: folder.snapshotType, payload: payload,
            replica: Self.replica)
        #expect(NotesServerDomain().blobReferences(in: snapshot) == [Self.blob], "the snapshot keeps the blob")
        // A later window folds the snapshot with what followed it: the creation it carries keeps the note.
        let later = EventFixtures.event(
            scope: try Scope("f"), stream: events[0].stream, type: NoteEventType.pinnedSet.rawValue,
            payload: NotePayload.pinnedSet(.init(pinned: true)).json, replica: Self.replica)
        guard case .snapshot(let again, _) = try folder.foldStable([snapshot, later]) else {
            Issue.record("a created note folded again is kept")
            return
        }
        #expect(try NotePayload.Snapshot(json: again).state().view.pinned)
    }

    @Test func aDeletedNoteStillFoldsToADrop() throws {
        let (events, replayed) = try Self.history([.created(.init(title: "old")), .deleted(.init())])
        #expect(!replayed.isLive)
        #expect(try NoteFolder().foldStable(events) == .drop)
    }
}
