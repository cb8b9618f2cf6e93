import ArgumentParser
import Foundation
import SyncEngine
import SyncModels
import TasksDomain

/// `tasks`: the Tasks app on a SQLite file, with a command line. Every edit works offline and returns at
/// once; `sync` pushes them to a `tasks-server` and pulls everyone else's.
///
///     tasks --db phone.sqlite add groceries "Milk" --tag dairy
///     tasks --db phone.sqlite attach TASK receipt.pdf
///     tasks --db phone.sqlite --server http://127.0.0.1:8080 --token "$TOKEN" sync
@main
struct TasksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tasks",
        abstract: "An offline-first task list on a SQLite file, synced through a tasks-server.",
        subcommands: [
            Add.self, List.self, Show.self, Done.self, Reopen.self, Title.self, Tag.self, Untag.self,
            Subtask.self, Delete.self, Attach.self, Detach.self, Files.self, Open.self, Sync.self, Rejected.self,
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

    /// The sync engine on `client`'s store, with its blob queue (`TasksClient.syncEngine`): it uploads the
    /// attached files before it pushes the events that refer to them, and downloads files on demand.
    func engine(for client: TasksClient) throws -> SyncEngine {
        guard let server, let url = URL(string: server) else {
            throw ValidationError("--server URL is required to sync")
        }
        return try client.syncEngine(server: url, token: token ?? ProcessInfo.processInfo.environment["SYNC_TOKEN"])
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

struct Attach: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Attach a file to a task and print its hash (offline: the file is copied beside the database).",
        discussion: """
            The task shows the file at once. `sync` uploads it in chunks, resuming where it stopped, and pushes \
            the attachment once the server holds the whole file.
            """)
    @OptionGroup var options: Options
    @Argument(help: "The task id.") var id: String
    @Argument(help: "The file to attach.") var file: String
    @Option(help: "The name in the task (default: the file's name).") var name: String?
    @Option(help: "The media type (default: from the file's extension).") var type: String?

    func run() async throws {
        let client = try options.client()
        let task = try taskID(id)
        let url = URL(fileURLWithPath: file)
        let mediaType = type ?? MediaType.guess(for: url)
        guard BlobReference.isValidMediaType(mediaType) else {
            throw ValidationError("\(mediaType) is not a media type")
        }
        let name = name ?? url.lastPathComponent
        guard TaskFile.isValidName(name) else {
            throw ValidationError("file names are 1-255 characters without control characters")
        }
        let blob = try await client.localBlobs().add(file: url, type: mediaType)
        try await client.attach(task, name: name, blob: blob)
        print(blob.hash.hex)
    }
}

struct Detach: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Remove a task's file by name.")
    @OptionGroup var options: Options
    @Argument(help: "The task id.") var id: String
    @Argument(help: "The file's name.") var name: String

    func run() async throws { try await options.client().detach(try taskID(id), name: name) }
}

struct Files: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a task's files as JSON: name, hash, size, type, and whether the bytes are here (local).")
    @OptionGroup var options: Options
    @Argument(help: "The task id.") var id: String

    /// One file as `files` prints it.
    struct Listed: Encodable {
        var name: String
        var hash: String
        var size: Int64
        var type: String
        var local: Bool
    }

    func run() async throws {
        let client = try options.client()
        guard let (_, files) = try await client.files(try taskID(id)) else {
            throw ValidationError("no task \(id) on this device")
        }
        let local = try client.localBlobs()
        let listed = files.map { file in
            Listed(
                name: file.name, hash: file.blob.hash.hex, size: file.blob.size, type: file.blob.type,
                local: FileManager.default.fileExists(atPath: local.fileURL(file.blob.hash).path))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        print(String(decoding: try encoder.encode(listed), as: UTF8.self))
    }
}

struct Open: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a task's file to --out, downloading it first (--server) when its bytes are not here.")
    @OptionGroup var options: Options
    @Argument(help: "The task id.") var id: String
    @Argument(help: "The file's name.") var name: String
    @Option(help: "Where to write it (replaced if it exists).") var out: String

    func run() async throws {
        let client = try options.client()
        guard let (list, files) = try await client.files(try taskID(id)) else {
            throw ValidationError("no task \(id) on this device")
        }
        guard let file = files.first(where: { $0.name == name }) else {
            throw ValidationError("task \(id) has no file \(name)")
        }
        let source: URL
        if let here = try await client.localBlobs().file(file.blob.hash) {
            source = here
        } else {
            guard options.server != nil else {
                throw ValidationError("the bytes of \(name) are not on this device: give --server to download them")
            }
            guard let blobs = try options.engine(for: client).blobs else { throw ValidationError("no blob queue") }
            do {
                source = try await blobs.open(file.blob, scope: list)
            } catch {
                report("download failed: \(error)")
                throw ExitCode(1)
            }
        }
        let target = URL(fileURLWithPath: out)
        if FileManager.default.fileExists(atPath: target.path) { try FileManager.default.removeItem(at: target) }
        try FileManager.default.copyItem(at: source, to: target)
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Push pending edits and pull everyone else's until both sides are drained; exit 1 on failure.")
    @OptionGroup var options: Options

    func run() async throws {
        let client = try options.client()
        let engine = try options.engine(for: client)
        do {
            try await engine.syncNow()
        } catch {
            report("sync failed: \(error)")
            throw ExitCode(1)
        }
        let status = engine.status
        report("synced: \(status.pending) pending, \(status.rejected) rejected")
        // An upload that failed does not fail the sync: its events wait in the outbox for the next one.
        let waiting = try await engine.blobs?.pendingUploads() ?? []
        if !waiting.isEmpty {
            report("\(waiting.count) files wait for their upload: \(engine.blobs?.progress.lastUploadError ?? "?")")
        }
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

/// A media type from a file's extension, for the common kinds; `application/octet-stream` otherwise.
enum MediaType {
    static let byExtension: [String: String] = [
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "heic": "image/heic",
        "pdf": "application/pdf", "txt": "text/plain", "md": "text/markdown", "json": "application/json",
        "csv": "text/csv", "zip": "application/zip",
    ]

    static func guess(for url: URL) -> String {
        byExtension[url.pathExtension.lowercased()] ?? "application/octet-stream"
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
