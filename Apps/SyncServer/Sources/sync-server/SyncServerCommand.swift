import ArgumentParser
import Foundation
import NotesServer
import SyncServer

/// `sync-server`: the generic `SyncServer` library with the Notes reference domain plugged in. Serves the
/// sync API (the default subcommand), compacts history once (`compact`), distributes its tables on a Citus
/// coordinator (`distribute`), gives events stored before checksums theirs (`backfill-checksums`), mints a
/// development token
/// (`token`) or prints the JWKS of a private key that signs such tokens (`jwks`).
struct SyncServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-server",
        abstract: "The offline-sync HTTP server: protocol v1 over PostgreSQL, serving the Notes domain.",
        subcommands: [
            ServeCommand.self, CompactCommand.self, DistributeCommand.self, BackfillChecksumsCommand.self,
            TokenCommand.self, JWKSCommand.self,
        ],
        defaultSubcommand: ServeCommand.self)
}

/// The process's entry point: NIO's event loops run its tasks if `SYNC_TASKS_ON_EVENT_LOOPS` is `true`
/// (`SyncServerApp.runTasksOnEventLoops`), then the command runs.
@main
enum SyncServerMain {
    static func main() async {
        SyncServerApp.runTasksOnEventLoops()
        await SyncServerCommand.main()
    }
}

/// `sync-server [serve] [--port N] [--note-quota N] …`: runs until SIGINT or SIGTERM, then shuts down
/// gracefully.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Serve the sync API.")

    @OptionGroup var server: ServeOptions
    @OptionGroup var notes: NotesServerOptions

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        try await SyncServerApp.serve(
            configuration: try server.configuration(environment: environment),
            domain: try notes.domain(environment: environment))
    }
}

/// `sync-server compact [--scope S …] [--vacuum]`: folds every scope's history up to its stable point now
/// (what the server's compaction service does on its own when it pays) and prints what it did and the
/// tables' bytes before and after, as JSON.
struct CompactCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact", abstract: "Fold history up to each scope's stable point now; print a JSON report.")

    @OptionGroup var compact: CompactOptions
    @OptionGroup var notes: NotesServerOptions

    func run() async throws {
        try await compact.run(domain: try notes.domain(environment: ProcessInfo.processInfo.environment))
    }
}

/// `sync-server distribute [--database-url URL]`: applies pending migrations, then distributes the tables by
/// scope on a Citus coordinator (idempotently), and prints what it did as JSON. `SYNC_CITUS=true` makes every
/// start-up do the same.
struct DistributeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "distribute",
        abstract: "Distribute the tables by scope on a Citus coordinator; print a JSON report.")

    @OptionGroup var distribute: DistributeOptions
    @OptionGroup var notes: NotesServerOptions

    func run() async throws {
        try await distribute.run(domain: try notes.domain(environment: ProcessInfo.processInfo.environment))
    }
}

/// `sync-server backfill-checksums [--scope S …] [--batch N]`: after an upgrade from a server that kept no
/// checksums, gives the events stored before it theirs, so that devices can verify those scopes whole; prints
/// what it did as JSON. Safe beside running servers, and to run again.
struct BackfillChecksumsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backfill-checksums",
        abstract: "Give the events stored before the server kept checksums theirs; print a JSON report.")

    @OptionGroup var backfill: BackfillChecksumsOptions
    @OptionGroup var notes: NotesServerOptions

    func run() async throws {
        try await backfill.run(domain: try notes.domain(environment: ProcessInfo.processInfo.environment))
    }
}
