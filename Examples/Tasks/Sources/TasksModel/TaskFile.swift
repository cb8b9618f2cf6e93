import SyncModels

/// One file attached to a task: its name in the task and the blob holding its bytes (a `BlobReference`:
/// hash, size, media type). Events carry the reference, never the bytes; the device keeps the bytes in its
/// blob directory (`LocalBlobs`) and the server in its blob store.
///
/// In the task's add-wins set (`TaskState.files`) a file is one string, `"<hash> <size> <type> <name>"` (the
/// name last, so it may hold spaces), which keeps the set's elements the plain strings the tags' set has:
/// the same CRDT, the same encodings. Attaching the same bytes under the same name twice is one element; the
/// same bytes under two names are two, and two files may share a name (two devices attaching different bytes
/// under one name offline keep both).
public struct TaskFile: Sendable, Hashable, Codable, Comparable {
    public var name: String
    public var blob: BlobReference

    /// Names are 1 to 255 characters without control characters.
    public static let nameLength = 1...255

    public init(name: String, blob: BlobReference) {
        self.name = name
        self.blob = blob
    }

    /// The element of the task's set of files.
    public var element: String { "\(blob.hash.hex) \(blob.size) \(blob.type) \(name)" }

    /// Reads an element of the task's set of files; nil when `element` is not one as `element` writes it (a
    /// hash that is not 64 lowercase hexadecimal digits, a size that is not a non-negative decimal without
    /// sign or leading zeros, a type that is not a media type, a name that is not valid). So an element that
    /// reads back writes the same string, and two spellings never name one file.
    public init?(element: String) {
        let parts = element.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, let hash = try? BlobHash(String(parts[0])), String(parts[0]) == hash.hex,
            let size = Int64(parts[1]), size >= 0, String(size) == parts[1],
            BlobReference.isValidMediaType(String(parts[2])),
            Self.isValidName(String(parts[3]))
        else { return nil }
        self.init(name: String(parts[3]), blob: BlobReference(hash: hash, size: size, type: String(parts[2])))
    }

    /// Whether `name` may name a file in a task: 1 to 255 characters, none of them a control character.
    public static func isValidName(_ name: String) -> Bool {
        nameLength.contains(name.count) && !name.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    /// By name, then by hash: the order `TaskState.fileList` gives.
    public static func < (lhs: TaskFile, rhs: TaskFile) -> Bool {
        (lhs.name, lhs.blob.hash) < (rhs.name, rhs.blob.hash)
    }
}
