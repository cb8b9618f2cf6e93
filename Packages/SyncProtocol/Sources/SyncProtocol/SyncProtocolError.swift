/// A request-level failure of protocol v1: what the server answers with a 4xx or 5xx, and what a client
/// gets back when it reads such an answer.
///
/// `message` is for humans and never contains secrets, tokens or payload contents.
public struct SyncProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String

    public init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The HTTP status of `code`; 500 for a code without one.
    public var httpStatus: Int { code.httpStatus ?? 500 }

    /// The JSON body sent with the status.
    public var body: ErrorBody { ErrorBody(error: .init(code: code, message: message)) }

    public var description: String { "\(code): \(message)" }

    public static func malformed(_ message: String) -> SyncProtocolError { .init(.requestMalformed, message) }
    public static func invalid(_ message: String) -> SyncProtocolError { .init(.requestInvalid, message) }
    public static func tooLarge(_ message: String) -> SyncProtocolError { .init(.requestTooLarge, message) }
}

/// The body of every error response: `{"error": {"code": "<stable.code>", "message": "<human text>"}}`.
public struct ErrorBody: Codable, Hashable, Sendable {
    public struct Detail: Codable, Hashable, Sendable {
        public var code: ErrorCode
        public var message: String

        public init(code: ErrorCode, message: String) {
            self.code = code
            self.message = message
        }
    }

    public var error: Detail

    public init(error: Detail) {
        self.error = error
    }
}
