import GRDB
import SyncStorage

/// The event store's own tables.
///
/// - `events`: the log and the outbox. `position` is the local order (AUTOINCREMENT: never reused, also
///   after pruning); `seq` is the server's order within `scope` once confirmed.
/// - `store_meta`: replica id, last issued dot counter, last HLC, the pull cursor.
/// - `projection_checkpoint`: per projection, the last log position it reflects and its version.
/// - `event_counts`: how many events the log holds in each sync status, so that reading the counts (the
///   engine does it after every round trip) costs the same with ten events as with ten million, instead of
///   a scan and a sort of the whole log. Inserts add to it once per transaction (`EventStore.count`);
///   triggers follow status changes and deletes, which are rarer.
/// - `streams`: each stream's highest `stream_version`, which a local append needs. It replaced the index
///   of `events` by `(stream, stream_version)` (migration `eventstore.v2.counts-streams`): every pulled
///   event landed at a random place of that index, which cost two thirds of inserting a pulled event and
///   grew with the log (measured with the events schema: 40 µs per row with it, 13 without, at 200,000
///   rows). Reading one stream's events (`events(stream:)`, re-deriving streams after a rejection) is now
///   a scan of the log: those are rare, pulls are not.
/// - `outbox_marks` (migration `eventstore.v3.outbox-marks`): the pull cursor the replica held when it
///   wrote local events, one row each time it changed between writes, keyed by the first position written
///   under it. `acknowledgedCursor()` reads what the replica knew when it made its oldest pending event.
/// - Migration `eventstore.v4.status-check` rebuilds `events` with the same columns, rows and positions, its
///   status checked by comparisons instead of an `IN` list, which SQLite evaluated through a temporary b-tree
///   built and torn down for every inserted row.
/// - Migration `eventstore.v5.stream-scopes` adds `streams.scope`: the one scope whose events the log holds
///   for the stream, `''` when it held events of several, NULL when not known. A stable prune folds one
///   scope at a time, and needs to know which of the streams it folds may still have events elsewhere.
/// - Migration `eventstore.v6.streams-by-arrival` makes `streams` a rowid table with a unique index on
///   `stream`, instead of a table keyed by `stream`: its rows lie in the order streams were first seen, so
///   the version updates of one transaction of pulled events (streams of one scope, first seen together)
///   write a few pages of it instead of most of them, while the index, keyed by the stream's name, is written
///   only when a stream is new.
/// - Migration `eventstore.v7.event-id-per-scope` rebuilds `events` (same columns, rows and positions) with an
///   event id unique per scope, `UNIQUE (scope, event_id)`, as the server holds it, instead of unique in the
///   whole log; pending events are found by id through `events_pending_id`. A new device pulls scope after
///   scope, each in `seq` order, which for version-7 ids is about their order: each pulled id now lands at
///   the end of its scope's part of the index, where it landed among the ids of every scope pulled before,
///   a random place of an index that grew with the log (it was written about as many pages as the rows
///   themselves by the end of a 1,000,000-event pull).
/// - Migration `eventstore.v8.checksums` adds each row's checksum (`EventChecksum`; what a folded row
///   carries for a snapshot) and `scope_checksums`, each scope's sums (`ScopeChecksum`), kept in the
///   transactions that change them: by the store for what it applies and prunes, by triggers for rows
///   confirmed by status or deleted. Rows already in the log get their checksum computed once.
enum EventStoreSchema {
    /// Registers the store's migrations in the order they were released. A released migration's identifier
    /// and SQL never change: databases record the identifiers they applied.
    static func register(into migrations: inout SchemaMigrations) {
        migrations.register("eventstore.v1") { db in try createLog(db) }
        migrations.register("eventstore.v2.counts-streams") { db in try countStatusesAndStreams(db) }
        migrations.register("eventstore.v3.outbox-marks") { db in try createOutboxMarks(db) }
        migrations.register("eventstore.v4.status-check") { db in try checkStatusByComparisons(db) }
        migrations.register("eventstore.v5.stream-scopes") { db in try addStreamScopes(db) }
        migrations.register("eventstore.v6.streams-by-arrival") { db in try keepStreamsByArrival(db) }
        migrations.register("eventstore.v7.event-id-per-scope") { db in try makeEventIDsUniquePerScope(db) }
        migrations.register("eventstore.v8.checksums") { db in try EventStore.createChecksums(db) }
        migrations.register("eventstore.v9.blobs") { db in try EventStore.createBlobTables(db) }
    }

    /// Migration `eventstore.v1`: the log (`events`), `store_meta` and `projection_checkpoint`.
    static func createLog(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE events (
                    position INTEGER PRIMARY KEY AUTOINCREMENT,
                    event_id TEXT NOT NULL UNIQUE,
                    scope TEXT NOT NULL,
                    stream TEXT NOT NULL,
                    stream_version INTEGER NOT NULL,
                    type TEXT NOT NULL,
                    schema_version INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    hlc TEXT NOT NULL,
                    dot_replica TEXT NOT NULL,
                    dot_counter INTEGER NOT NULL,
                    status TEXT NOT NULL CHECK (status IN ('pending', 'confirmed', 'rejected')),
                    seq INTEGER,
                    received_at TEXT,
                    reject_code TEXT,
                    reject_message TEXT,
                    CHECK ((status = 'confirmed') = (seq IS NOT NULL))
                );
                CREATE UNIQUE INDEX events_scope_seq ON events (scope, seq) WHERE seq IS NOT NULL;
                CREATE INDEX events_stream ON events (stream, stream_version);
                CREATE INDEX events_pending ON events (position) WHERE status = 'pending';
                CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                CREATE TABLE projection_checkpoint (
                    name TEXT PRIMARY KEY,
                    position INTEGER NOT NULL,
                    version INTEGER NOT NULL
                ) WITHOUT ROWID;
                """)
    }

    /// Migration `eventstore.v2.counts-streams`: `event_counts` with its triggers, and `streams` in place of
    /// the index of `events` by stream.
    static func countStatusesAndStreams(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE event_counts (status TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
                INSERT INTO event_counts (status, n)
                    SELECT s.status, (SELECT count(*) FROM events WHERE events.status = s.status)
                    FROM (SELECT 'pending' AS status UNION ALL SELECT 'confirmed' UNION ALL SELECT 'rejected') AS s;
                CREATE TRIGGER events_count_delete AFTER DELETE ON events BEGIN
                    UPDATE event_counts SET n = n - 1 WHERE status = OLD.status;
                END;
                CREATE TRIGGER events_count_update AFTER UPDATE OF status ON events
                WHEN OLD.status != NEW.status BEGIN
                    UPDATE event_counts SET n = n - 1 WHERE status = OLD.status;
                    UPDATE event_counts SET n = n + 1 WHERE status = NEW.status;
                END;
                CREATE TABLE streams (stream TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID;
                INSERT INTO streams (stream, version) SELECT stream, max(stream_version) FROM events GROUP BY stream;
                DROP INDEX events_stream;
                """)
    }

    /// Migration `eventstore.v3.outbox-marks`: `outbox_marks`.
    static func createOutboxMarks(_ db: Database) throws {
        // Pending events written before this migration have no mark: they hold the acknowledged position
        // at the beginning until they are pushed (the safe side).
        try db.execute(sql: "CREATE TABLE outbox_marks (position INTEGER PRIMARY KEY, cursor TEXT NOT NULL)")
    }

    /// Migration `eventstore.v4.status-check`: `events` rebuilt, its status checked by comparisons.
    static func checkStatusByComparisons(_ db: Database) throws {
        // The same table with `status IN (…)` checked as three comparisons. SQLite (3.40 here) builds a
        // temporary b-tree for the `IN` list each time a row is inserted or its status changes, and tears
        // it down with its own page cache: 6 % of a bootstrapping device's CPU at the start of a
        // 1,000,000-event pull and 17 % at its end. A CHECK cannot be altered in place, so the table is
        // rebuilt (SQLite's documented procedure), keeping every row, its position and the highest
        // position ever issued (AUTOINCREMENT: positions are never reused, also after pruning).
        let columns = """
            position, event_id, scope, stream, stream_version, type, schema_version, payload, hlc, dot_replica,
            dot_counter, status, seq, received_at, reject_code, reject_message
            """
        let issued = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'events'")
        try db.execute(
            sql: """
                CREATE TABLE events_v4 (
                    position INTEGER PRIMARY KEY AUTOINCREMENT,
                    event_id TEXT NOT NULL UNIQUE,
                    scope TEXT NOT NULL,
                    stream TEXT NOT NULL,
                    stream_version INTEGER NOT NULL,
                    type TEXT NOT NULL,
                    schema_version INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    hlc TEXT NOT NULL,
                    dot_replica TEXT NOT NULL,
                    dot_counter INTEGER NOT NULL,
                    status TEXT NOT NULL
                        CHECK (status = 'pending' OR status = 'confirmed' OR status = 'rejected'),
                    seq INTEGER,
                    received_at TEXT,
                    reject_code TEXT,
                    reject_message TEXT,
                    CHECK ((status = 'confirmed') = (seq IS NOT NULL))
                );
                INSERT INTO events_v4 (\(columns)) SELECT \(columns) FROM events ORDER BY position;
                DROP TABLE events;
                ALTER TABLE events_v4 RENAME TO events;
                DELETE FROM sqlite_sequence WHERE name IN ('events', 'events_v4');
                CREATE UNIQUE INDEX events_scope_seq ON events (scope, seq) WHERE seq IS NOT NULL;
                CREATE INDEX events_pending ON events (position) WHERE status = 'pending';
                CREATE TRIGGER events_count_delete AFTER DELETE ON events BEGIN
                    UPDATE event_counts SET n = n - 1 WHERE status = OLD.status;
                END;
                CREATE TRIGGER events_count_update AFTER UPDATE OF status ON events
                WHEN OLD.status != NEW.status BEGIN
                    UPDATE event_counts SET n = n - 1 WHERE status = OLD.status;
                    UPDATE event_counts SET n = n + 1 WHERE status = NEW.status;
                END;
                """)
        if let issued {
            try db.execute(sql: "INSERT INTO sqlite_sequence (name, seq) VALUES ('events', ?)", arguments: [issued])
        }
    }

    /// Migration `eventstore.v5.stream-scopes`: `streams.scope`, filled from the log.
    static func addStreamScopes(_ db: Database) throws {
        try db.execute(
            sql: """
                ALTER TABLE streams ADD COLUMN scope TEXT;
                UPDATE streams SET scope = held.scope
                FROM (
                    SELECT stream, CASE WHEN min(scope) = max(scope) THEN min(scope) ELSE '' END AS scope
                    FROM events GROUP BY stream
                ) AS held
                WHERE streams.stream = held.stream;
                """)
    }

    /// Migration `eventstore.v6.streams-by-arrival`: `streams` rebuilt as a rowid table.
    static func keepStreamsByArrival(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE streams_v6 (stream TEXT NOT NULL UNIQUE, version INTEGER NOT NULL, scope TEXT);
                INSERT INTO streams_v6 (stream, version, scope) SELECT stream, version, scope FROM streams;
                DROP TABLE streams;
                ALTER TABLE streams_v6 RENAME TO streams;
                """)
    }

    /// Migration `eventstore.v7.event-id-per-scope`: `events` rebuilt with `UNIQUE (scope, event_id)`.
    static func makeEventIDsUniquePerScope(_ db: Database) throws {
        // SQLite's documented procedure again (see v4): the unique constraint is part of the table.
        let columns = """
            position, event_id, scope, stream, stream_version, type, schema_version, payload, hlc, dot_replica,
            dot_counter, status, seq, received_at, reject_code, reject_message
            """
        let issued = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'events'")
        try db.execute(
            sql: """
                CREATE TABLE events_v7 (
                    position INTEGER PRIMARY KEY AUTOINCREMENT,
                    event_id TEXT NOT NULL,
                    scope TEXT NOT NULL,
                    stream TEXT NOT NULL,
                    stream_version INTEGER NOT NULL,
                    type TEXT NOT NULL,
                    schema_version INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    hlc TEXT NOT NULL,
                    dot_replica TEXT NOT NULL,
                    dot_counter INTEGER NOT NULL,
                    status TEXT NOT NULL
                        CHECK (status = 'pending' OR status = 'confirmed' OR status = 'rejected'),
                    seq INTEGER,
                    received_at TEXT,
                    reject_code TEXT,
                    reject_message TEXT,
                    CHECK ((status = 'confirmed') = (seq IS NOT NULL)),
                    UNIQUE (scope, event_id)
                );
                INSERT INTO events_v7 (\(columns)) SELECT \(columns) FROM events ORDER BY position;
                DROP TABLE events;
                ALTER TABLE events_v7 RENAME TO events;
                DELETE FROM sqlite_sequence WHERE name IN ('events', 'events_v7');
                CREATE UNIQUE INDEX events_scope_seq ON events (scope, seq) WHERE seq IS NOT NULL;
                CREATE INDEX events_pending ON events (position) WHERE status = 'pending';
                CREATE INDEX events_pending_id ON events (event_id) WHERE status = 'pending';
                CREATE TRIGGER events_count_delete AFTER DELETE ON events BEGIN
                    UPDATE event_counts SET n = n - 1 WHERE status = OLD.status;
                END;
                CREATE TRIGGER events_count_update AFTER UPDATE OF status ON events
                WHEN OLD.status != NEW.status BEGIN
                    UPDATE event_counts SET n = n - 1 WHERE status = OLD.status;
                    UPDATE event_counts SET n = n + 1 WHERE status = NEW.status;
                END;
                """)
        if let issued {
            try db.execute(sql: "INSERT INTO sqlite_sequence (name, seq) VALUES ('events', ?)", arguments: [issued])
        }
    }
}
