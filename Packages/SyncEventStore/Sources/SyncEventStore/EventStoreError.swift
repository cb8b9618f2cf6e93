import SyncModels

/// An error of the event store, with a stable `code` and a message that never contains payloads.
public struct EventStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: String
    public var message: String

    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }

    /// An append expected a stream version the stream is not at (optimistic concurrency).
    public static func versionConflict(stream: String, expected: ExpectedVersion, actual: Int64) -> EventStoreError {
        EventStoreError(
            code: "conflict.version", message: "stream \(stream) is at version \(actual), expected \(expected)")
    }

    /// A draft or event failed validation.
    public static func invalid(_ message: String) -> EventStoreError {
        EventStoreError(code: "validation.failed", message: message)
    }

    static func from(_ error: SyncModelsError) -> EventStoreError {
        EventStoreError(code: error.code, message: error.message)
    }
}
