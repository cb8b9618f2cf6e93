import Logging
import NotesDomain
import PostgresNIO
import SyncModels
import SyncProtocol
import SyncServer

/// The reference domain's payload rules (`NoteRules`, shared with every client): a `note.*` event whose
/// payload breaks them (an unknown type, a tag longer than 32 characters, a title past the limit, a
/// malformed operation) is rejected with `validation.failed`. Clients check the same rules before they
/// write, so only a client of another build or another author meets this rejection.
public struct NotePayloadRule: EventRule {
    public init() {}

    public var name: String { "note-payload" }

    public var migrations: [Migration] { [] }

    public func applies(to type: String) -> Bool {
        type.hasPrefix(NoteEventType.prefix)
    }

    public func evaluate(_ events: [Event], connection: PostgresConnection, logger: Logger) async throws
        -> RuleDecision
    {
        RuleDecision(rejections: Self.rejections(events), effects: { _ in [] })
    }

    /// The rule reads no table: it decides from the payloads alone.
    public func rejectionsFromEventsAlone(_ events: [Event]) -> [Int: EventRejection]? {
        Self.rejections(events)
    }

    /// The pure part: rejections by position.
    static func rejections(_ events: [Event]) -> [Int: EventRejection] {
        var rejections: [Int: EventRejection] = [:]
        for (index, event) in events.enumerated() {
            if let violation = NoteRules.violation(type: event.type, stream: event.stream, payload: event.payload) {
                rejections[index] = EventRejection(.validationFailed, violation)
            }
        }
        return rejections
    }
}
