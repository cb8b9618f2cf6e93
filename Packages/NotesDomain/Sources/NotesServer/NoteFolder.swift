import NotesDomain
import SyncModels
import SyncServer

/// How the server's compaction folds a note's history: the events of a `note:<uuid>` stream, a snapshot
/// first if an earlier compaction left one, applied in order to an empty `NoteState`, become one
/// `note.snapshot` event holding that state (`NotePayload.Snapshot`). Replicas merge it, so it changes
/// nothing for one that had applied the events, and gives one that had not the same state. Since the folded
/// history is stable, the snapshot leaves out tombstones, and a deleted note is dropped altogether.
public struct NoteFolder: StreamFolder {
    public init() {}

    public var snapshotType: String { NoteEventType.snapshot.rawValue }

    public func folds(stream: String) -> Bool {
        stream.hasPrefix("note:") && NoteID(stream) != nil
    }

    public func fold(_ events: [Event]) throws -> JSONValue {
        NotePayload.Snapshot(state: try state(of: events)).json
    }

    /// Stable history: a deleted note is dropped (nobody can edit it any more: every replica saw the delete
    /// before it made anything still to come); any other note keeps a snapshot without its tombstones
    /// (`NoteState.compactStable`).
    public func foldStable(_ events: [Event]) throws -> FoldResult {
        var state = try state(of: events)
        if state.deleted.value == true { return .drop }
        let purged = state.compactStable()
        return .snapshot(NotePayload.Snapshot(state: state).json, purged: purged)
    }

    func state(of events: [Event]) throws -> NoteState {
        var state = NoteState()
        for event in events {
            if event.type == snapshotType {
                // An earlier snapshot that does not decode must not be silently dropped with its history.
                state.merge(try NotePayload.Snapshot(json: event.payload).state())
            } else {
                state.apply(type: event.type, payload: event.payload, hlc: event.hlc, dot: event.dot)
            }
        }
        return state
    }
}
