import ArgumentParser
import Foundation
import Logging
import PostgresNIO

#if canImport(Glibc)
    import Glibc
#endif

/// The baseline of one-event pushes: what PostgreSQL itself does per second, driven by `pgbench`, of the insert
/// the server makes for a one-event push. Each transaction raises a scope's head (`UPDATE … SET head = head + 1
/// … RETURNING head`) and inserts one event row at that seq, into tables created `LIKE scopes INCLUDING ALL` and
/// `LIKE events INCLUDING ALL` (so with the server's keys and indexes) on the server's database, dropped
/// afterwards. `clients` is meant to be the server's pool size (`SYNC_DB_POOL_SIZE`): as many transactions in
/// flight as the server can have.
enum PGBenchBaseline {
    struct Result: Codable, Sendable {
        var clients: Int
        var threads: Int
        var seconds: Int
        var scopes: Int
        var transactionsPerSecond: Double
        var latencyMilliseconds: Double?
        var command: String
    }

    static func measure(
        databaseURL: String, clients: Int, seconds: Int, scopes: Int, payloadBytes: Int, pgbench: String = "pgbench"
    ) async throws -> Result {
        let suffix = "\(UInt32.random(in: 0...UInt32.max))"
        let scopesTable = "bench_scopes_\(suffix)"
        let eventsTable = "bench_events_\(suffix)"
        try await PGBaselineCommand.withConnection(databaseURL: databaseURL) { connection, logger in
            for statement in [
                "CREATE TABLE \(scopesTable) (LIKE scopes INCLUDING ALL)",
                "CREATE TABLE \(eventsTable) (LIKE events INCLUDING ALL)",
                "INSERT INTO \(scopesTable) (scope) SELECT 'bench-' || g FROM generate_series(0, \(scopes - 1)) g",
            ] {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sync-bench-pgbench-\(suffix)")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let script = directory.appendingPathComponent("push.sql")
            try Self.script(
                scopesTable: scopesTable, eventsTable: eventsTable, scopes: scopes, payloadBytes: payloadBytes
            )
            .write(to: script, atomically: true, encoding: .utf8)
            let arguments = [
                "-n", "-f", script.path, "-c", "\(clients)", "-j", "\(min(2, clients))", "-T", "\(seconds)",
                databaseURL,
            ]
            let output = try run(pgbench, arguments)
            guard let tps = Self.number(after: "tps = ", in: output) else {
                throw ValidationError("pgbench printed no rate:\n\(output)")
            }
            try? FileManager.default.removeItem(at: directory)
            try await dropTables([scopesTable, eventsTable], databaseURL: databaseURL)
            return Result(
                clients: clients, threads: min(2, clients), seconds: seconds, scopes: scopes,
                transactionsPerSecond: tps, latencyMilliseconds: Self.number(after: "latency average = ", in: output),
                command: "pgbench -n -f push.sql -c \(clients) -j \(min(2, clients)) -T \(seconds)")
        } catch {
            try? FileManager.default.removeItem(at: directory)
            try? await dropTables([scopesTable, eventsTable], databaseURL: databaseURL)
            throw error
        }
    }

    /// One transaction: the head raised, one event row inserted at the new head, as `EventRepository.write` does.
    static func script(scopesTable: String, eventsTable: String, scopes: Int, payloadBytes: Int) -> String {
        let filler = String(repeating: "x", count: max(0, payloadBytes - 60))
        return """
            \\set s random(0, \(scopes - 1))
            \\set n random(1, 1000000000)
            BEGIN;
            UPDATE \(scopesTable) SET head = head + 1 WHERE scope = 'bench-' || :s RETURNING head \\gset
            INSERT INTO \(eventsTable) (scope, seq, event_id, stream, stream_version, type, schema_version, hlc, \
            dot_replica, dot_counter, payload) VALUES ('bench-' || :s, :head, gen_random_uuid(), \
            'note:' || gen_random_uuid(), 1, 'note.titleSet', 1, '0000018bcfe56800:0000:6d2c1f0e9a8b4c7d', \
            '6d2c1f0e9a8b4c7d8e9f001122334455', :n, '{"title": "\(filler)", "n": 1}');
            END;

            """
    }

    static func dropTables(_ tables: [String], databaseURL: String) async throws {
        try await PGBaselineCommand.withConnection(databaseURL: databaseURL) { connection, logger in
            for table in tables {
                try await connection.query(PostgresQuery(unsafeSQL: "DROP TABLE IF EXISTS \(table)"), logger: logger)
            }
        }
    }

    /// Runs `program` (looked up on PATH) and returns what it printed, stdout and stderr together.
    ///
    /// Spawned with every signal unblocked and at its default action: the threads of this process block some
    /// (SIGALRM among them), a child inherits the mask of the thread that spawns it, and pgbench ends a `-T`
    /// run on SIGALRM. Started through Foundation's `Process`, it ran on and on and could not be stopped with
    /// SIGTERM.
    static func run(_ program: String, _ arguments: [String]) throws -> String {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sync-bench-\(UInt32.random(in: 0...UInt32.max)).out")
        defer { try? FileManager.default.removeItem(at: output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, output.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = (["/usr/bin/env", program] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, "/usr/bin/env", &actions, &attributes, argv, environ)
        guard spawned == 0 else { throw ValidationError("cannot start \(program): error \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        // WIFEXITED and WEXITSTATUS, spelled out (Glibc's macros are not imported).
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw ValidationError("\(program) failed (wait status \(status)):\n\(text)")
        }
        return text
    }

    /// The number printed right after `label` in `text`, e.g. "tps = 12112.3 (without initial connection time)".
    static func number(after label: String, in text: String) -> Double? {
        guard let range = text.range(of: label) else { return nil }
        let digits = text[range.upperBound...].prefix { $0.isNumber || $0 == "." }
        return Double(digits)
    }
}
