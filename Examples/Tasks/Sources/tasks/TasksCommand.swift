import ArgumentParser
import Foundation
import SyncEngine
import SyncModels
import TasksDomain

/// `tasks`: the Tasks app on a SQLite file, with a command line. Every edit works offline and returns at
/// once; `sync` pushes them to a `tasks-server` and pulls everyone else's.
///
///     tasks --db phone.sqlite add groceries "Milk" --tag dairy
///     tasks --db phone.sqlite --server http://127.0.0.1:8080 --token "$TOKEN" sync
@main
struct TasksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tasks",
        abstract: "An offline-first task list on a SQLite file, synced through a tasks-server.",
        subcommands: [
            Add.self, List.self, Show.self, Done.self, Reopen.self, Title.self, Tag.self, Untag.self,
            Subtask.self, Delete.self, Sync.self, Rejected.self,
        ])

    /// The same options as every subcommand, so they may also come before the subcommand's name.
    @OptionGroup var options: Options
}

/// Options every command takes.
struct Options: ParsableArguments {
    @Option(help: "The replica's SQLite file (created if missing).")
    var db: String

    @Option(help: "The tasks-server's base URL, e.g. http://127.0.0.1:8080.")
    var server: String?

    @Option(help: "The bearer token (JWT) whose scopes are the lists to sync; defaults to SYNC_TOKEN.")
    var token: String?

    func client() throws -> TasksClient {
        try TasksClient.open(path: db)
    }
}

/// A task id argument.
func taskID(_ text: String) throws -> TaskID {
    guard let id = TaskID(text) else { throw ValidationError("\(text) is not a task id") }
    return id
}

/// Writes a line to standard error.
func report(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

struct Add: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Add a task to a list and print its id.")
    @OptionGroup var options: Options
    @Argument(help: "The list.") var list: String
    @Argument(help: "The title.") var title: String
    @Option(name: .customLong("tag"), help: "A tag; repeat for several.") var tags: [String] = []

    func run() async throws {
        print(try await options.client().create(list: try CLI.list(list), title: title, tags: tags))
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print a list's tasks, one a line (or as JSON).")
    @OptionGroup var options: Options
    @Argument(help: "The list.") var list: String
    @Flag(help: "Include deleted tasks.") var all = false
    @Flag(help: "Print JSON instead of lines.") var json = false

    func run() async throws {
        let tasks = try await options.client().tasks(in: try CLI.list(list), includingDeleted: all)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            print(String(decoding: try encoder.encode(tasks), as: UTF8.self))
            return
        }
        for task in tasks { print(CLI.line(task)) }
    }
}

struct Show: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print one task with its subtasks.")
    @OptionGroup var options: Options
    @Argument(help: "The task id.") var id: String

    func run() async throws {
        guard let task = try await options.client().task(try taskID(id)) else {
            throw ValidationError("no task \(id) on this device")
        }
        print(CLI.line(task))
        if task.conflict { print("  edited on two devices: \(task.titles.joined(separator: " | "))") }
        for subtask in task.subtasks { print("  - \(subtask.title)  (\(subtask.id))") }
    }
}

struct Done: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Complete a task.")
    @OptionGroup var options: Options
    @Argument(help: "The task id.") var id: String

    func run() async throws { try await options.client().complete(try taskID(id)) }
}

struct Reopen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Reopen a completed task.")
    @OptionGroup var options: Options
    @Argument(help: "The task id.") var id: String

    func run() async throws { try await options.client().reopen(try taskID(id)) }
}

struct Title: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Retitle a task (this also settles titles edited on two devices).")
    @OptionGroup var options: Options
    @Argument(help: "The task id.") var id: String
    @Argument(help: "The new title.") var title: String

    func run() async throws { try await options.client().retitle(try taskID(id), title) }
}

struct Tag: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Tag a task.")
    @OptionGroup var options: Options
    @Argument(help: "The task id.") var id: String
    @Argument(help: "The tag (1-32 characters, no spaces).") var tag: String

    func run() async throws { try await options.client().tag(try taskID(id), tag) }
}

struct Untag: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Remove a tag from a task.")
    @OptionGroup var options: Options
    @Argument(help: "The task id.") var id: String
    @Argument(help: "The tag.") var tag: String

    func run() async throws { try await options.client().untag(try taskID(id), tag) }
}

struct Subtask: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add a subtask (printing its id) or remove one.", subcommands: [AddSubtask.self, RemoveSubtask.self])

    struct AddSubtask: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Add a subtask at the end.")
        @OptionGroup var options: Options
        @Argument(help: "The task id.") var id: String
        @Argument(help: "The subtask's title.") var title: String
        @Option(help: "Insert after this subtask instead.") var after: String?

        func run() async throws {
            let client = try options.client()
            let subtask =
                if let after {
                    try await client.addSubtask(try taskID(id), title: title, after: after)
                } else {
                    try await client.addSubtask(try taskID(id), title: title, atEnd: true)
                }
            print(subtask)
        }
    }

    struct RemoveSubtask: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove a subtask.")
        @OptionGroup var options: Options
        @Argument(help: "The task id.") var id: String
        @Argument(help: "The subtask id.") var subtask: String

        func run() async throws { try await options.client().removeSubtask(try taskID(id), subtask: subtask) }
    }
}

struct Delete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete a task.")
    @OptionGroup var options: Options
    @Argument(help: "The task id.") var id: String

    func run() async throws { try await options.client().delete(try taskID(id)) }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Push pending edits and pull everyone else's until both sides are drained; exit 1 on failure.")
    @OptionGroup var options: Options

    func run() async throws {
        guard let server = options.server, let url = URL(string: server) else {
            throw ValidationError("--server URL is required to sync")
        }
        let client = try options.client()
        let token = options.token ?? ProcessInfo.processInfo.environment["SYNC_TOKEN"]
        let engine = try client.syncEngine(server: url, token: token)
        do {
            try await engine.syncNow()
        } catch {
            report("sync failed: \(error)")
            throw ExitCode(1)
        }
        let status = engine.status
        report("synced: \(status.pending) pending, \(status.rejected) rejected")
        for rejection in try await client.rejections() {
            report("rejected \(rejection.type) of \(rejection.task?.description ?? "?"): \(rejection.message)")
        }
    }
}

struct Rejected: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the edits the server refused.")
    @OptionGroup var options: Options

    func run() async throws {
        for rejection in try await options.client().rejections() {
            print("\(rejection.task?.description ?? "?")  \(rejection.type)  \(rejection.code): \(rejection.message)")
        }
    }
}

/// Helpers the subcommands share.
enum CLI {
    /// A list (scope) argument.
    static func list(_ text: String) throws -> Scope {
        guard Scope.isValid(text) else {
            throw ValidationError("a list name is 1-128 characters of A-Z a-z 0-9 . _ : -")
        }
        return try Scope(text)
    }

    /// One task on one line: `[x] title  #tag …  (id)`, with `*` after a title edited on two devices.
    static func line(_ task: TaskRow) -> String {
        let box = task.deleted ? "[-]" : task.done ? "[x]" : "[ ]"
        let tags = task.tags.map { " #" + $0 }.joined()
        return "\(box) \(task.title)\(task.conflict ? " *" : "")\(tags)  (\(task.id))"
    }
}
