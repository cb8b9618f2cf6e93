import Foundation
import GRDB
import NotesDomain
import SyncCRDT
import SyncEventStore
import SyncModels
import SyncStorage

/// The commands of the Notes app over an event store: each reads the note's current CRDT state and appends
/// the events that express the change, in one write transaction, offline and at once.
public struct NotesClient: Sendable {
    public let store: EventStore

    public init(store: EventStore) {
        self.store = store
    }

    /// Opens a store at `path` with the notes projection and the domain's validation.
    public static func open(path: String, configuration: StorageConfiguration = StorageConfiguration()) throws
        -> NotesClient
    {
        NotesClient(
            store: try EventStore(
                path: path, projections: [NotesProjection()], validators: [NotesValidator()],
                configuration: configuration))
    }

    var replica: ReplicaID { store.replica }

    /// Creates a note; returns its id.
    @discardableResult
    public func create(scope: Scope, title: String, body: String = "", tags: [String] = []) async throws -> NoteID {
        let id = NoteID()
        let replica = replica
        try await store.append { _ in
            var state = NoteState()
            var drafts = [Self.draft(scope, id, .created(.init(title: title)), expecting: .noStream)]
            if !body.isEmpty {
                drafts.append(
                    Self.draft(scope, id, .bodyEdited(.init(ops: state.body.replace(with: body, replica: replica)))))
            }
            for tag in tags {
                drafts.append(
                    Self.draft(scope, id, .tagAdded(.init(tag: tag, op: state.tags.add(tag, replica: replica)))))
            }
            return drafts
        }
        return id
    }

    /// Sets the title, replacing every title this device holds for the note (`overwrites`): an open
    /// conflict is resolved by it, and a title written elsewhere without seeing this one is kept beside it.
    public func setTitle(_ id: NoteID, _ title: String) async throws {
        try await change(id) { state, scope in
            [Self.draft(scope, id, .titleSet(.init(title: title, overwrites: state.titleOverwrites)))]
        }
    }

    /// Resolves the note's open title conflict with `title` (one of the values, or a new one): a
    /// `note.titleSet` that overwrites every value this device saw, so it conflicts again only with titles
    /// written without seeing it.
    /// - Throws: `EventStoreError` `note.unknown` for a note this device does not hold, `conflict.none`
    ///   when its title has no open conflict here.
    public func resolveTitle(_ id: NoteID, to title: String) async throws {
        try await change(id) { state, scope in
            guard state.title.hasConflict else {
                throw EventStoreError(code: "conflict.none", message: "note \(id) has no open title conflict")
            }
            return [Self.draft(scope, id, .titleSet(.init(title: title, overwrites: state.titleOverwrites)))]
        }
    }

    /// Replaces the body's text: the change is expressed as the minimal edit (common prefix and suffix
    /// kept), so concurrent edits elsewhere in the text survive.
    public func setBody(_ id: NoteID, _ text: String) async throws {
        let replica = replica
        try await change(id) { state, scope in
            let ops = state.body.replace(with: text, replica: replica)
            return ops.isEmpty ? [] : [Self.draft(scope, id, .bodyEdited(.init(ops: ops)))]
        }
    }

    public func addTag(_ id: NoteID, _ tag: String) async throws {
        let replica = replica
        try await change(id) { state, scope in
            [Self.draft(scope, id, .tagAdded(.init(tag: tag, op: state.tags.add(tag, replica: replica))))]
        }
    }

    /// Removes the tag as this replica sees it; an add made concurrently elsewhere survives (add-wins).
    public func removeTag(_ id: NoteID, _ tag: String) async throws {
        let replica = replica
        try await change(id) { state, scope in
            [Self.draft(scope, id, .tagRemoved(.init(tag: tag, op: state.tags.remove(tag, replica: replica))))]
        }
    }

    /// Attaches the blob `blob` (its bytes already in the device's blob directory, `LocalBlobs.add`) under
    /// `name`. The note shows it at once; the event is pushed once the server holds the blob
    /// (`EventDraft.blobs`). Attaching the same bytes under the same name again changes nothing.
    public func attach(_ id: NoteID, name: String, blob: BlobReference) async throws {
        let replica = replica
        let attachment = NoteAttachment(name: name, blob: blob)
        try await change(id) { state, scope in
            var draft = Self.draft(
                scope, id,
                .attachmentAdded(
                    .init(
                        attachment: attachment.element, op: state.attachments.add(attachment.element, replica: replica))
                ))
            draft.blobs = [blob]
            return [draft]
        }
    }

    /// Removes the attachments named `name` as this replica sees them; one attached concurrently elsewhere
    /// survives (add-wins).
    /// - Throws: `EventStoreError` `attachment.unknown` when the note has no attachment of that name.
    public func detach(_ id: NoteID, name: String) async throws {
        let replica = replica
        try await change(id) { state, scope in
            let named = state.attachmentList.filter { $0.name == name }
            guard !named.isEmpty else {
                throw EventStoreError(code: "attachment.unknown", message: "note \(id) has no attachment \(name)")
            }
            return named.map { attachment in
                Self.draft(
                    scope, id,
                    .attachmentRemoved(
                        .init(
                            attachment: attachment.element,
                            op: state.attachments.remove(attachment.element, replica: replica))))
            }
        }
    }

    /// The note's attachments and the scope they are read from (nil when there is no such note here).
    public func attachments(_ id: NoteID) async throws -> (scope: Scope, attachments: [NoteAttachment])? {
        try await store.database.read { db in
            guard let state = try NotesProjection.state(of: id, in: db),
                let scopeName = try String.fetchOne(
                    db, sql: "SELECT scope FROM notes WHERE id = ?", arguments: [id.description]),
                let scope = try? Scope(scopeName)
            else { return nil }
            return (scope, state.attachmentList)
        }
    }

    public func setPinned(_ id: NoteID, _ pinned: Bool) async throws {
        try await change(id) { _, scope in [Self.draft(scope, id, .pinnedSet(.init(pinned: pinned)))] }
    }

    /// Counts a view (PN-counter: concurrent views on several devices all count).
    public func view(_ id: NoteID) async throws {
        let replica = replica
        try await change(id) { state, scope in
            let next = state.views.increments[replica] + 1
            let op = state.views.add(1, at: Dot(replica: replica, counter: next))
            return [Self.draft(scope, id, .viewed(.init(count: 1, op: op)))]
        }
    }

    /// Adds a checklist item after `after` (at the start when nil); returns the item's id.
    @discardableResult
    public func addChecklistItem(_ id: NoteID, text: String, after: String? = nil) async throws -> String {
        let item = NoteID().description
        let replica = replica
        try await change(id) { state, scope in
            let position: Int
            if let after {
                guard let index = state.checklist.elements.firstIndex(of: after) else {
                    throw EventStoreError.invalid("no checklist item \(after) in note \(id)")
                }
                position = index + 1
            } else {
                position = 0
            }
            let op = state.checklist.insertElement(item, at: position, replica: replica)
            return [Self.draft(scope, id, .checklistItemAdded(.init(item: item, text: text, op: op)))]
        }
        return item
    }

    public func removeChecklistItem(_ id: NoteID, item: String) async throws {
        let replica = replica
        try await change(id) { state, scope in
            guard let op = state.checklist.removeElement(item, replica: replica) else {
                throw EventStoreError.invalid("no checklist item \(item) in note \(id)")
            }
            return [Self.draft(scope, id, .checklistItemRemoved(.init(item: item, op: op)))]
        }
    }

    public func setChecklistItemDone(_ id: NoteID, item: String, done: Bool) async throws {
        try await change(id) { _, scope in
            [Self.draft(scope, id, .checklistItemDoneSet(.init(item: item, done: done)))]
        }
    }

    public func delete(_ id: NoteID) async throws {
        try await change(id) { _, scope in [Self.draft(scope, id, .deleted(.init()))] }
    }

    // MARK: - Reading

    public func note(_ id: NoteID) async throws -> NoteView? {
        try await store.database.read { db in try NotesProjection.state(of: id, in: db)?.view }
    }

    /// The open conflicts of the notes an app shows (created, not deleted), by note id.
    public func conflicts() async throws -> [NoteConflict] {
        try await store.database.read { db in try NotesProjection.conflicts(in: db) }
    }

    /// Canonical JSON of every note (see `NotesProjection.exportState`).
    public func exportState() async throws -> Data {
        try await store.database.read { db in try NotesProjection.exportState(in: db) }
    }

    // MARK: - Drafts

    private func change(
        _ id: NoteID, _ build: @escaping @Sendable (inout NoteState, Scope) throws -> [EventDraft]
    ) async throws {
        let store = store
        try await store.append { db in
            // A long pull may hold the note's newest state in memory only (write-behind): write it first.
            try store.writeBufferedProjections(streams: [id.stream], in: db)
            guard var state = try NotesProjection.state(of: id, in: db), state.created,
                let scopeName = try String.fetchOne(
                    db, sql: "SELECT scope FROM notes WHERE id = ?", arguments: [id.description])
            else {
                throw EventStoreError(code: "note.unknown", message: "no note \(id) on this device")
            }
            return try build(&state, try Scope(scopeName))
        }
    }

    /// The event that carries `payload` in note `id`'s stream.
    static func draft(
        _ scope: Scope, _ id: NoteID, _ payload: NotePayload, expecting: ExpectedVersion = .any
    ) -> EventDraft {
        EventDraft(
            scope: scope, stream: id.stream, type: payload.type.rawValue, payload: payload.json,
            expectedVersion: expecting)
    }
}

/// Refuses note events that break `NoteRules` before they are written.
public struct NotesValidator: EventValidator {
    public init() {}

    public func validate(_ draft: EventDraft, in db: Database) throws {
        if let violation = NoteRules.violation(type: draft.type, stream: draft.stream, payload: draft.payload) {
            throw EventStoreError.invalid(violation)
        }
    }
}
