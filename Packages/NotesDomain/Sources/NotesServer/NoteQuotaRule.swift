import Foundation
import Logging
import NotesDomain
import PostgresNIO
import SyncModels
import SyncProtocol
import SyncServer

/// The reference domain's server-side rule: a scope holds at most `quota` live notes.
///
/// `note.created` on a stream `note:<uuid>` makes that note live in its scope; `note.deleted` makes it
/// not live. A `note.created` that would take the scope past the quota is rejected with
/// `validation.failed`, so of two offline devices that each create the note crossing the quota, the first
/// to push wins. A retried (duplicate) event never reaches the rule, so it never counts twice; a second
/// `note.created` for a note that is already live changes nothing.
public struct NoteQuotaRule: EventRule {
    public static let created = "note.created"
    public static let deleted = "note.deleted"

    public var quota: Int

    public init(quota: Int) {
        self.quota = quota
    }

    public var name: String { "note-quota" }

    public var migrations: [Migration] {
        [
            Migration(
                id: "note-quota-0001",
                statements: [
                    "CREATE TABLE live_notes (scope text NOT NULL, stream text NOT NULL, PRIMARY KEY (scope, stream))",
                    "CREATE TABLE note_counts (scope text PRIMARY KEY, live bigint NOT NULL)",
                ]),
            Migration(id: "note-quota-0002-append-function", statements: [Self.appendFunctionSQL]),
        ]
    }

    /// The rule inside a push's one statement (`EventRule.appendFunction`): `walk` over the group's events, with
    /// the scope's stored state, and its writes; where `walk` would reject (past the quota, or a stream that is
    /// not `note:<uuid>`, here only lowercase ones pass, which the steps then judge), it raises `SY003` and the
    /// pushes are decided by the steps. `sync_append` has locked the scopes' head rows, so the counts it reads
    /// and moves are the scope's own until the call commits.
    static let appendFunctionSQL = """
        CREATE FUNCTION note_quota_append(p_scope text[], p_stream text[], p_type text[], p_quota text)
        RETURNS void LANGUAGE plpgsql AS $$
        DECLARE
            quota int8 := p_quota::int8;
            at int;
            one_scope text;
            live_now int8;
        BEGIN
            FOR at IN 1 .. coalesce(array_length(p_type, 1), 0) LOOP
                CONTINUE WHEN p_type[at] <> 'note.created' AND p_type[at] <> 'note.deleted';
                IF p_stream[at] !~ '^note:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
                    RAISE EXCEPTION 'the steps decide on stream %', p_stream[at] USING ERRCODE = 'SY003';
                END IF;
                one_scope := p_scope[at];
                IF p_type[at] = 'note.created' THEN
                    INSERT INTO live_notes (scope, stream) VALUES (one_scope, p_stream[at]) ON CONFLICT DO NOTHING;
                    CONTINUE WHEN NOT FOUND;
                    INSERT INTO note_counts (scope, live) VALUES (one_scope, 1)
                    ON CONFLICT (scope) DO UPDATE SET live = note_counts.live + 1
                    RETURNING live INTO live_now;
                    IF live_now > quota THEN
                        RAISE EXCEPTION 'scope % is at its quota', one_scope USING ERRCODE = 'SY003';
                    END IF;
                ELSE
                    DELETE FROM live_notes WHERE scope = one_scope AND stream = p_stream[at];
                    CONTINUE WHEN NOT FOUND;
                    UPDATE note_counts SET live = live - 1 WHERE scope = one_scope;
                END IF;
            END LOOP;
        END
        $$
        """

    public var appendFunction: AppendFunction? {
        AppendFunction(name: "note_quota_append", argument: String(quota))
    }

    public func applies(to type: String) -> Bool {
        type == Self.created || type == Self.deleted
    }

    /// What the rule knows about the scopes of one batch.
    struct State: Sendable {
        var live: Set<PushPlan.StreamKey>
        var counts: [Scope: Int64]
    }

    /// The pure part: walks `events` in order from `state`, rejecting creations past the quota.
    /// - Returns: rejections by position, and the state after the walk.
    static func walk(_ events: [Event], from state: State, quota: Int) -> ([Int: EventRejection], State) {
        var state = state
        var rejections: [Int: EventRejection] = [:]
        for (position, event) in events.enumerated() {
            guard isNoteStream(event.stream) else {
                rejections[position] = EventRejection(
                    .validationFailed, "\(event.type) must be on a stream named note:<uuid>")
                continue
            }
            let key = PushPlan.StreamKey(scope: event.scope, stream: event.stream)
            let count = state.counts[event.scope] ?? 0
            if event.type == created {
                if state.live.contains(key) { continue }
                guard count < Int64(quota) else {
                    // The message clients of the reference domain show their users.
                    rejections[position] = EventRejection(.validationFailed, NoteRules.quotaMessage(quota: quota))
                    continue
                }
                state.live.insert(key)
                state.counts[event.scope] = count + 1
            } else if state.live.remove(key) != nil {
                state.counts[event.scope] = count - 1
            }
        }
        return (rejections, state)
    }

    static func isNoteStream(_ stream: String) -> Bool {
        guard stream.hasPrefix("note:") else { return false }
        let id = stream.dropFirst(5)
        return id.utf8.count == 36 && UUID(uuidString: String(id)) != nil
    }

    public func evaluate(_ events: [Event], connection: PostgresConnection, logger: Logger) async throws
        -> RuleDecision
    {
        let scopes = Array(Set(events.map(\.scope.name)))
        let keys = Array(Set(events.map { PushPlan.StreamKey(scope: $0.scope, stream: $0.stream) }))
        var state = State(live: [], counts: [:])
        let countRows = try await connection.checkedQuery(
            "SELECT scope, live FROM note_counts WHERE scope = ANY(\(scopes))", logger: logger)
        for try await (scope, live) in countRows.decode((String, Int64).self) {
            state.counts[try Scope(scope)] = live
        }
        let keyScopes = keys.map(\.scope.name)
        let keyStreams = keys.map(\.stream)
        let liveRows = try await connection.checkedQuery(
            """
            SELECT n.scope, n.stream FROM live_notes n
            JOIN unnest(\(keyScopes)::text[], \(keyStreams)::text[]) AS k(scope, stream)
              ON n.scope = k.scope AND n.stream = k.stream
            WHERE n.scope = ANY(\(scopes))
            """, logger: logger)
        for try await (scope, stream) in liveRows.decode((String, String).self) {
            state.live.insert(PushPlan.StreamKey(scope: try Scope(scope), stream: stream))
        }
        let (rejections, _) = Self.walk(events, from: state, quota: quota)
        let initial = state
        let quota = self.quota
        return RuleDecision(rejections: rejections) { accepted in
            let (_, final) = Self.walk(accepted, from: initial, quota: quota)
            return Self.writes(from: initial, to: final)
        }
    }

    /// The statements that turn the stored state `initial` into `final`.
    static func writes(from initial: State, to final: State) -> [PostgresQuery] {
        var queries: [PostgresQuery] = []
        let added = final.live.subtracting(initial.live)
        let removed = initial.live.subtracting(final.live)
        if !added.isEmpty {
            let scopes = added.map(\.scope.name)
            let streams = added.map(\.stream)
            queries.append(
                "INSERT INTO live_notes (scope, stream) SELECT * FROM unnest(\(scopes)::text[], \(streams)::text[]) ON CONFLICT DO NOTHING"
            )
        }
        if !removed.isEmpty {
            let scopes = removed.map(\.scope.name)
            let streams = removed.map(\.stream)
            queries.append(
                """
                DELETE FROM live_notes n USING unnest(\(scopes)::text[], \(streams)::text[]) AS k(scope, stream)
                WHERE n.scope = k.scope AND n.stream = k.stream AND n.scope = ANY(\(Array(Set(scopes)))::text[])
                """)
        }
        let changed = final.counts.filter { initial.counts[$0.key] != $0.value }
        if !changed.isEmpty {
            let scopes = changed.map(\.key.name)
            let counts = changed.map(\.value)
            queries.append(
                """
                INSERT INTO note_counts (scope, live) SELECT * FROM unnest(\(scopes)::text[], \(counts)::int8[])
                ON CONFLICT (scope) DO UPDATE SET live = EXCLUDED.live
                """)
        }
        return queries
    }
}
