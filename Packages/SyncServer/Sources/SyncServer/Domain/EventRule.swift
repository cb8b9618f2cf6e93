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
}
