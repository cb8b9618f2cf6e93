extension Migration {
    /// `sync_append(…)`: a push, or a group of pushes, that needs nothing decided between its statements, in one
    /// statement and one round trip, committed on its own (`OneStatementAppend`; docs/ARCHITECTURE.md, "A push
    /// in one statement"). It locks the head row of each of the events' scopes, in sorted order, by moving it
    /// past the scope's events (creating a missing one first), and queues a `NOTIFY` with the new head; then:
    ///
    /// - raises SQLSTATE `SY002`, undoing everything, when a replica that pushed is behind a purge in one of its
    ///   scopes (the test of `PushService.refuseIfBehindPurge`), or when a checked stream already holds a version
    ///   at least as high as the first one the events give it;
    /// - raises SQLSTATE `SY001`, undoing everything, when an event's id is already stored in its scope (a retry);
    ///
    ///   in both cases the caller decides the pushes in the transaction of steps, which rejects or refuses them
    ///   one by one;
    /// - otherwise inserts each event with seq `head + ordinal` (its place among the scope's events of the call),
    ///   raises the stream versions, records the replicas' sightings, and returns each scope with its head before
    ///   the call.
    ///
    /// Every statement inside names one scope, by a variable, and one row, so on a Citus cluster each runs on its
    /// shard on the node the function is called on; plain PostgreSQL runs the same code, its statements planned
    /// once per session.
    static let appendFunction = Migration(
        id: "0012-append-function",
        statements: [
            """
            CREATE FUNCTION sync_append(
                p_scope text[], p_ordinal int8[], p_id uuid[], p_stream text[], p_version int8[], p_type text[],
                p_schema int4[], p_hlc text[], p_dot_replica text[], p_dot_counter int8[], p_payload text[],
                p_checksum int8[],
                v_scope text[], v_stream text[], v_first int8[], v_last int8[],
                r_replica text[], r_scope text[], r_sighted bool[]
            ) RETURNS TABLE (appended_scope text, head_before bigint)
            LANGUAGE plpgsql AS $$
            DECLARE
                names text[] := ARRAY(SELECT DISTINCT s FROM unnest(p_scope) AS s ORDER BY 1);
                heads int8[] := '{}';
                added int8[] := array_fill(0::int8, ARRAY[coalesce(array_length(names, 1), 0)]);
                counts int8[] := array_fill(0::int8, ARRAY[coalesce(array_length(names, 1), 0)]);
                at int;
                slot int;
                one_scope text;
                one_stream text;
                one_replica text;
                before int8;
                retained int8;
                stored int8;
            BEGIN
                FOR at IN 1 .. coalesce(array_length(p_scope, 1), 0) LOOP
                    slot := array_position(names, p_scope[at]);
                    counts[slot] := counts[slot] + 1;
                    added[slot] := added[slot] + p_checksum[at];
                END LOOP;
                -- Each head row locked by moving it, in sorted order.
                FOR at IN 1 .. coalesce(array_length(names, 1), 0) LOOP
                    one_scope := names[at];
                    UPDATE scopes SET head = scopes.head + counts[at], checksum = scopes.checksum + added[at]
                    WHERE scopes.scope = one_scope
                    RETURNING scopes.head - counts[at], scopes.retained_from_seq INTO before, retained;
                    IF NOT FOUND THEN
                        INSERT INTO scopes (scope) VALUES (one_scope) ON CONFLICT DO NOTHING;
                        UPDATE scopes SET head = scopes.head + counts[at], checksum = scopes.checksum + added[at]
                        WHERE scopes.scope = one_scope
                        RETURNING scopes.head - counts[at], scopes.retained_from_seq INTO before, retained;
                    END IF;
                    heads := heads || before;
                    IF retained > 1 THEN
                        FOR slot IN 1 .. coalesce(array_length(r_scope, 1), 0) LOOP
                            CONTINUE WHEN r_scope[slot] <> one_scope;
                            one_replica := r_replica[slot];
                            IF EXISTS (SELECT 1 FROM replica_progress rp
                                       WHERE rp.scope = one_scope AND rp.replica = one_replica
                                         AND rp.acknowledged_seq > 0 AND rp.acknowledged_seq < retained - 1
                                         AND rp.based_on_retained <> retained) THEN
                                RAISE EXCEPTION 'replica % is behind a purge of scope %', one_replica, one_scope
                                    USING ERRCODE = 'SY002';
                            END IF;
                        END LOOP;
                    END IF;
                    PERFORM pg_notify('sync_events', one_scope || ' ' || (before + counts[at]));
                END LOOP;
                FOR at IN 1 .. coalesce(array_length(v_scope, 1), 0) LOOP
                    one_scope := v_scope[at];
                    one_stream := v_stream[at];
                    SELECT st.version INTO stored FROM streams st WHERE st.scope = one_scope AND st.stream = one_stream;
                    IF FOUND AND stored >= v_first[at] THEN
                        RAISE EXCEPTION 'stream % of scope % is at version %', one_stream, one_scope, stored
                            USING ERRCODE = 'SY002';
                    END IF;
                END LOOP;
                FOR at IN 1 .. coalesce(array_length(p_scope, 1), 0) LOOP
                    one_scope := p_scope[at];
                    INSERT INTO events (scope, seq, event_id, stream, stream_version, type, schema_version, hlc,
                                        dot_replica, dot_counter, payload, checksum)
                    VALUES (one_scope, heads[array_position(names, one_scope)] + p_ordinal[at], p_id[at],
                            p_stream[at], p_version[at], p_type[at], p_schema[at], p_hlc[at], p_dot_replica[at],
                            p_dot_counter[at], p_payload[at]::json, p_checksum[at])
                    ON CONFLICT (scope, event_id) DO NOTHING;
                    IF NOT FOUND THEN
                        RAISE EXCEPTION 'event % is already stored in scope %', p_id[at], one_scope
                            USING ERRCODE = 'SY001';
                    END IF;
                END LOOP;
                FOR at IN 1 .. coalesce(array_length(v_scope, 1), 0) LOOP
                    one_scope := v_scope[at];
                    INSERT INTO streams (scope, stream, version) VALUES (one_scope, v_stream[at], v_last[at])
                    ON CONFLICT (scope, stream) DO UPDATE SET version = GREATEST(streams.version, EXCLUDED.version);
                END LOOP;
                FOR at IN 1 .. coalesce(array_length(r_scope, 1), 0) LOOP
                    CONTINUE WHEN NOT r_sighted[at];
                    one_scope := r_scope[at];
                    INSERT INTO replica_progress (replica, scope, acknowledged_seq, seen_at, based_on_retained)
                    VALUES (r_replica[at], one_scope, 0, now(), 0)
                    ON CONFLICT (replica, scope) DO UPDATE SET seen_at = EXCLUDED.seen_at;
                END LOOP;
                RETURN QUERY SELECT n, h FROM unnest(names, heads) AS x(n, h);
            END
            $$
            """
        ])

    /// `sync_append(…)` with two more arguments: the append functions of the rules the events concern
    /// (`EventRule.appendFunction`) and their arguments. It appends as the function above, then calls each with
    /// the events' scopes, streams and types and its argument, in the same transaction: one that raises
    /// (`SY003` where the rule would reject) undoes everything. An overload, so that servers that call the one
    /// above keep working beside those that call this one.
    static let appendWithRulesFunction = Migration(
        id: "0013-append-with-rules-function",
        statements: [
            """
            CREATE FUNCTION sync_append(
                p_scope text[], p_ordinal int8[], p_id uuid[], p_stream text[], p_version int8[], p_type text[],
                p_schema int4[], p_hlc text[], p_dot_replica text[], p_dot_counter int8[], p_payload text[],
                p_checksum int8[],
                v_scope text[], v_stream text[], v_first int8[], v_last int8[],
                r_replica text[], r_scope text[], r_sighted bool[],
                f_name text[], f_argument text[]
            ) RETURNS TABLE (appended_scope text, head_before bigint)
            LANGUAGE plpgsql AS $$
            DECLARE
                at int;
            BEGIN
                RETURN QUERY SELECT * FROM sync_append(
                    p_scope, p_ordinal, p_id, p_stream, p_version, p_type, p_schema, p_hlc, p_dot_replica,
                    p_dot_counter, p_payload, p_checksum, v_scope, v_stream, v_first, v_last, r_replica, r_scope,
                    r_sighted);
                FOR at IN 1 .. coalesce(array_length(f_name, 1), 0) LOOP
                    EXECUTE format('SELECT %I($1, $2, $3, $4)', f_name[at])
                        USING p_scope, p_stream, p_type, f_argument[at];
                END LOOP;
            END
            $$
            """
        ])
}
