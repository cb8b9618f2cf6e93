import ArgumentParser
import Foundation
import NotesDomain
import NotesStore
import SyncEngine
import SyncEngineHTTPClient
import SyncEventStore
import SyncModels
import SyncStorage
import SyncToolSupport

/// A headless replica: the Notes app on a SQLite file, with a CLI. Edits work offline and return at once;
/// `sync` and `run` talk to a sync-server.
@main
struct SyncAgent: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-agent",
        abstract: "A headless offline-first replica of the Notes app on a SQLite file.",
        version: version,
        subcommands: [
            NoteCommand.self, SyncCommand.self, RunCommand.self, StatusCommand.self, ExportCommand.self,
            ReplayCommand.self, RebuildCommand.self, CompactCommand.self, VerifyCommand.self, ConflictsCommand.self,
            DiagnosticsCommand.self, LogCommand.self, EncryptCommand.self, RekeyCommand.self, LogoutCommand.self,
        ])

    /// The stack's version this agent belongs to (the repository's release tags; `--version`, diagnostics).
    static let version = "0.4.0"

    /// The same options as every subcommand, so they may also come before the subcommand's name
    /// (`sync-agent --db FILE --server URL --token TOKEN note create …`).
    @OptionGroup var options: AgentOptions
}

/// Options every command takes.
struct AgentOptions: ParsableArguments {
    @Option(help: "The replica's SQLite file (created if missing).")
    var db: String

    @Option(help: "The sync server's base URL, e.g. http://127.0.0.1:8080.")
    var server: String?

    @Option(help: "The bearer token (JWT); defaults to the SYNC_TOKEN environment variable.")
    var token: String?

    @Option(
        help:
            "A command (run by /bin/sh) that prints a bearer token: run for the first token when there is no other, and again whenever the server refuses the one in use, so that short-lived tokens refresh themselves (as git's credential helpers and kubectl's exec plugins do)."
    )
    var tokenCommand: String?

    @Option(
        help: """
            Confirmed events the log may hold before a sync prunes it at the stable points, and the length of a             pull that folds what every other replica has seen on arrival instead of logging it (0: never).
            """)
    var compactAfter: Int = SyncEngine.Configuration().autoCompactAfter ?? 0

    @Option(
        help: """
            A key file (mode 0600, created with a new key if missing) that encrypts the replica's file at rest; a \
            plaintext file is encrypted in place on first use. Defaults to SYNC_STORAGE_KEY_FILE.
            """)
    var keyFile: String?

    /// How the replica's file is opened: encrypted under `--key-file`, or as `StorageConfiguration()` says.
    var storage: StorageConfiguration {
        var storage = StorageConfiguration()
        if let keyFile { storage.encryption = DatabaseEncryption(keys: FileKeyProvider(path: keyFile)) }
        return storage
    }

    func client() throws -> NotesClient {
        try NotesClient.open(path: db, configuration: storage)
    }

    /// The engine on `client`'s store; `live` says whether `run()` holds the live stream (off: it long-polls).
    func engine(
        for client: NotesClient, scopes: [Scope]? = nil, live: Bool = true,
        onRound: (@Sendable (SyncRound) -> Void)? = nil
    ) async throws -> SyncEngine {
        guard let server, let url = URL(string: server) else {
            throw ValidationError("--server URL is required to sync")
        }
        var bearer = token ?? ProcessInfo.processInfo.environment["SYNC_TOKEN"]
        var configuration = SyncEngine.Configuration(scopes: scopes)
        if let tokenCommand {
            let provider: @Sendable () async throws -> String = { try await TokenCommand.run(tokenCommand) }
            configuration.tokenProvider = provider
            if bearer == nil { bearer = try await provider() }
        }
        configuration.onRound = onRound
        configuration.live = live
        configuration.rebaser = NotesRebaser(replica: client.store.replica)
        configuration.autoCompactAfter = compactAfter > 0 ? compactAfter : nil
        let transport = HTTPClientTransport(baseURL: url, token: bearer)
        let blobs = BlobSync(local: try LocalBlobs(store: client.store), transport: transport)
        blobs.observe(BlobProgressReport().record)
        return try SyncEngine(store: client.store, transport: transport, configuration: configuration, blobs: blobs)
    }
}

/// Writes a line to standard error.
func report(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

/// Writes canonical JSON to standard output.
func printJSON<T: Encodable>(_ value: T) throws {
    FileHandle.standardOutput.write(try CanonicalJSON.encode(value) + Data("\n".utf8))
}

/// `--token-command`: runs the command and takes what it prints, trimmed, as the token.
enum TokenCommand {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The token the command prints (run on a thread of its own: it may take a while).
    /// - Throws: when it exits other than 0 or prints nothing (its standard error, never its output, in the
    ///   message).
    static func run(_ command: String) async throws -> String {
        let run = try await ChildProcess.runOnThread(
            "/bin/sh", ["-c", command], environment: ProcessInfo.processInfo.environment)
        let token = String(decoding: run.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard run.status == 0, !token.isEmpty else {
            let errors = String(decoding: run.stderr.suffix(500), as: UTF8.self)
            throw Failure(description: "--token-command exited \(run.status) and printed no token: \(errors)")
        }
        return token
    }
}
