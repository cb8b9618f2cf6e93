import NotesDomain
import SyncModels
import SyncServer

/// How the server's compaction folds a note's history: the events of a `note:<uuid>` stream, a snapshot
/// first if an earlier compaction left one, applied in order to an empty `NoteState`, become one
/// `note.snapshot` event holding that state (`NotePayload.Snapshot`). Replicas merge it, so it changes
/// nothing for one that had applied the events, and gives one that had not the same state. Since the folded
/// history is stable, the snapshot leaves out tombstones, and a note that is not live (deleted, or never
/// created: its creation was rejected) is dropped altogether.
public struct NoteFolder: LoneEventFolder {
    public init() {}

    public var snapshotType: String { NoteEventType.snapshot.rawValue }

    public func folds(stream: String) -> Bool {
        stream.hasPrefix("note:") && NoteID(stream) != nil
    }

    public func fold(_ events: [Event]) throws -> JSONValue {
        NotePayload.Snapshot(state: try state(of: events)).json
    }

    /// Stable history: a note that is not live there (`NoteState.isLive`) is dropped, and every other note keeps
    /// a snapshot without its tombstones (`NoteState.compactStable`).
    ///
    /// Not live is one of two things, and the stable point settles both:
    /// - deleted: nobody can edit it any more (every replica saw the delete before it made anything still to
    ///   come);
    /// - never created: its `note.created` was rejected (`NoteQuotaRule`), and what the device had made on it
    ///   meanwhile (an attachment, an edit) was accepted. Every device hides it, and none can bring it back: a
    ///   device pushes its events in the order it made them (its outbox), and makes a note's creation before
    ///   anything else on it (`NotesClient` edits only a note it holds as created); any other device edits it
    ///   only after pulling the creation. So an accepted creation precedes every other event of its note in
    ///   seq order, and a stable history without one never gets one; a rejected creation is final.
    ///
    /// In both cases an event pushed after the drop (from a device that made it before it knew) starts the
    /// stream again without a creation: every device keeps it hidden, and the next compaction that finds it
    /// stable drops it in turn (`mayDropLoneEvent(ofType:)`).
    public func foldStable(_ events: [Event]) throws -> FoldResult {
        var state = try state(of: events)
        guard state.isLive else { return .drop }
        let purged = state.compactStable()
        return .snapshot(NotePayload.Snapshot(state: state).json, purged: purged)
    }

    /// Of the streams whose whole stable history is one event, compaction keeps a creation unread (the first
    /// event of every note that was created, so a window's new notes cost it no decoding) and folds any other,
    /// which `foldStable(_:)` drops as a note never created (after a rejected creation, or a late edit of a
    /// dropped note).
    public func mayDropLoneEvent(ofType type: String) -> Bool {
        type != NoteEventType.created.rawValue
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
