import GRDB

/// An ordered list of schema migrations that several packages register into, applied by
/// `SyncDatabase.migrate(_:)` through GRDB's `DatabaseMigrator`.
///
/// Rules, checked on every migration as it runs (a breach throws `storage.migrationRule` and rolls the
/// migration back), because a replica may be opened by an older or newer build of the app and must never
/// lose data:
/// - **Additive only**: a migration may create tables, indexes and views and add columns; it may not drop or
///   rename a table or a column, nor change a column's type.
/// - **Defaults on new columns**: a column added to an existing table is nullable or has a default.
/// - **One transaction per step**: each migration commits entirely or not at all.
/// - **Idempotent application**: applied migrations are recorded and skipped, so migrating twice is safe.
///
/// Tables that are pure derivations of other data (projection read tables) may be declared with
/// `derivedTables`: they may be dropped and recreated, since they can be rebuilt.
public struct SchemaMigrations: Sendable {
    struct Step: Sendable {
        var identifier: String
        var derivedTables: Set<String>
        var body: @Sendable (Database) throws -> Void
    }

    private(set) var steps: [Step] = []

    public init() {}

    /// The registered identifiers, in order.
    public var identifiers: [String] { steps.map(\.identifier) }

    /// Registers a migration. Identifiers are global across packages: prefix them with the package,
    /// e.g. `eventstore.v1.events`.
    /// - Parameters:
    ///   - identifier: the migration's identifier, recorded in the file once it is applied.
    ///   - derivedTables: tables this migration may drop or reshape because their rows are derived and get
    ///     rebuilt (projection read tables).
    ///   - body: the schema change, run in the migration's own transaction.
    /// - Precondition: no migration with the same identifier was registered.
    public mutating func register(
        _ identifier: String, derivedTables: Set<String> = [], _ body: @escaping @Sendable (Database) throws -> Void
    ) {
        precondition(!steps.contains { $0.identifier == identifier }, "duplicate migration \(identifier)")
        steps.append(Step(identifier: identifier, derivedTables: derivedTables, body: body))
    }

    /// Appends every migration of `other` not already registered here.
    public mutating func register(contentsOf other: SchemaMigrations) {
        for step in other.steps where !steps.contains(where: { $0.identifier == step.identifier }) {
            steps.append(step)
        }
    }

    func migrator() -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for step in steps {
            migrator.registerMigration(step.identifier) { db in
                let before = try SchemaSnapshot(db)
                try step.body(db)
                let after = try SchemaSnapshot(db)
                try before.checkAdditive(to: after, migration: step.identifier, derivedTables: step.derivedTables)
            }
        }
        return migrator
    }
}

/// The tables and columns of a database, for checking that a migration only adds.
struct SchemaSnapshot {
    struct Column: Equatable {
        var name: String
        var type: String
        var notNull: Bool
        var hasDefault: Bool
    }

    var tables: [String: [Column]] = [:]

    init(_ db: Database) throws {
        let names = try String.fetchAll(
            db,
            sql: """
                SELECT name FROM sqlite_schema
                WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'grdb_migrations'
                """)
        for name in names {
            tables[name] = try Row.fetchAll(db, sql: "PRAGMA table_info(\(name.quotedDatabaseIdentifier))").map {
                Column(
                    name: $0["name"], type: ($0["type"] as String).uppercased(), notNull: $0["notnull"],
                    hasDefault: ($0["dflt_value"] as String?) != nil)
            }
        }
    }

    func checkAdditive(to after: SchemaSnapshot, migration: String, derivedTables: Set<String>) throws {
        for (table, columns) in tables where !derivedTables.contains(table) {
            guard let newColumns = after.tables[table] else {
                throw StorageError.migrationRule(migration, "drops or renames table \(table)")
            }
            for column in columns {
                guard let newColumn = newColumns.first(where: { $0.name == column.name }) else {
                    throw StorageError.migrationRule(migration, "drops or renames column \(table).\(column.name)")
                }
                if newColumn.type != column.type {
                    throw StorageError.migrationRule(migration, "changes the type of \(table).\(column.name)")
                }
            }
            for column in newColumns where !columns.contains(where: { $0.name == column.name }) {
                if column.notNull && !column.hasDefault {
                    throw StorageError.migrationRule(
                        migration, "adds NOT NULL column \(table).\(column.name) without a default")
                }
            }
        }
    }
}
