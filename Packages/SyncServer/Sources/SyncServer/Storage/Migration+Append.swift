extension Migration {
    /// `sync_append(…)`: a push, or a group of pushes, that needs nothing decided between its statements, in one
    /// statement and one round trip, committed on its own (`OneStatementAppend`; docs/ARCHITECTURE.md, "A push
    /// in one statement"). It locks the head rows of the events' scopes (`sync_lock_scopes`, sorted), and then:
    ///
    /// - returns no rows, having written nothing but missing head rows, when a replica that pushed is behind a
    ///   purge in one of its scopes (the test of `PushService.refuseIfBehindPurge`), or when a checked stream
    ///   already holds a version at least as high as the first one the events give it: the caller decides
    ///   those pushes in the transaction of steps, which rejects or refuses them one by one;
    /// - raises SQLSTATE `SY001`, undoing everything, when an event's id is already stored in its scope (a
    ///   retry), for the same reason;
    /// - otherwise inserts each event with seq `head + ordinal` (its place among the scope's events of the call),
    ///   moves each head and scope checksum, raises the stream versions, records the replicas' sightings, queues a
    ///   `NOTIFY` per scope, and returns each scope with its head before the call.
    ///
    /// Every statement inside names one scope (a row at a time), so on a Citus cluster each runs on its shard on
    /// the node the function is called on, as `sync_lock_scopes` does; plain PostgreSQL runs the same code, its
    /// statements planned once per session.
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
                added int8[] := '{}';
                counts int8[] := '{}';
                locked scopes;
                at int;
                slot int;
                stored int8;
            BEGIN
                FOR locked IN SELECT * FROM sync_lock_scopes(names) LOOP
                    heads := heads || locked.head;
                    added := added || 0::int8;
                    counts := counts || 0::int8;
                    IF locked.retained_from_seq > 1 THEN
                        FOR at IN 1 .. coalesce(array_length(r_scope, 1), 0) LOOP
                            CONTINUE WHEN r_scope[at] <> locked.scope;
                            IF EXISTS (SELECT 1 FROM replica_progress rp
                                       WHERE rp.scope = locked.scope AND rp.replica = r_replica[at]
                                         AND rp.acknowledged_seq > 0
                                         AND rp.acknowledged_seq < locked.retained_from_seq - 1
                                         AND rp.based_on_retained <> locked.retained_from_seq) THEN
                                RETURN;
                            END IF;
                        END LOOP;
                    END IF;
                END LOOP;
                FOR at IN 1 .. coalesce(array_length(v_scope, 1), 0) LOOP
                    SELECT st.version INTO stored FROM streams st
                    WHERE st.scope = v_scope[at] AND st.stream = v_stream[at];
                    IF FOUND AND stored >= v_first[at] THEN
                        RETURN;
                    END IF;
                END LOOP;
                FOR at IN 1 .. coalesce(array_length(p_scope, 1), 0) LOOP
                    slot := array_position(names, p_scope[at]);
                    INSERT INTO events (scope, seq, event_id, stream, stream_version, type, schema_version, hlc,
                                        dot_replica, dot_counter, payload, checksum)
                    VALUES (p_scope[at], heads[slot] + p_ordinal[at], p_id[at], p_stream[at], p_version[at],
                            p_type[at], p_schema[at], p_hlc[at], p_dot_replica[at], p_dot_counter[at],
                            p_payload[at]::json, p_checksum[at])
                    ON CONFLICT (scope, event_id) DO NOTHING;
                    IF NOT FOUND THEN
                        RAISE EXCEPTION 'event % is already stored in scope %', p_id[at], p_scope[at]
                            USING ERRCODE = 'SY001';
                    END IF;
                    added[slot] := added[slot] + p_checksum[at];
                    counts[slot] := counts[slot] + 1;
                END LOOP;
                FOR at IN 1 .. coalesce(array_length(names, 1), 0) LOOP
                    CONTINUE WHEN counts[at] = 0;
                    UPDATE scopes SET head = heads[at] + counts[at], checksum = scopes.checksum + added[at]
                    WHERE scopes.scope = names[at];
                    PERFORM pg_notify('sync_events', names[at] || ' ' || (heads[at] + counts[at]));
                END LOOP;
                FOR at IN 1 .. coalesce(array_length(v_scope, 1), 0) LOOP
                    INSERT INTO streams (scope, stream, version) VALUES (v_scope[at], v_stream[at], v_last[at])
                    ON CONFLICT (scope, stream) DO UPDATE SET version = GREATEST(streams.version, EXCLUDED.version);
                END LOOP;
                FOR at IN 1 .. coalesce(array_length(r_scope, 1), 0) LOOP
                    CONTINUE WHEN NOT r_sighted[at];
                    INSERT INTO replica_progress (replica, scope, acknowledged_seq, seen_at, based_on_retained)
                    VALUES (r_replica[at], r_scope[at], 0, now(), 0)
                    ON CONFLICT (replica, scope) DO UPDATE SET seen_at = EXCLUDED.seen_at;
                END LOOP;
                RETURN QUERY SELECT n, h FROM unnest(names, heads) AS x(n, h);
            END
            $$
            """
        ])
}
