import Logging
import PostgresNIO

/// A statement whose text never changes, named: run by `PostgresConnection.checkedExecute` as a prepared
/// statement of the connection. PostgresNIO prepares it there on first use (parse and describe, one round trip
/// more, once); every later run only binds and executes it, so PostgreSQL parses it once per connection and,
/// once its generic plan costs no more than a custom one (after five runs), plans it once too. An unnamed
/// statement (`checkedQuery`) is parsed and planned at every run: for a one-event push, most of PostgreSQL's
/// time.
protocol FixedStatement {
    /// The name the connection knows the statement by: changes when `sql` does.
    static var name: String { get }
    static var sql: String { get }
}

/// `Text` with the values of one run, as PostgresNIO's `PostgresPreparedStatement`; rows come back undecoded.
struct Prepared<Text: FixedStatement>: PostgresPreparedStatement {
    typealias Row = PostgresRow
    static var name: String { Text.name }
    static var sql: String { Text.sql }

    var bindings: PostgresBindings

    func makeBindings() throws -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}

extension PostgresConnection {
    /// Runs `text` as a prepared statement with `bindings`, refusing a closed connection as `checkedQuery`
    /// does.
    func checkedExecute<Text: FixedStatement>(
        _ text: Text.Type, _ bindings: PostgresBindings, logger: Logger, file: String = #fileID, line: Int = #line
    ) async throws -> AsyncThrowingMapSequence<PostgresRowSequence, PostgresRow> {
        guard !isClosed else { throw Database.connectionClosed }
        return try await execute(Prepared<Text>(bindings: bindings), logger: logger, file: file, line: line)
    }

    /// Runs `text` with `bindings` and hands each row to `body`: as a prepared statement when `prepared`, else
    /// as an unnamed one (`checkedQuery`), the same text either way.
    func forEachRow<Text: FixedStatement>(
        _ text: Text.Type, _ bindings: PostgresBindings, prepared: Bool, logger: Logger, file: String = #fileID,
        line: Int = #line, _ body: (PostgresRow) throws -> Void
    ) async throws {
        if prepared {
            for try await row in try await checkedExecute(text, bindings, logger: logger, file: file, line: line) {
                try body(row)
            }
        } else {
            let query = PostgresQuery(unsafeSQL: Text.sql, binds: bindings)
            for try await row in try await checkedQuery(query, logger: logger, file: file, line: line) {
                try body(row)
            }
        }
    }
}
