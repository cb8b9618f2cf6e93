import SyncModels

/// What the server did with one pushed event. A push answers with one result per event, in request order.
///
/// - `accepted`: stored now at `seq`.
/// - `duplicate`: stored earlier (same `id`); `seq` is the one it got the first time, so retries are harmless.
/// - `rejected`: not stored; `code` is one of `ErrorCode.rejectionCodes` and `message` says why. A
///   `conflict.version` rejection also carries the stream's `currentVersion`.
public struct PushResult: Codable, Hashable, Sendable {
    public enum Status: String, Codable, Hashable, Sendable {
        case accepted, duplicate, rejected
    }

    public var id: EventID
    public var status: Status
    public var seq: Int64?
    public var code: ErrorCode?
    public var message: String?
    public var currentVersion: Int64?

    public init(
        id: EventID, status: Status, seq: Int64? = nil, code: ErrorCode? = nil, message: String? = nil,
        currentVersion: Int64? = nil
    ) {
        self.id = id
        self.status = status
        self.seq = seq
        self.code = code
        self.message = message
        self.currentVersion = currentVersion
    }

    public static func accepted(_ id: EventID, seq: Int64) -> PushResult {
        PushResult(id: id, status: .accepted, seq: seq)
    }

    public static func duplicate(_ id: EventID, seq: Int64) -> PushResult {
        PushResult(id: id, status: .duplicate, seq: seq)
    }

    public static func rejected(_ id: EventID, _ rejection: EventRejection) -> PushResult {
        PushResult(
            id: id, status: .rejected, code: rejection.code, message: rejection.message,
            currentVersion: rejection.currentVersion)
    }
}

/// Why one event was not stored: a rejection code, a message for the user, and for `conflict.version` the
/// stream's current version.
public struct EventRejection: Error, Hashable, Sendable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    public var currentVersion: Int64?

    public init(_ code: ErrorCode, _ message: String, currentVersion: Int64? = nil) {
        self.code = code
        self.message = message
        self.currentVersion = currentVersion
    }

    public var description: String { "\(code): \(message)" }
}

/// The body of a `200` answer to `POST /v1/push`.
public struct PushResponse: Codable, Hashable, Sendable {
    public var results: [PushResult]

    public init(results: [PushResult]) {
        self.results = results
    }
}
