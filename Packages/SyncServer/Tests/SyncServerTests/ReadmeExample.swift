// The example of README.md's "Serving your own domain", character for character between the markers
// (ReadmeExampleTests checks it, then serves it against PostgreSQL).
// README example begins
import Logging
import PostgresNIO
import SyncModels
import SyncProtocol
import SyncServer

/// A shared to-do list: `todo.*` events are CRDT operations, and a new to-do's title is 1-100 characters.
struct TodoDomain: SyncDomain {
    var rules: [any EventRule] { [TodoTitleRule()] }
    func isCommutative(type: String) -> Bool { type.hasPrefix("todo.") }
}

struct TodoTitleRule: EventRule {
    var name: String { "todo-title" }
    func applies(to type: String) -> Bool { type == "todo.added" }
    func evaluate(_ events: [Event], connection: PostgresConnection, logger: Logger) async throws -> RuleDecision {
        var rejections: [Int: EventRejection] = [:]
        for (index, event) in events.enumerated()
        where !(1...100).contains(event.payload["title"]?.stringValue?.count ?? 0) {
            rejections[index] = EventRejection(.validationFailed, "a to-do's title is 1-100 characters")
        }
        return RuleDecision(rejections: rejections, effects: { _ in [] })
    }
}

/// The whole server: a `serve` command calls this with the configuration from `ServeOptions`.
func serveTodos(configuration: ServerConfiguration) async throws {
    try await SyncServerApp.serve(configuration: configuration, domain: TodoDomain())
}
// README example ends
