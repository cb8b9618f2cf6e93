import ArgumentParser
import Foundation
import SyncServer
import TasksServer

/// `tasks-server`: the generic `SyncServer` library with the Tasks domain plugged in, configured like
/// `sync-server` (`SYNC_DATABASE_URL`, `SYNC_PORT`, `SYNC_JWT_SECRET`, … or their flags) plus the domain's
/// `--open-task-limit` (`SYNC_OPEN_TASK_LIMIT`). Serves the sync API (the default subcommand) or mints a
/// development token (`token`).
@main
struct TasksServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tasks-server",
        abstract: "The offline-sync HTTP server over PostgreSQL, serving the Tasks domain.",
        subcommands: [ServeCommand.self, TokenCommand.self],
        defaultSubcommand: ServeCommand.self)
}

/// `tasks-server [serve] [--port N] [--open-task-limit N] …`: runs until SIGINT or SIGTERM.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Serve the sync API.")

    @OptionGroup var server: ServeOptions
    @OptionGroup var tasks: TasksServerOptions

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        try await SyncServerApp.serve(
            configuration: try server.configuration(environment: environment),
            domain: try tasks.domain(environment: environment))
    }
}
