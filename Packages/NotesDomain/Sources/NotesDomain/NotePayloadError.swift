/// A note event's payload that does not decode as the payload of its type.
///
/// `code` is stable (`payload.malformed`); `message` names the type and the field, never the payload's
/// content.
public struct NotePayloadError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: String
    public var type: NoteEventType
    /// The first field, in the order of the type's `NoteEventPayload.keys`, that is missing or not of its
    /// type; nil when the payload is not a JSON object.
    public var field: NotePayloadKey?
    public var message: String

    public init(type: NoteEventType, field: NotePayloadKey?) {
        self.code = "payload.malformed"
        self.type = type
        self.field = field
        if let field {
            message = "the \(field.stringValue) of a \(type.rawValue) payload is missing or malformed"
        } else {
            message = "a \(type.rawValue) payload is a JSON object"
        }
    }

    /// The error `JSONDecoder` gave for a payload of `type`: its coding path starts with the field at fault
    /// (payload types decode their fields in `keys` order, each with `decodeField`, so it is the first one
    /// that is).
    init(type: NoteEventType, decoding error: any Error) {
        var path: [any CodingKey] = []
        switch error as? DecodingError {
        case .keyNotFound(let key, let context)?: path = context.codingPath + [key]
        case .typeMismatch(_, let context)?, .valueNotFound(_, let context)?, .dataCorrupted(let context)?:
            path = context.codingPath
        default: break
        }
        self.init(type: type, field: path.first.flatMap { NotePayloadKey(stringValue: $0.stringValue) })
    }

    public var description: String { "\(code): \(message)" }
}
