/// An error raised by SyncCRDT: a decoding failure or an operation that cannot be valid.
///
/// `code` is stable (the wire protocol and metrics may use it); `message` is for humans and never contains
/// document content.
public struct SyncCRDTError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: String
    public var message: String

    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }

    /// Encoded data that cannot be decoded (`encoding.invalid`).
    static func invalidEncoding(_ message: String) -> SyncCRDTError {
        SyncCRDTError(code: "encoding.invalid", message: message)
    }

    /// An encoding version this build does not know (`encoding.version`).
    static func unsupportedVersion(_ version: Int) -> SyncCRDTError {
        SyncCRDTError(code: "encoding.version", message: "unsupported encoding version \(version)")
    }

    /// A position outside the document (`position.outOfRange`).
    static func outOfRange(_ message: String) -> SyncCRDTError {
        SyncCRDTError(code: "position.outOfRange", message: message)
    }
}
