/// An error raised when a value does not satisfy the rules of the sync model.
///
/// `code` is stable: the wire protocol and metrics use it. `message` is for humans and never contains
/// secrets or raw payloads.
public struct SyncModelsError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: String
    public var message: String

    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }

    static func invalid(_ what: String, _ message: String) -> SyncModelsError {
        SyncModelsError(code: "\(what).invalid", message: message)
    }
}
