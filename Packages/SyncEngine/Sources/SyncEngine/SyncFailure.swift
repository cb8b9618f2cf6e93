import SyncProtocol

/// Why a sync attempt failed, classified by what the engine must do next.
public enum SyncFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// Try again later: the network failed, the server answered 5xx, or 429 (optionally with `Retry-After`).
    case retryable(reason: String, retryAfter: Duration?)
    /// The token is missing, invalid or expired (401) or lacks a scope (403): pause until a new token;
    /// local data is never touched.
    case authentication(code: String, message: String)
    /// The server no longer has history for our cursor (410 `reset.required`): bootstrap again, keeping
    /// pending events.
    case resetRequired
    /// A request the server will refuse every time (400, 413, 415): retrying cannot help; surfaced and
    /// retried only after the next local change or an explicit request.
    case permanent(code: String, message: String)

    public var description: String {
        switch self {
        case .retryable(let reason, let retryAfter):
            "retryable: \(reason)" + (retryAfter.map { " (retry after \($0))" } ?? "")
        case .authentication(let code, let message): "\(code): \(message)"
        case .resetRequired: "reset.required: the server no longer has history for our cursor"
        case .permanent(let code, let message): "\(code): \(message)"
        }
    }

    /// Classifies an HTTP error answer of the protocol (status and stable error code).
    public static func from(status: Int, code: String, message: String, retryAfter: Duration? = nil) -> SyncFailure {
        switch status {
        case 401, 403: .authentication(code: code, message: message)
        case 410: .resetRequired
        case 429: .retryable(reason: "\(code): \(message)", retryAfter: retryAfter)
        case 500...599: .retryable(reason: "HTTP \(status) \(code)", retryAfter: retryAfter)
        default: .permanent(code: code, message: message)
        }
    }
}

extension SyncFailure {
    /// The code of the permanent failure a transport throws for a request it cannot make (the defaults of
    /// `SyncTransport.pull` and `SyncTransport.live`, and a server without the live stream).
    public static let transportUnsupported = "transport.unsupported"

    /// The failure an error message of the live stream (`event: error`) stands for: as the same code answered
    /// to a request (`auth.expired` pauses for a new token).
    public static func from(_ detail: ErrorBody.Detail) -> SyncFailure {
        from(status: detail.code.httpStatus ?? 500, code: detail.code.rawValue, message: detail.message)
    }

    public var isRetryable: Bool {
        if case .retryable = self { return true }
        return false
    }
}
