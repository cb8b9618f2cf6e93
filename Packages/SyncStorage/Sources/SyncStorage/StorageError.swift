/// An error of the storage layer, with a stable `code` for logs and metrics and a message that never
/// contains row data.
public struct StorageError: Error, Sendable, CustomStringConvertible {
    public var code: String
    public var message: String
    /// The error that caused this one, if any (for example a GRDB `DatabaseError`).
    public var underlying: (any Error & Sendable)?

    public init(code: String, message: String, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public var description: String { "\(code): \(message)" }

    /// A migration broke the additive-only rule (see `SchemaMigrations`).
    static func migrationRule(_ migration: String, _ message: String) -> StorageError {
        StorageError(code: "storage.migrationRule", message: "migration \(migration): \(message)")
    }
}
