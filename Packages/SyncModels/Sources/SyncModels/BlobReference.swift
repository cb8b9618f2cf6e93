/// The name of a blob (an attachment's bytes): the SHA-256 of its content, as 64 lowercase hexadecimal
/// digits. Two devices that attach the same file name the same blob, so it is stored and sent once.
public struct BlobHash: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The 64 lowercase hexadecimal digits.
    public let hex: String

    /// - Throws: `SyncModelsError` `blob.invalid` for anything but 64 hexadecimal digits (either case is read;
    ///   the name is kept in lowercase).
    public init(_ text: String) throws(SyncModelsError) {
        let lowered = text.lowercased()
        guard lowered.utf8.count == 64, lowered.utf8.allSatisfy({ Hex.nibble($0) != nil }) else {
            throw SyncModelsError.invalid("blob", "a blob hash is the SHA-256 of its bytes as 64 hexadecimal digits")
        }
        hex = lowered
    }

    /// The name of the blob whose SHA-256 digest is `digest` (32 bytes).
    public init<Digest: Sequence<UInt8>>(digest: Digest) {
        var text: [UInt8] = []
        text.reserveCapacity(64)
        for byte in digest {
            text.append(Hex.lowercaseDigits[Int(byte >> 4)])
            text.append(Hex.lowercaseDigits[Int(byte & 0xF)])
        }
        precondition(text.count == 64, "a SHA-256 digest is 32 bytes")
        hex = String(decoding: text, as: UTF8.self)
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            try self.init(text)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }

    public var description: String { hex }

    public static func < (lhs: BlobHash, rhs: BlobHash) -> Bool { lhs.hex < rhs.hex }
}

/// What an event says about a blob it refers to: its hash, its size in bytes and its media type. Events carry
/// references, never bytes; a domain says which of its events' fields are references (the server's
/// `SyncDomain.blobReferences(in:)`, the device's `BlobReferences`).
public struct BlobReference: Hashable, Sendable, Codable, CustomStringConvertible {
    public var hash: BlobHash
    public var size: Int64
    /// A media type such as `image/png`; `application/octet-stream` when unknown.
    public var type: String

    public init(hash: BlobHash, size: Int64, type: String = "application/octet-stream") {
        self.hash = hash
        self.size = size
        self.type = type
    }

    public var description: String { "\(hash.hex) (\(size) bytes, \(type))" }

    /// Whether `type` is a plausible media type (`type/subtype`, at most 127 visible ASCII characters): what
    /// the server accepts in an upload and a device in a reference.
    public static func isValidMediaType(_ type: String) -> Bool {
        let bytes = Array(type.utf8)
        guard (3...127).contains(bytes.count), bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else { return false }
        let slashes = bytes.filter { $0 == UInt8(ascii: "/") }.count
        return slashes == 1 && bytes.first != UInt8(ascii: "/") && bytes.last != UInt8(ascii: "/")
    }

    /// The reference as a JSON object (`{"hash", "size", "type"}`), as domains embed it in a payload.
    public var json: JSONValue {
        .object(["hash": .string(hash.hex), "size": .int(size), "type": .string(type)])
    }

    /// Reads a reference embedded as `json`; nil when `value` is not one.
    public init?(json value: JSONValue) {
        guard case .object(let fields) = value, case .string(let hashText)? = fields["hash"],
            let hash = try? BlobHash(hashText), case .int(let size)? = fields["size"], size >= 0
        else { return nil }
        var type = "application/octet-stream"
        if case .string(let declared)? = fields["type"] {
            guard Self.isValidMediaType(declared) else { return nil }
            type = declared
        }
        self.init(hash: hash, size: size, type: type)
    }
}
