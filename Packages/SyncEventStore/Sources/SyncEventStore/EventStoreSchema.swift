import GRDB
import SyncStorage

/// The event store's own tables.
///
/// - `events`: the log and the outbox. `position` is the local order (AUTOINCREMENT: never reused, also
///   after pruning); `seq` is the server's order within `scope` once confirmed.
/// - `store_meta`: replica id, last issued dot counter, last HLC, the pull cursor.
/// - `projection_checkpoint`: per projection, the last log position it reflects and its version.
enum EventStoreSchema {
    static func register(into migrations: inout SchemaMigrations) {
        migrations.register("eventstore.v1") { db in
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
    }
}
