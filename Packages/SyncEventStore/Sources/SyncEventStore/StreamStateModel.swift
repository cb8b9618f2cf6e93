import Foundation
import GRDB
import SyncModels
import SyncStorage

/// What a domain gives `StreamStateProjection`: the state of one stream (a CRDT value that folds the
/// stream's events), how it is stored, and the read columns an app queries with SQL. Everything else (the
/// working set, the cache of decoded states, write-behind during long pulls, folding on arrival, snapshots,
/// rebuilds) the projection does.
///
/// A model writes five things: `key(ofStream:)` and `stream(of:)` (which streams are its records),
/// `initialState()`, `apply(_:to:)`, `encode`/`decode`, and `columns` with `values(of:)`. The rest has
/// defaults: a domain whose rows are expensive to write or whose replays are long overrides `writeRows` or
/// conforms to `StreamStateReplayModel` (the Notes domain does both).
///
/// Rules, relied on by the projection:
/// - `apply` is **idempotent** (applying an event the state already holds changes nothing) and, for events
///   made concurrently, **commutative**: replays after a crash, rebuilds in log order and folding on arrival
///   all reach the same state. A CRDT built from `SyncCRDT`'s types is.
/// - `decode(encode(state))` gives back `state`.
/// - `values(of:)` and `isRetired` depend only on the state.
public protocol StreamStateModel: Sendable {
    /// A record's key: parsed from its stream's name, written in the key column as its `description`.
    associatedtype Key: Hashable, Comparable, Sendable, LosslessStringConvertible
    associatedtype State: Sendable

    /// The projection's name: unique among the store's projections, the key of its checkpoint and the prefix
    /// of its migrations.
    var name: String { get }
    /// Bump when `apply` or the columns change meaning: the store rebuilds the projection at the next open.
    var version: Int { get }
    /// The table of rows (one per record); its snapshot copies are in `<table>_snapshot`.
    var table: String { get }
    /// The table's primary key: the record's key as text. Default `stream`.
    var keyColumn: String { get }
    /// The read columns besides the key, `scope` and `state`, in the order `values(of:)` gives them.
    var columns: [StreamStateColumn] { get }
    /// The column among `columns` that is 1 when `isRetired` (a stable purge deletes those rows); nil when
    /// the model never retires a record (the default).
    var retiredColumn: String? { get }
    /// The column among `columns` that is set (neither NULL nor 0) while the record holds an open conflict:
    /// values written concurrently on replicas that did not see each other, kept for someone to review. The
    /// projection reads it to report the streams in conflict (`Projection.streamsInConflict`), which the
    /// sync engine journals and counts. The default schema indexes the rows where it is set (a partial index),
    /// so that this read costs the conflicts, not the table; a model with migrations of its own adds that
    /// index itself. Nil when the model keeps no such conflicts (the default).
    var conflictColumn: String? { get }
    /// A SQL condition on the table's columns that holds for the rows apps are shown: what a deep
    /// verification compares with a rebuild (`Projection.rowDigests`). A record apps are not shown may be
    /// kept by a stable prune where a rebuild has none. The default: not retired (every row without a
    /// `retiredColumn`).
    var shownCondition: String? { get }

    /// The record a stream holds, or nil when the stream is not this model's (its events are ignored).
    func key(ofStream stream: String) -> Key?
    /// `key(ofStream:)` from the stream name's UTF-8 bytes, as a replay reads them; the default makes a
    /// `String`.
    func key(ofStreamBytes bytes: UnsafeRawBufferPointer) -> Key?
    /// The stream of a record.
    func stream(of key: Key) -> String
    /// Whether events of `type` on this model's streams are its own (the default: all).
    func accepts(type: String) -> Bool

    /// The state of a record no event has touched.
    func initialState() -> State
    /// Folds one event into its record's state.
    func apply(_ event: StoredEvent, to state: inout State)
    /// The stored form of a state (the `state` column).
    func encode(_ state: State) -> Data
    /// A state from its stored form.
    func decode(_ data: Data) throws -> State
    /// The read columns' values, in `columns` order.
    func values(of state: State) -> [DatabaseValue]
    /// Drops what no later event can need once every replica has seen the history the state folds
    /// (tombstones of removed elements); what the state shows does not change. Returns whether it changed
    /// anything. The default keeps everything.
    func compactStable(_ state: inout State) -> Bool
    /// `compactStable` for a state that also holds later events: drops only what `folded`, the state of the
    /// history every replica has seen, no longer needs. The default keeps everything.
    func compactStable(_ state: inout State, through folded: State) -> Bool
    /// Whether the record has ended for good (deleted): once every replica has seen that, a stable fold
    /// drops its row and the store forgets its stream. The default: never.
    func isRetired(_ state: State) -> Bool

    /// Registers the table and its snapshot copy. The default creates them from `keyColumn` and `columns`
    /// (`StreamStateTable.registerDefaultSchema`); a model whose table predates the projection registers
    /// its own migrations, which must leave the same shape.
    func registerMigrations(_ table: StreamStateTable, into migrations: inout SchemaMigrations)
    /// Writes the rows of `entries` to `target`, in the order given. The default binds `values(of:)` into
    /// one upsert per row (`StreamStateTable.writeRows`); a model whose rows are expensive to make computes
    /// them on `workers` threads and binds them its own way.
    func writeRows(
        _ entries: [StreamStateEntry<Key, State>], to target: StreamStateRowTarget, table: StreamStateTable,
        workers: Int, in db: Database) throws

    /// The projection's work on a page: applying it, buffering it, folding it, and writing what it buffered.
    /// Leave them to the defaults:
    /// they are declared here so that the model's own module compiles their per-event loops for the
    /// model's types (unspecialized, generic code cost a long pull about a tenth more time).
    func applyPage(_ events: [StoredEvent], projection: StreamStateProjection<Self>, in db: Database) throws
    func bufferPage(
        _ events: [StoredEvent], after position: Int64, through last: Int64, checkpoint: Int64,
        projection: StreamStateProjection<Self>, in db: Database
    ) throws -> Bool
    func foldPage(
        _ events: [StoredEvent], deferSaves: Bool, projection: StreamStateProjection<Self>, in db: Database
    ) throws -> Bool
    func flushPage(streams: Set<String>?, limit: Int, projection: StreamStateProjection<Self>, in db: Database)
        throws -> ProjectionFlush
}

/// A model that replays straight from the log's rows (rebuilds, catch-up), without decoding events: the
/// projection then replays it on several threads, split by record.
public protocol StreamStateReplayModel: StreamStateModel {
    /// What an event type does, decided once per event from the type's bytes.
    associatedtype Kind: Sendable
    /// The kind of events of `type` (UTF-8), or nil when they are not this model's (they give no row).
    func kind(ofType type: UnsafeRawBufferPointer) -> Kind?
    /// Folds one replayed event into its record's state, as `apply(_:to:)` does with the decoded event.
    func apply(_ kind: Kind, payload: UnsafeRawBufferPointer, hlc: HLCTimestamp, dot: Dot, to state: inout State)
    /// Replays the log's rows into `projection` (rebuilds, catch-up). Leave it to the default: declared
    /// here so that the model's own module compiles the default's loop for the model's types.
    func replay(
        _ rows: (_ consume: (ReplayedEvent) throws -> Void) throws -> Void, projection: StreamStateProjection<Self>,
        in db: Database) throws
}

extension StreamStateModel {
    public var keyColumn: String { "stream" }
    public var retiredColumn: String? { nil }
    public var conflictColumn: String? { nil }
    public var shownCondition: String? { retiredColumn.map { "\($0) = 0" } }
    public func key(ofStreamBytes bytes: UnsafeRawBufferPointer) -> Key? {
        key(ofStream: String(decoding: bytes, as: UTF8.self))
    }
    public func accepts(type: String) -> Bool { true }
    public func compactStable(_ state: inout State) -> Bool { false }
    public func compactStable(_ state: inout State, through folded: State) -> Bool { false }
    public func isRetired(_ state: State) -> Bool { false }

    public func registerMigrations(_ table: StreamStateTable, into migrations: inout SchemaMigrations) {
        table.registerDefaultSchema(into: &migrations)
    }

    public func writeRows(
        _ entries: [StreamStateEntry<Key, State>], to target: StreamStateRowTarget, table: StreamStateTable,
        workers: Int, in db: Database
    ) throws {
        try table.writeRows(entries, of: self, to: target, in: db)
    }
}

/// A read column of a `StreamStateModel`'s table.
public struct StreamStateColumn: Sendable, Hashable {
    public var name: String
    /// Its SQL type, constraints and default, e.g. `TEXT NOT NULL DEFAULT ''`.
    public var definition: String

    public init(_ name: String, _ definition: String) {
        self.name = name
        self.definition = definition
    }
}

/// Where `StreamStateModel.writeRows` writes.
public enum StreamStateRowTarget: Sendable, Hashable {
    /// The table, inserted or updated; `changed` false for a row that stays its own snapshot (it holds only
    /// folded events since), true otherwise (its snapshot is copied first by the table's trigger).
    case table(changed: Bool)
    /// The snapshot copies (`<table>_snapshot`), replacing the record's copy.
    case snapshot
}

/// One record's state while events are applied: a class, so that the cache hands the writer the same object
/// to change in place rather than a copy of the whole state, and a replay's worker threads change it while
/// the working set that owns it keeps growing.
///
/// `@unchecked Sendable`: an entry is changed only inside the store's write transaction (one at a time, on
/// whichever thread GRDB runs it), or by one replay worker while the writer waits for it; the cache keeps it
/// between transactions and drops it if one rolls back.
public final class StreamStateEntry<Key: Hashable & Sendable, State: Sendable>: @unchecked Sendable {
    public let key: Key
    /// The scope of its events (nil until one is applied).
    public var scope: String?
    public var state: State
    /// Whether the record's row is its own snapshot (`changed = 0`) or it has none, as of the last load or
    /// write; nil when not known.
    @usableFromInline var rowIsSnapshot: Bool?

    @usableFromInline
    init(key: Key, scope: String?, state: State, rowIsSnapshot: Bool? = nil) {
        self.key = key
        self.scope = scope
        self.state = state
        self.rowIsSnapshot = rowIsSnapshot
    }
}

/// The names of a `StreamStateProjection`'s tables and columns, for a model's migrations and row writers.
public struct StreamStateTable: Sendable {
    public let name: String
    public let snapshot: String
    public let keyColumn: String
    /// Every column of a row but `changed`, in the order the default writer binds them: the key, `scope`,
    /// `state`, then the model's columns.
    public let columns: [String]
    let modelColumns: [StreamStateColumn]
    let projection: String
    let conflictColumn: String?

    init(_ model: some StreamStateModel) {
        name = model.table
        snapshot = model.table + "_snapshot"
        keyColumn = model.keyColumn
        columns = [model.keyColumn, "scope", "state"] + model.columns.map(\.name)
        modelColumns = model.columns
        projection = model.name
        conflictColumn = model.conflictColumn
    }

    /// `columns`, comma-separated.
    public var columnList: String { columns.joined(separator: ", ") }

    /// The table and its snapshot copy with `columns`, `changed` on the table, an index by scope, a partial
    /// index on the rows in conflict when the model has a `conflictColumn`, and the copy-on-write triggers:
    /// the first change to a row that is its own snapshot (`changed` 0 to 1) or its deletion copies it into
    /// the snapshot table.
    public func registerDefaultSchema(into migrations: inout SchemaMigrations) {
        let definitions = modelColumns.map { ",\n    \($0.name) \($0.definition)" }.joined()
        let old = columns.map { "OLD." + $0 }.joined(separator: ", ")
        let (name, snapshot, key, columnList) = (name, snapshot, keyColumn, columnList)
        migrations.register("\(projection).stream-state.v1", derivedTables: [name, snapshot]) { db in
            for (table, extra) in [(name, ",\n    changed INTEGER NOT NULL DEFAULT 1"), (snapshot, "")] {
                try db.execute(
                    sql: """
                        CREATE TABLE \(table) (
                            \(key) TEXT PRIMARY KEY,
                            scope TEXT NOT NULL,
                            state BLOB NOT NULL\(definitions)\(extra)
                        )
                        """)
            }
            try db.execute(
                sql: """
                    CREATE INDEX \(name)_by_scope ON \(name) (scope, changed);
                    CREATE TRIGGER \(name)_copy_on_update BEFORE UPDATE ON \(name)
                    WHEN OLD.changed = 0 AND NEW.changed = 1 BEGIN
                        INSERT OR REPLACE INTO \(snapshot) (\(columnList)) VALUES (\(old));
                    END;
                    CREATE TRIGGER \(name)_copy_on_delete BEFORE DELETE ON \(name) WHEN OLD.changed = 0 BEGIN
                        INSERT OR REPLACE INTO \(snapshot) (\(columnList)) VALUES (\(old));
                    END;
                    """)
        }
        // The rows in conflict, read after every applied answer (`streamsInConflict`).
        if let conflict = conflictColumn {
            migrations.register("\(projection).stream-state.conflict-index") { db in
                try db.execute(
                    sql: """
                        CREATE INDEX \(name)_with_conflict ON \(name) (scope)
                        WHERE \(conflict) IS NOT NULL AND \(conflict) IS NOT 0
                        """)
            }
        }
    }

    /// The default row writer: the key, scope, `encode(state)` and `values(of:)` bound into one upsert.
    public func writeRows<Model: StreamStateModel>(
        _ entries: [StreamStateEntry<Model.Key, Model.State>], of model: Model, to target: StreamStateRowTarget,
        in db: Database
    ) throws {
        let placeholders = databaseQuestionMarks(count: columns.count)
        let statement: Statement
        switch target {
        case .table(let changed):
            let flag = changed ? 1 : 0
            let updates = columns.dropFirst().map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
            statement = try db.cachedStatement(
                sql: """
                    INSERT INTO \(name) (\(columnList), changed) VALUES (\(placeholders), \(flag))
                    ON CONFLICT (\(keyColumn)) DO UPDATE SET \(updates), changed = \(flag)
                    """)
        case .snapshot:
            statement = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO \(snapshot) (\(columnList)) VALUES (\(placeholders))")
        }
        for entry in entries {
            let values =
                [
                    entry.key.description.databaseValue, (entry.scope ?? "").databaseValue,
                    model.encode(entry.state).databaseValue,
                ] + model.values(of: entry.state)
            try statement.execute(arguments: StatementArguments(values))
        }
    }
}

extension StreamStateTable {
    /// `select` (a query ending in `… IN`) over `keys.count` keys padded to the next power of two, as a cached
    /// statement: a long pull looks up a few hundred records per transaction, and compiling a statement of
    /// as many placeholders each time (their count differs from one transaction to the next) cost more than
    /// the lookups.
    @usableFromInline
    func lookup(_ select: String, _ keys: [String], _ db: Database) throws -> Statement {
        try db.cachedStatement(sql: "\(select) (\(databaseQuestionMarks(count: Self.padded(keys).count)))")
    }

    /// `keys` repeated at their first up to the next power of two (a key twice in `IN` is one key).
    @usableFromInline
    static func padded(_ keys: [String]) -> [String] {
        guard let first = keys.first else { return [] }
        var size = 1
        while size < keys.count { size *= 2 }
        return keys + Array(repeating: first, count: size - keys.count)
    }
}
