import Foundation
import Logging
import PostgresNIO
import SyncModels
import SyncProtocol
import SyncServer
import TasksModel

/// The Tasks domain's one server rule: a list holds at most `limit` open tasks (`OpenTaskLedger` decides).
///
/// No device can check this alone: each sees only the tasks it has pulled, and two offline devices can each
/// create the task that crosses the limit. The rule runs inside the push transaction, after the list's head
/// row is locked, so it sees every earlier commit of the list and no concurrent push can slip in before this
/// one commits. It keeps its own tables (it must not count `events`: pushes that share a transaction write
/// their rows at the end):
/// - `task_lifecycles`: per task, its `TaskLifecycle` as canonical JSON (created, deleted, and the completion
///   flag whose CRDT decides whether a reopen reopens);
/// - `open_task_counts`: per list, its open tasks.
///
/// A refused event gets `validation.failed` with the rule's message; its device rolls it back and shows it.
/// A retried (duplicate) event never reaches a rule, so nothing counts twice.
public struct OpenTaskLimitRule: EventRule {
    public var limit: Int

    public init(limit: Int) {
        self.limit = limit
    }

    public var name: String { "open-task-limit" }

    public var migrations: [Migration] {
        [
            Migration(
                id: "open-task-limit-0001",
                statements: [
                    """
                    CREATE TABLE task_lifecycles (
                        scope text NOT NULL, stream text NOT NULL, lifecycle text NOT NULL, PRIMARY KEY (scope, stream)
                    )
                    """,
                    "CREATE TABLE open_task_counts (scope text PRIMARY KEY, open bigint NOT NULL)",
                ])
        ]
    }

    /// Every task event: the rule checks them all (see `OpenTaskLedger`), not only those that open or close.
    public func applies(to type: String) -> Bool {
        type.hasPrefix(TaskEventType.prefix)
    }

    public func evaluate(_ events: [Event], connection: PostgresConnection, logger: Logger) async throws
        -> RuleDecision
    {
        let initial = try await Self.load(for: events, limit: limit, connection: connection, logger: logger)
        var ledger = initial
        let refusals = ledger.walk(events.map(Self.entry))
        let rejections = refusals.mapValues { EventRejection(.validationFailed, $0) }
        return RuleDecision(rejections: rejections) { accepted in
            var final = initial
            _ = final.walk(accepted.map(Self.entry))
            return Self.writes(from: initial, to: final)
        }
    }

    static func entry(_ event: Event) -> OpenTaskLedger.Entry {
        OpenTaskLedger.Entry(list: event.scope, stream: event.stream, type: event.type, payload: event.payload)
    }

    /// The ledger of the tasks and lists `events` concern, as the rule's tables hold them.
    static func load(for events: [Event], limit: Int, connection: PostgresConnection, logger: Logger) async throws
        -> OpenTaskLedger
    {
        var ledger = OpenTaskLedger(limit: limit)
        let scopes = Array(Set(events.map(\.scope.name))).sorted()
        let counts = try await connection.checkedQuery(
            "SELECT scope, open FROM open_task_counts WHERE scope = ANY(\(scopes))", logger: logger)
        for try await (scope, open) in counts.decode((String, Int64).self) {
            ledger.open[try Scope(scope)] = open
        }
        let keys = Array(Set(events.map { OpenTaskLedger.TaskKey(list: $0.scope, stream: $0.stream) }))
        let keyScopes = keys.map(\.list.name)
        let keyStreams = keys.map(\.stream)
        let rows = try await connection.checkedQuery(
            """
            SELECT t.scope, t.stream, t.lifecycle FROM task_lifecycles t
            JOIN unnest(\(keyScopes)::text[], \(keyStreams)::text[]) AS k(scope, stream)
              ON t.scope = k.scope AND t.stream = k.stream
            WHERE t.scope = ANY(\(scopes))
            """, logger: logger)
        for try await (scope, stream, text) in rows.decode((String, String, String).self) {
            let lifecycle = try CanonicalJSON.decode(TaskLifecycle.self, from: Data(text.utf8))
            ledger.tasks[OpenTaskLedger.TaskKey(list: try Scope(scope), stream: stream)] = lifecycle
        }
        return ledger
    }

    /// The statements that turn the stored ledger `initial` into `final`.
    static func writes(from initial: OpenTaskLedger, to final: OpenTaskLedger) -> [PostgresQuery] {
        var queries: [PostgresQuery] = []
        let changed = final.tasks.filter { initial.tasks[$0.key] != $0.value }.sorted {
            ($0.key.list, $0.key.stream) < ($1.key.list, $1.key.stream)
        }
        if !changed.isEmpty {
            let scopes = changed.map(\.key.list.name)
            let streams = changed.map(\.key.stream)
            // Lifecycles are small value types whose encoding cannot fail.
            let lifecycles = changed.map { String(decoding: try! CanonicalJSON.encode($0.value), as: UTF8.self) }
            queries.append(
                """
                INSERT INTO task_lifecycles (scope, stream, lifecycle)
                SELECT * FROM unnest(\(scopes)::text[], \(streams)::text[], \(lifecycles)::text[])
                ON CONFLICT (scope, stream) DO UPDATE SET lifecycle = EXCLUDED.lifecycle
                """)
        }
        let counts = final.open.filter { initial.open[$0.key] != $0.value }.sorted { $0.key < $1.key }
        if !counts.isEmpty {
            let scopes = counts.map(\.key.name)
            let values = counts.map(\.value)
            queries.append(
                """
                INSERT INTO open_task_counts (scope, open) SELECT * FROM unnest(\(scopes)::text[], \(values)::int8[])
                ON CONFLICT (scope) DO UPDATE SET open = EXCLUDED.open
                """)
        }
        return queries
    }
}
