/// A stable error code of protocol v1, as it appears in error bodies, push rejections and metrics.
///
/// Codes never change meaning within `/v1`; clients branch on them, never on messages. Request-level codes
/// have an HTTP status (`httpStatus`); per-event rejection codes (`validation.failed`, `conflict.version`,
/// `event.invalid`, and `scope.forbidden`, which is both) appear in push results.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public init(stringLiteral value: String) {
        self.rawValue = value
    }

    public init(from decoder: any Decoder) throws {
        self.rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    // MARK: Request-level codes

    /// 401: no `Authorization: Bearer` header.
    public static let authMissing: ErrorCode = "auth.missing"
    /// 401: the token is malformed or its signature does not verify.
    public static let authInvalid: ErrorCode = "auth.invalid"
    /// 401: the token's `exp` has passed.
    public static let authExpired: ErrorCode = "auth.expired"
    /// 403 for a request (a pulled scope not in the token); also a per-event rejection.
    public static let scopeForbidden: ErrorCode = "scope.forbidden"
    /// A route of the admin API or the dashboard asked with a valid token that is not the admin credential (a
    /// device's); 403 (an addition to v1).
    public static let adminRequired: ErrorCode = "auth.adminRequired"
    /// 400: the body is not JSON (or not a gzip stream when it says it is).
    public static let requestMalformed: ErrorCode = "request.malformed"
    /// 400: JSON of the wrong shape (types, missing fields, bad ids) or a bad query parameter.
    public static let requestInvalid: ErrorCode = "request.invalid"
    /// 413: a body, a decompressed body, an event count or a payload over its limit.
    public static let requestTooLarge: ErrorCode = "request.tooLarge"
    /// 415: a `Content-Encoding` other than `gzip` or `identity`.
    public static let requestUnsupportedEncoding: ErrorCode = "request.unsupportedEncoding"
    /// 404: no such route (an addition to the codes PROTOCOL.md lists; clients never need it).
    public static let routeNotFound: ErrorCode = "route.notFound"
    /// 405: the route exists but not with this method (an addition, like `route.notFound`).
    public static let methodNotAllowed: ErrorCode = "route.methodNotAllowed"
    /// 410: the cursor is older than the scope's retained history; bootstrap from a snapshot.
    public static let resetRequired: ErrorCode = "reset.required"
    /// 409: the checksum asked for cannot be given: the range reaches into folded history (below the
    /// scope's `compactedThrough`) or into events stored before the server kept checksums (an addition).
    public static let checksumUnavailable: ErrorCode = "checksum.unavailable"
    /// 429: too many requests at once for this token; retry after `Retry-After` seconds.
    public static let rateLimited: ErrorCode = "rate.limited"
    /// 503: the database is unreachable or saturated; retry with backoff.
    public static let serverUnavailable: ErrorCode = "server.unavailable"
    /// 500: a bug in the server. Bad input never produces it.
    public static let serverInternal: ErrorCode = "server.internal"

    // MARK: Blob codes (docs/PROTOCOL.md, "Blobs"; additions to v1)

    /// 404: no committed blob of that hash in the scope (or the scope may not be read).
    public static let blobNotFound: ErrorCode = "blob.notFound"
    /// 404: no open upload session of that id for a scope the token may write (expired, or never asked for).
    public static let uploadNotFound: ErrorCode = "upload.notFound"
    /// 400: a chunk index outside the blob, or a chunk shorter than its place in the blob.
    public static let blobChunkInvalid: ErrorCode = "blob.chunkInvalid"
    /// 400: a chunk's bytes do not match its `X-Chunk-SHA256`, or the whole blob does not match its hash at the
    /// commit (the session is then discarded).
    public static let blobHashMismatch: ErrorCode = "blob.hashMismatch"
    /// 409: a commit while chunks are still missing (the answer's message names how many).
    public static let uploadIncomplete: ErrorCode = "upload.incomplete"
    /// 416: a `Range` that starts at or past the end of the blob.
    public static let blobRangeNotSatisfiable: ErrorCode = "blob.rangeNotSatisfiable"
    /// 413: the upload would take the scope's blob bytes over its quota.
    public static let blobQuotaExceeded: ErrorCode = "blob.quotaExceeded"

    // MARK: Per-event rejection codes

    /// The event breaks a domain rule (for the reference domain: the per-scope note quota).
    public static let validationFailed: ErrorCode = "validation.failed"
    /// The stream's version moved on; the result carries `currentVersion`.
    public static let conflictVersion: ErrorCode = "conflict.version"
    /// The envelope breaks its own rules (`Event.validate()`).
    public static let eventInvalid: ErrorCode = "event.invalid"
    /// The event refers to a blob the scope does not hold (never committed there, or collected): a device
    /// uploads the blob, then pushes the event again (an addition to v1).
    public static let blobMissing: ErrorCode = "blob.missing"

    /// Every request-level code with its status.
    public static let requestCodes: [ErrorCode] = [
        .authMissing, .authInvalid, .authExpired, .scopeForbidden, .adminRequired, .requestMalformed,
        .requestInvalid, .requestTooLarge, .requestUnsupportedEncoding, .routeNotFound, .methodNotAllowed,
        .resetRequired, .rateLimited,
        .serverUnavailable, .serverInternal, .checksumUnavailable, .blobNotFound, .uploadNotFound,
        .blobChunkInvalid, .blobHashMismatch, .uploadIncomplete, .blobRangeNotSatisfiable, .blobQuotaExceeded,
    ]

    /// Every code a push result may carry.
    public static let rejectionCodes: [ErrorCode] = [
        .scopeForbidden, .validationFailed, .conflictVersion, .eventInvalid, .blobMissing,
    ]

    /// The HTTP status a request-level code is sent with; nil for codes that only appear in push results.
    public var httpStatus: Int? {
        switch self {
        case .authMissing, .authInvalid, .authExpired: 401
        case .scopeForbidden, .adminRequired: 403
        case .requestMalformed, .requestInvalid, .blobChunkInvalid, .blobHashMismatch: 400
        case .requestTooLarge, .blobQuotaExceeded: 413
        case .requestUnsupportedEncoding: 415
        case .routeNotFound, .blobNotFound, .uploadNotFound: 404
        case .methodNotAllowed: 405
        case .resetRequired: 410
        case .checksumUnavailable, .uploadIncomplete: 409
        case .blobRangeNotSatisfiable: 416
        case .rateLimited: 429
        case .serverUnavailable: 503
        case .serverInternal: 500
        default: nil
        }
    }
}
