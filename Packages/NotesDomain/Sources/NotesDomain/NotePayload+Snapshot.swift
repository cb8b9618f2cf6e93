import Foundation
import SyncCRDT
import SyncModels

extension NotePayload {
    /// `note.snapshot`, `{"state"}`: a note's whole CRDT state, which replaces the events it folds.
    ///
    /// Only the server's compaction writes it (docs/ARCHITECTURE.md, "Compaction and retention"): a stream's events at
    /// or below its scope's stable point become one snapshot placed at the seq of the last of them. Applying it merges
    /// the state into the replica's (`NoteState.merge`), which is idempotent, so a replica at any cursor, one that has
    /// seen none, some or all of the folded events, ends where replaying them would have taken it. Devices
    /// never push one: `NoteRules` rejects it.
    ///
    /// `state` is the state's binary form (`NoteState.binaryEncoded`) in base64, about a third the size of
    /// its JSON form.
    public struct Snapshot: NoteEventPayload {
        public static let type = NoteEventType.snapshot
        public static let keys: [NotePayloadKey] = [.state]

        /// The state's binary form (`NoteState.binaryEncoded`).
        public var encodedState: [UInt8]

        public init(state: NoteState) {
            self.encodedState = state.binaryEncoded
        }

        /// A snapshot of an already encoded state; `state()` checks it.
        public init(encodedState: [UInt8]) {
            self.encodedState = encodedState
        }

        /// The state it carries.
        /// - Throws: `SyncCRDTError` when the bytes are not a binary note state.
        public func state() throws -> NoteState {
            try NoteState(binaryEncoded: encodedState)
        }
    }
}

extension NotePayload.Snapshot {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: NotePayloadKey.self)
        let text = try container.decodeField(String.self, forKey: .state)
        guard let data = Data(base64Encoded: text) else {
            throw DecodingError.dataCorruptedError(
                forKey: .state, in: container, debugDescription: "state is base64")
        }
        encodedState = Array(data)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: NotePayloadKey.self)
        try container.encode(Data(encodedState).base64EncodedString(), forKey: .state)
    }

    public init(reading reader: inout JSONReader) throws(JSONReader.Bail) {
        var state: [UInt8]?
        try reader.readNotePayload { reader, key throws(JSONReader.Bail) in
            switch key {
            case .state:
                guard let data = Data(base64Encoded: try reader.readString()) else { throw JSONReader.Bail() }
                state = Array(data)
            default: try reader.skipValue()
            }
        }
        guard let state else { throw JSONReader.Bail() }
        self.init(encodedState: state)
    }
}

extension NoteState {
    /// Joins `other` into this state, field by field (each field is a state-based CRDT): commutative,
    /// associative and idempotent. Merging the state of a note's events gives the state of applying them,
    /// whatever of them this state had applied already; that is how a replica applies a `note.snapshot`.
    public mutating func merge(_ other: NoteState) {
        created = created || other.created
        title.merge(other.title)
        Self.merge(&body, other.body)
        tags.merge(other.tags)
        attachments.merge(other.attachments)
        pinned.merge(other.pinned)
        views.merge(other.views)
        Self.merge(&checklist, other.checklist)
        itemText.merge(other.itemText) { mine, theirs in mine.merging(theirs) }
        itemDone.merge(other.itemDone) { mine, theirs in mine.merging(theirs) }
        deleted.merge(other.deleted)
    }

    /// A sequence merge. A list that has integrated nothing yet (a new device's note, or one reset and holding
    /// only its own operations waiting for their anchors) takes the other's state as it is, compacted
    /// history included, and then applies its own operations to it: the join, without rebuilding the other's
    /// state operation by operation.
    static func merge<Element>(_ list: inout FugueList<Element>, _ other: FugueList<Element>) {
        guard list.version.isEmpty else {
            list.merge(other)
            return
        }
        let mine = list.operations()
        list = other
        list.apply(contentsOf: mine)
    }
}

extension NoteState {
    /// Drops the tombstones of every operation this state holds, on the premise that all of them are causally
    /// stable (every replica has seen them, and any operation not in this state was made after seeing them):
    /// what the server may assume of a note's history at or below its scope's stable point. Deleted text
    /// and checklist items that nothing can anchor on any more go (their ids and content), removed tags
    /// leave only their dots in the context, and the text and done flag of a removed checklist item go.
    /// The title's context folds into its version vector; its open conflict stays (live values are data).
    /// What the note shows does not change, and the state keeps converging with uncompacted replicas.
    /// - Returns: whether anything was dropped.
    @discardableResult
    public mutating func compactStable() -> Bool {
        compactStable(through: self)
    }

    /// `compactStable()` for a state that also holds later operations: drops the tombstones of the operations
    /// `stable` holds only (a state of the same note at or below the stable point, which this one includes).
    /// - Returns: whether anything was dropped.
    @discardableResult
    public mutating func compactStable(through stable: NoteState) -> Bool {
        let before = binaryEncoded.count
        body.compact(stableAt: stable.body.version.versionVector)
        checklist.compact(stableAt: stable.checklist.version.versionVector)
        tags.compact(stableAt: stable.tags.context.versionVector)
        attachments.compact(stableAt: stable.attachments.context.versionVector)
        title.compact(stableAt: stable.title.stableVector)
        let items = Set(checklist.elements)
        itemText = itemText.filter { items.contains($0.key) }
        itemDone = itemDone.filter { items.contains($0.key) }
        return binaryEncoded.count < before
    }

    /// Whether an app shows this note: created and not deleted. A note whose creation was folded away with
    /// its deletion, and which only a late edit brought back, stays hidden.
    public var isLive: Bool { created && deleted.value != true }
}

extension ReviewRegister {
    /// The version vector of the greatest counter per replica among the dots this register has seen: stable
    /// when the register holds only stable events. Every event of a replica is pushed in counter order, so
    /// the title events of that replica below a stable one are stable too and this register has seen them;
    /// the other dots the vector covers are events of other fields or streams, never titles of this note.
    var stableVector: VersionVector {
        var vector = context.versionVector
        for dot in context.dotCloud where dot.counter > vector[dot.replica] { vector[dot.replica] = dot.counter }
        return vector
    }
}
