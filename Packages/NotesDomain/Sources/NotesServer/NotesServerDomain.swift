import ArgumentParser
import NotesDomain
import SyncModels
import SyncServer

/// The Notes reference domain plugged into the generic server: every `note.*` event is a CRDT operation
/// (commutative: no stream-version conflicts), payloads must follow `NoteRules` (the same rules every
/// client checks before it writes), and a scope holds at most `quota` live notes (`NoteQuotaRule`, the
/// rule no device can check alone). Compaction folds a note's history into one `note.snapshot` (`NoteFolder`).
public struct NotesServerDomain: SyncDomain {
    /// Most live notes per scope.
    public var quota: Int

    public init(quota: Int = NotesServerOptions.defaultQuota) {
        self.quota = quota
    }

    public var name: String { "notes" }

    public var rules: [any EventRule] { [NotePayloadRule(), NoteQuotaRule(quota: quota)] }

    public func isCommutative(type: String) -> Bool { type.hasPrefix(NoteEventType.prefix) }

    /// Compaction folds each note's history into one `note.snapshot` (`NoteFolder`).
    public var folder: (any StreamFolder)? { NoteFolder() }

    /// An attachment's event refers to its blob: the server accepts it only once the scope holds the blob. A
    /// snapshot refers to the blobs of the attachments its note still has (a folded note keeps its references;
    /// one whose removal was folded lets its blob go).
    public func blobReferences(in event: Event) -> [BlobReference] { NoteAttachment.blobs(in: event) }
}

/// The Notes domain's settings on a server's command line, each overriding its `SYNC_*` variable.
public struct NotesServerOptions: ParsableArguments {
    /// The quota when neither the flag nor `SYNC_NOTE_QUOTA` sets one.
    public static let defaultQuota = 1000

    @Option(help: "Most live notes per scope (SYNC_NOTE_QUOTA, default 1000).")
    public var noteQuota: Int?

    public init() {}

    /// The domain: the default quota, then `SYNC_NOTE_QUOTA` of `environment`, then the flag.
    /// - Throws: `ConfigurationError` when a quota is not a non-negative integer.
    public func domain(environment: [String: String]) throws -> NotesServerDomain {
        var quota = Self.defaultQuota
        if let text = environment["SYNC_NOTE_QUOTA"], !text.isEmpty {
            guard let value = Int(text), value >= 0 else {
                throw ConfigurationError(message: "SYNC_NOTE_QUOTA must be an integer in 0...\(Int.max)")
            }
            quota = value
        }
        if let noteQuota {
            guard noteQuota >= 0 else { throw ConfigurationError(message: "--note-quota must not be negative") }
            quota = noteQuota
        }
        return NotesServerDomain(quota: quota)
    }
}
