import Logging
import PostgresNIO
import SyncModels
import SyncProtocol

/// A domain rule the server enforces inside the push transaction: rules no device can check alone.
///
/// The push runs rules after the scope head rows are locked, duplicates are set aside and stream versions
/// are checked, so a rule sees the state left by every earlier commit of the scopes involved and no
/// concurrent push can change it before this one commits. Rules run in order; each sees only the events
/// no earlier check rejected.
///
/// Small pushes may share one transaction (docs/ARCHITECTURE.md, "Group commit"): the rule is then asked
/// about each push in turn, and sees the effects the earlier pushes of the group wrote to its own tables,
/// but not their rows in `events`, which are written at the end. A rule must keep what it counts in its
/// own tables, not count `events`.
public protocol EventRule: Sendable {
    /// A short name for logs and metrics.
    var name: String { get }
    /// Tables the rule keeps; applied at start-up with the server's own migrations.
    var migrations: [Migration] { get }
    /// Whether events of this type concern the rule; others are never passed to it.
    func applies(to type: String) -> Bool
    /// Decides on `events` (new events of types the rule applies to, in request order), reading what it
    /// needs through `connection` (in the push transaction) with `checkedQuery`, which refuses a connection
    /// that has closed instead of waiting forever for an answer.
    /// - Returns: the rejections by position in `events`, and the writes that record the accepted ones.
    /// - Throws: database errors, which fail the whole push with 503.
    func evaluate(_ events: [Event], connection: PostgresConnection, logger: Logger) async throws -> RuleDecision
    /// For a rule that decides from the events alone (it reads no table, and its decisions have no effects):
    /// its rejections by position in `events`, as `evaluate` would make them; nil (the default) for a rule that
    /// reads the database. Pushes whose events concern only such rules, and that they reject none of, are
    /// appended in one statement, without a transaction of steps (docs/ARCHITECTURE.md, "A push in one
    /// statement").
    func rejectionsFromEventsAlone(_ events: [Event]) -> [Int: EventRejection]?
    /// For a rule that reads the database, the same decision made inside the push's one statement: a SQL
    /// function (created by one of the rule's `migrations`) that `sync_append` calls once the events are in,
    /// with the group's pending events in queue order (their scopes, streams and types as three `text[]`) and
    /// `AppendFunction.argument` as a fourth `text`. It writes what `evaluate`'s effects would write for those
    /// events, and where `evaluate` would reject any of them it raises SQLSTATE `SY003` instead: the call is
    /// undone, and the pushes are decided by the transaction of steps, where `evaluate` rejects it. It may
    /// refuse more than `evaluate` rejects (that only costs the steps), never less. Nil (the default): pushes
    /// that concern the rule take the steps.
    var appendFunction: AppendFunction? { get }
}

/// A rule's SQL function for the push's one statement (`EventRule.appendFunction`).
public struct AppendFunction: Sendable, Hashable {
    /// The function's name: a plain identifier of the schema.
    public var name: String
    /// Its fourth argument, e.g. the rule's setting.
    public var argument: String

    public init(name: String, argument: String = "") {
        self.name = name
        self.argument = argument
    }
}

/// What a rule decided for one batch.
public struct RuleDecision: Sendable {
    /// Rejections by position in the evaluated events.
    public var rejections: [Int: EventRejection]
    /// Given the evaluated events that were finally accepted (in order), the statements that record their
    /// effect; run in the push transaction before it commits.
    public var effects: @Sendable ([Event]) -> [PostgresQuery]

    public init(rejections: [Int: EventRejection], effects: @escaping @Sendable ([Event]) -> [PostgresQuery]) {
        self.rejections = rejections
        self.effects = effects
    }
}

extension EventRule {
    /// A rule keeps no tables unless it says so.
    public var migrations: [Migration] { [] }

    /// A rule reads the database unless it says otherwise.
    public func rejectionsFromEventsAlone(_ events: [Event]) -> [Int: EventRejection]? { nil }

    /// A rule that reads the database is decided by the steps unless it says otherwise.
    public var appendFunction: AppendFunction? { nil }
}
