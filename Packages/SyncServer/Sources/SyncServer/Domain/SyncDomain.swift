import SyncModels

/// The plug-in point of the server: what one application domain tells the generic server.
///
/// The server stores, orders and serves events of any type without knowing what they mean. A domain adds
/// the meaning the server needs: rules that no device can check alone (run inside the push transaction,
/// see `EventRule`), which event types are CRDT operations that commute (they skip the stream-version
/// check), how a stream's history folds into one snapshot event for compaction (`StreamFolder`), and which
/// blobs an event refers to (`blobReferences(in:)`).
///
/// Every requirement has a default, so a domain states only what it needs:
///
/// ```swift
/// struct TodoDomain: SyncDomain {
///     var name: String { "todo" }
///     func isCommutative(type: String) -> Bool { type.hasPrefix("todo.") }
/// }
/// ```
public protocol SyncDomain: Sendable {
    /// A short name for logs.
    var name: String { get }
    /// The rules enforced in the push transaction, in order; each sees only the events no earlier check
    /// rejected. Their tables are created with the server's own migrations at start-up.
    var rules: [any EventRule] { get }
    /// Whether events of `type` are CRDT operations: applying them in any order converges, so they never
    /// get a `conflict.version` rejection whatever their `streamVersion`. Other events extend their stream
    /// by optimistic concurrency (`streamVersion` must be higher than the stream's current version).
    func isCommutative(type: String) -> Bool
    /// How this domain's streams fold into one snapshot event when the server compacts (docs/ARCHITECTURE.md,
    /// "Compaction and retention"); nil when the domain's streams are never folded.
    var folder: (any StreamFolder)? { get }
    /// The blobs `event` refers to (docs/PROTOCOL.md, "Blobs"): a push rejects an event that refers to a blob
    /// not committed in the event's own scope with `blob.missing`, and records the references of the events it
    /// accepts. Called once per pushed event, outside the push transaction; the default, no references, costs
    /// nothing more.
    func blobReferences(in event: Event) -> [BlobReference]
}

extension SyncDomain {
    public var name: String { String(describing: Self.self) }
    public var rules: [any EventRule] { [] }
    public func isCommutative(type: String) -> Bool { false }
    public var folder: (any StreamFolder)? { nil }
    public func blobReferences(in event: Event) -> [BlobReference] { [] }
}

/// A domain with no rules, no commutative types and no folding: the server as a plain ordered event log.
/// What `SyncServerApp` serves when no domain is given.
public struct GenericDomain: SyncDomain {
    public init() {}
    public var name: String { "generic" }
}

/// Folds the events of one stream into one snapshot event, for compaction (docs/ARCHITECTURE.md, "Compaction and
/// retention").
///
/// Compaction hands the folder a stream's events at or below the scope's stable point, in seq order (the
/// first may be an earlier snapshot of the same stream); the folder returns the payload of one event of
/// type `snapshotType` that replaces them all, placed at the seq of the last event it folds. A replica
/// at any cursor merges the snapshot into what it has (a state merge, idempotent), so folding never forces
/// a reset.
public protocol StreamFolder: Sendable {
    /// The event type of the snapshots this folder writes (for example `note.snapshot`).
    var snapshotType: String { get }
    /// Whether this folder folds `stream`; streams it does not fold are kept as they are.
    func folds(stream: String) -> Bool
    /// The snapshot payload equivalent to applying `events` in order to an empty state.
    /// - Throws: when an event cannot be read; compaction then leaves the stream unfolded.
    func fold(_ events: [Event]) throws -> JSONValue
    /// What compaction does with a stream's history at or below the stable point, where every event is
    /// known to every active replica and whatever they make next comes after it: keep one snapshot, which
    /// may leave out tombstones (`purged`), or drop the stream altogether (a deleted note). The default
    /// keeps `fold(_:)`'s snapshot and purges nothing.
    /// - Throws: when an event cannot be read; compaction then leaves the stream unfolded.
    func foldStable(_ events: [Event]) throws -> FoldResult
}

extension StreamFolder {
    public func foldStable(_ events: [Event]) throws -> FoldResult {
        .snapshot(try fold(events), purged: false)
    }
}

/// What compaction does with one stream's stable history (`StreamFolder.foldStable`).
public enum FoldResult: Sendable, Hashable {
    /// One snapshot event with this payload replaces the events. `purged` says it left out tombstones that a
    /// replica which had not seen every folded event could still hold alive; merging the snapshot into such a
    /// replica would resurrect them, so compaction raises the scope's `retained_from_seq` past the folded
    /// events and such a replica gets 410 `reset.required` instead.
    case snapshot(JSONValue, purged: Bool)
    /// The stream ends here: its events are deleted and nothing replaces them (a deleted note). Purges, as
    /// above.
    case drop
}
