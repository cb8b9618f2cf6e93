extension Migration {
    /// The tables of the generic server: scopes with their head and retention floor, the event log,
    /// stream versions for optimistic concurrency, and per-replica progress for compaction (docs/ARCHITECTURE.md,
    /// "Ordering" and "Compaction and retention").
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

    /// Folded history in a table of its own (`Compactor`): per folded stream, its one row at or below the
    /// scope's `compacted_through` (its snapshot, or its lone event), which a later fold updates in place.
    /// `events` keeps only what is not folded yet, so the space a fold frees there is the tail's, and the
    /// snapshots' space is reused row by row instead of the whole log's heap keeping room for both. The
    /// payload is `FoldedPayload` (deflated canonical JSON; the JSON text for rows moved here from `events`).
    /// It replaces `folded_streams`, whose rows pointed at those rows in `events`; the move reads and writes
    /// the folded rows once: on a large log run it in a quiet hour.
    static let foldedEvents = Migration(
        id: "0006-folded-events",
        statements: [
            """
            CREATE TABLE folded_events (
                scope text NOT NULL,
                stream text NOT NULL,
                seq bigint NOT NULL,
                event_id uuid NOT NULL,
                stream_version bigint NOT NULL,
                type text NOT NULL,
                schema_version integer NOT NULL,
                hlc text NOT NULL,
                dot_replica text NOT NULL,
                dot_counter bigint NOT NULL,
                payload bytea NOT NULL,
                received_at timestamptz NOT NULL,
                PRIMARY KEY (scope, stream)
            )
            """,
            "CREATE INDEX folded_events_seq ON folded_events (scope, seq)",
            // Compressed already: PostgreSQL need not try again (long ones still move out of line).
            "ALTER TABLE folded_events ALTER COLUMN payload SET STORAGE EXTERNAL",
            """
            INSERT INTO folded_events (scope, stream, seq, event_id, stream_version, type, schema_version, hlc,
                                       dot_replica, dot_counter, payload, received_at)
            SELECT e.scope, e.stream, e.seq, e.event_id, e.stream_version, e.type, e.schema_version, e.hlc,
                   e.dot_replica, e.dot_counter, convert_to(e.payload::text, 'UTF8'), e.received_at
            FROM events e JOIN folded_streams f ON f.scope = e.scope AND f.seq = e.seq
            """,
            "DELETE FROM events e USING folded_streams f WHERE f.scope = e.scope AND f.seq = e.seq",
            "DROP TABLE folded_streams",
        ])

    /// `sync_lock_scopes(names)`: locks the head rows of `names` one after another in the order given (sorted
    /// by the caller: the lock order that rules out deadlocks), creating the missing ones, and returns them; one
    /// round trip for a push or a group of them, whatever its scopes. A `SELECT … WHERE scope = ANY(…) ORDER BY
    /// scope FOR UPDATE` did the same in one statement on PostgreSQL, but Citus refuses a `FOR UPDATE` that
    /// spans shards; inside the function every statement names one scope, so Citus routes each to its shard
    /// (docs/SCALING.md), and plain PostgreSQL runs the same code.
    static let lockScopesFunction = Migration(
        id: "0007-lock-scopes-function",
        statements: [
            """
            CREATE FUNCTION sync_lock_scopes(names text[]) RETURNS SETOF scopes
            LANGUAGE plpgsql AS $$
            DECLARE
                each_scope text;
                found_row scopes;
            BEGIN
                FOREACH each_scope IN ARRAY names LOOP
                    SELECT * INTO found_row FROM scopes WHERE scopes.scope = each_scope FOR UPDATE;
                    IF NOT FOUND THEN
                        INSERT INTO scopes (scope) VALUES (each_scope) ON CONFLICT DO NOTHING;
                        SELECT * INTO found_row FROM scopes WHERE scopes.scope = each_scope FOR UPDATE;
                    END IF;
                    RETURN NEXT found_row;
                END LOOP;
            END
            $$
            """
        ])

    /// Per-scope checksums (docs/PROTOCOL.md, "Checksums"): each event's checksum (`EventChecksum`, computed
    /// by the push that writes it), what each folded row carries (the sum of the checksums of the events it
    /// replaced), each scope's running sum up to its head, which a push moves with the head, and the sum of
    /// what compaction purged. Adding
    /// nullable columns does not rewrite the tables. Events stored before this migration have no checksum: a
    /// scope that held any (`checksum_from`, its head now) answers checksums only above it.
    static let checksums = Migration(
        id: "0008-checksums",
        statements: [
            "ALTER TABLE events ADD COLUMN checksum bigint",
            "ALTER TABLE folded_events ADD COLUMN carries bigint",
            "ALTER TABLE scopes ADD COLUMN checksum bigint NOT NULL DEFAULT 0",
            "ALTER TABLE scopes ADD COLUMN checksum_from bigint NOT NULL DEFAULT 0",
            "UPDATE scopes SET checksum_from = head WHERE head > 0",
            // What purged streams carried: a replica that bootstraps never gets their rows, so its answer
            // from position 0 says it (`purged`).
            "ALTER TABLE scope_compaction ADD COLUMN purged_checksum bigint NOT NULL DEFAULT 0",
        ])

    /// The generic server's migrations, in order.
    static let generic: [Migration] = [
        core, canonicalPayloads, progressByScope, compaction, eventIDPerScope, foldedEvents, lockScopesFunction,
        checksums, blobs, blobCollection, uploadPartHashes, appendFunction, appendWithRulesFunction,
    ]
}
