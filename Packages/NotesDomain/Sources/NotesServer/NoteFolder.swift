import NotesDomain
import SyncModels
import SyncServer

/// How the server's compaction folds a note's history: the events of a `note:<uuid>` stream, a snapshot
/// first if an earlier compaction left one, applied in order to an empty `NoteState`, become one
/// `note.snapshot` event holding that state (`NotePayload.Snapshot`). Replicas merge it, so it changes
/// nothing for one that had applied the events, and gives one that had not the same state.
public struct NoteFolder: StreamFolder {
    public init() {}

    public var snapshotType: String { NoteEventType.snapshot.rawValue }

    public func folds(stream: String) -> Bool {
        stream.hasPrefix("note:") && NoteID(stream) != nil
    }

    public func fold(_ events: [Event]) throws -> JSONValue {
        var state = NoteState()
        for event in events {
            if event.type == snapshotType {
                // An earlier snapshot that does not decode must not be silently dropped with its history.
                state.merge(try NotePayload.Snapshot(json: event.payload).state())
            } else {
                state.apply(type: event.type, payload: event.payload, hlc: event.hlc, dot: event.dot)
            }
        }
        return NotePayload.Snapshot(state: state).json
    }
}
