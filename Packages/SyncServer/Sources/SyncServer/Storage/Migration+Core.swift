extension Migration {
    /// The tables of the generic server: scopes with their head and retention floor, the event log,
    /// stream versions for optimistic concurrency, and per-replica progress for compaction (DESIGN §4, §8).
    static let core = Migration(
        id: "0001-core",
        statements: [
            """
            CREATE TABLE scopes (
                scope text PRIMARY KEY,
                head bigint NOT NULL DEFAULT 0,
                retained_from_seq bigint NOT NULL DEFAULT 1
            )
            """,
            """
            CREATE TABLE events (
                scope text NOT NULL,
                seq bigint NOT NULL,
                event_id uuid NOT NULL,
                stream text NOT NULL,
                stream_version bigint NOT NULL,
                type text NOT NULL,
                schema_version integer NOT NULL,
                hlc text NOT NULL,
                dot_replica text NOT NULL,
                dot_counter bigint NOT NULL,
                payload jsonb NOT NULL,
                received_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (scope, seq)
            )
            """,
            "CREATE UNIQUE INDEX events_event_id_key ON events (event_id)",
            """
            CREATE TABLE streams (
                scope text NOT NULL,
                stream text NOT NULL,
                version bigint NOT NULL,
                PRIMARY KEY (scope, stream)
            )
            """,
            """
            CREATE TABLE replica_progress (
                replica text NOT NULL,
                scope text NOT NULL,
                acknowledged_seq bigint NOT NULL DEFAULT 0,
                seen_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (replica, scope)
            )
            """,
        ])

    /// Payloads are kept as the canonical JSON text the client wrote (`json`, which PostgreSQL stores
    /// verbatim), not re-encoded by `jsonb`, so the bytes of an event's payload are the same on the client,
    /// in the database and on the wire. Rows stored before this migration keep `jsonb`'s formatting of the
    /// same value. The `ALTER` rewrites the table once; on a large log run it in a quiet hour.
    static let canonicalPayloads = Migration(
        id: "0002-canonical-payloads",
        statements: ["ALTER TABLE events ALTER COLUMN payload TYPE json USING payload::json"])

    /// Stable points are read per scope on every pull: `replica_progress` by scope and recency.
    static let progressByScope = Migration(
        id: "0003-replica-progress-by-scope",
        statements: ["CREATE INDEX replica_progress_scope ON replica_progress (scope, seen_at)"])

    /// Compaction's bookkeeping (`Compactor`): per scope, how far history is folded; per replica and scope,
    /// the purge level its state is based on; per folded stream,
    /// the seq of its one row at or below that point (its snapshot, or its lone event), so the next pass finds
    /// it without an index on `events (scope, stream)` that every push would pay for. Pushes never touch
    /// either table.
    static let compaction = Migration(
        id: "0004-compaction",
        statements: [
            """
            CREATE TABLE scope_compaction (
                scope text PRIMARY KEY,
                compacted_through bigint NOT NULL DEFAULT 0,
                removed_events bigint NOT NULL DEFAULT 0,
                compacted_at timestamptz
            )
            """,
            // The scope's `retained_from_seq` when the replica last read it from position 0 (a bootstrap): a
            // cursor below `retained_from_seq - 1` may continue only if no purge happened since (0: unknown).
            "ALTER TABLE replica_progress ADD COLUMN based_on_retained bigint NOT NULL DEFAULT 0",
            """
            CREATE TABLE folded_streams (
                scope text NOT NULL,
                stream text NOT NULL,
                seq bigint NOT NULL,
                PRIMARY KEY (scope, stream)
            )
            """,
        ])

    /// Event ids are unique per scope, not across the whole table: every unique index then includes
    /// `scope`, which a table distributed by scope (Citus, docs/SCALING.md) requires. An event belongs to
    /// one scope and a retry carries the same one, so deduplication is unchanged. Building the index reads
    /// the whole log once; on a large one run it in a quiet hour.
    static let eventIDPerScope = Migration(
        id: "0005-event-id-per-scope",
        statements: [
            "CREATE UNIQUE INDEX events_scope_event_id_key ON events (scope, event_id)",
            "DROP INDEX events_event_id_key",
        ])

    /// The generic server's migrations, in order.
    static let generic: [Migration] = [core, canonicalPayloads, progressByScope, compaction, eventIDPerScope]
}
