import ArgumentParser
import Foundation
import NotesDomain
import NotesStore
import SyncEngine
import SyncEventStore
import SyncModels
import Synchronization

/// `sync-agent note …`: edits that work offline and return at once.
struct NoteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "note", abstract: "Create, edit and read notes (offline; nothing waits for the network).",
        subcommands: [
            Create.self, SetTitle.self, SetBody.self, Tag.self, Pin.self, View.self, Checklist.self, Delete.self,
            Resolve.self, Attach.self, Detach.self, Files.self, Open.self,
        ])

    static func noteID(_ text: String) throws -> NoteID {
        guard let id = NoteID(text) else { throw ValidationError("\(text) is not a note id") }
        return id
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a note and print its id.")
        @OptionGroup var options: AgentOptions
        @Option(help: "The scope (space) the note belongs to.") var scope: String
        @Option(help: "The title.") var title: String
        @Option(help: "The body text.") var body: String = ""
        @Option(name: .customLong("tag"), help: "A tag; repeat for several.") var tags: [String] = []

        func run() async throws {
            let id = try await options.client().create(scope: try Scope(scope), title: title, body: body, tags: tags)
            print(id)
        }
    }

    struct SetTitle: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set-title", abstract: "Set a note's title.")
        @OptionGroup var options: AgentOptions
        @Argument(help: "The note id.") var id: String
        @Argument(help: "The new title.") var title: String

        func run() async throws { try await options.client().setTitle(try noteID(id), title) }
    }

    struct Resolve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Resolve a note's open title conflict (see `sync-agent conflicts`) with one title.",
            discussion: """
                Writes a title that replaces every concurrent title this replica holds for the note: the \
                conflict closes everywhere once it syncs, and opens again only with titles written without \
                seeing the resolution.
                """)
        @OptionGroup var options: AgentOptions
        @Argument(help: "The note id.") var id: String
        @Option(help: "The title to keep: one of the concurrent titles, or a new one.") var title: String

        func run() async throws { try await options.client().resolveTitle(try noteID(id), to: title) }
    }

    struct SetBody: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set-body", abstract: "Replace a note's body.")
        @OptionGroup var options: AgentOptions
        @Argument(help: "The note id.") var id: String
        @Argument(help: "The new body text.") var text: String

        func run() async throws { try await options.client().setBody(try noteID(id), text) }
    }

    struct Tag: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add or remove a tag.")
        enum Action: String, ExpressibleByArgument { case add, remove }
        @OptionGroup var options: AgentOptions
        @Argument(help: "The note id.") var id: String
        @Argument(help: "add or remove.") var action: Action
        @Argument(help: "The tag (1-32 characters).") var tag: String

        func run() async throws {
            let client = try options.client()
            switch action {
            case .add: try await client.addTag(try noteID(id), tag)
            case .remove: try await client.removeTag(try noteID(id), tag)
            }
        }
    }

    struct Pin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Pin or unpin a note.")
        @OptionGroup var options: AgentOptions
        @Argument(help: "The note id.") var id: String
        @Argument(help: "true or false.") var pinned: Bool

        func run() async throws { try await options.client().setPinned(try noteID(id), pinned) }
    }

    struct View: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a note as JSON (and count the view).")
        @OptionGroup var options: AgentOptions
        @Argument(help: "The note id.") var id: String

        func run() async throws {
            let client = try options.client()
            let note = try noteID(id)
            try await client.view(note)
            guard let view = try await client.note(note) else { throw ValidationError("no note \(id)") }
            try printJSON(view)
        }
    }

    struct Checklist: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add or remove checklist items.")
        enum Action: String, ExpressibleByArgument { case add, remove, done, undone }
        @OptionGroup var options: AgentOptions
        @Argument(help: "The note id.") var id: String
        @Argument(help: "add TEXT, remove ITEM, done ITEM or undone ITEM.") var action: Action
        @Argument(help: "The item's text (add) or id (remove, done, undone).") var value: String
        @Option(help: "With add: the item to insert after (default: at the start).") var after: String?

        func run() async throws {
            let client = try options.client()
            let note = try noteID(id)
            switch action {
            case .add: print(try await client.addChecklistItem(note, text: value, after: after))
            case .remove: try await client.removeChecklistItem(note, item: value)
            case .done, .undone: try await client.setChecklistItemDone(note, item: value, done: action == .done)
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a note.")
        @OptionGroup var options: AgentOptions
        @Argument(help: "The note id.") var id: String

        func run() async throws { try await options.client().delete(try noteID(id)) }
    }
}

extension NoteCommand {
    struct Attach: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Attach a file to a note (offline: the file is copied beside the database at once).",
            discussion: """
                The note shows the file at once. `sync` (or `run`) uploads it in chunks, resuming where it \
                stopped, and pushes the attachment once the server holds the whole file.
                """)
        @OptionGroup var options: AgentOptions
        @Argument(help: "The note id.") var id: String
        @Argument(help: "The file to attach.") var file: String
        @Option(help: "The name in the note (default: the file's name).") var name: String?
        @Option(help: "The media type (default: from the file's extension).") var type: String?

        func run() async throws {
            let client = try options.client()
            let note = try noteID(id)
            let url = URL(fileURLWithPath: file)
            let mediaType = type ?? MediaType.guess(for: url)
            guard BlobReference.isValidMediaType(mediaType) else {
                throw ValidationError("\(mediaType) is not a media type")
            }
            let name = name ?? url.lastPathComponent
            guard NoteAttachment.isValidName(name) else {
                throw ValidationError("attachment names are 1-255 characters")
            }
            let blob = try await LocalBlobs(store: client.store).add(file: url, type: mediaType)
            try await client.attach(note, name: name, blob: blob)
            print(blob.hash.hex)
        }
    }

    struct Detach: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a note's attachment by name.")
        @OptionGroup var options: AgentOptions
        @Argument(help: "The note id.") var id: String
        @Argument(help: "The attachment's name.") var name: String

        func run() async throws { try await options.client().detach(try noteID(id), name: name) }
    }

    struct Files: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List a note's attachments as JSON: name, hash, size, type, whether the bytes are here.")
        @OptionGroup var options: AgentOptions
        @Argument(help: "The note id.") var id: String

        struct Listed: Encodable {
            var name: String
            var hash: String
            var size: Int64
            var type: String
            var local: Bool
        }

        func run() async throws {
            let client = try options.client()
            guard let (_, attachments) = try await client.attachments(try noteID(id)) else {
                throw ValidationError("no note \(id)")
            }
            let local = try LocalBlobs(store: client.store)
            try printJSON(
                attachments.map { attachment in
                    Listed(
                        name: attachment.name, hash: attachment.blob.hash.hex, size: attachment.blob.size,
                        type: attachment.blob.type,
                        local: FileManager.default.fileExists(atPath: local.fileURL(attachment.blob.hash).path))
                })
        }
    }

    struct Open: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a note's attachment to a file, downloading it first when its bytes are not here.")
        @OptionGroup var options: AgentOptions
        @Argument(help: "The note id.") var id: String
        @Argument(help: "The attachment's name.") var name: String
        @Option(help: "Where to write it.") var out: String

        func run() async throws {
            let client = try options.client()
            guard let (scope, attachments) = try await client.attachments(try noteID(id)) else {
                throw ValidationError("no note \(id)")
            }
            guard let attachment = attachments.first(where: { $0.name == name }) else {
                throw ValidationError("note \(id) has no attachment \(name)")
            }
            let local = try LocalBlobs(store: client.store)
            let file: URL
            if let here = try await local.file(attachment.blob.hash) {
                file = here
            } else {
                guard let blobs = try await options.engine(for: client).blobs else {
                    throw ValidationError("no blob queue")
                }
                // What crossed the network, whether the download ended or not: a resumed download adds only
                // the bytes it did not have.
                defer {
                    let received = blobs.progress.downloadedBytes
                    if received > 0 { report("downloaded \(received) bytes in all") }
                }
                file = try await blobs.open(attachment.blob, scope: scope)
            }
            let target = URL(fileURLWithPath: out)
            if FileManager.default.fileExists(atPath: target.path) { try FileManager.default.removeItem(at: target) }
            try FileManager.default.copyItem(at: file, to: target)
        }
    }
}

/// A media type from a file's extension, for the common kinds; `application/octet-stream` otherwise.
enum MediaType {
    static let byExtension: [String: String] = [
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "heic": "image/heic",
        "webp": "image/webp", "pdf": "application/pdf", "txt": "text/plain", "md": "text/markdown",
        "json": "application/json", "mp3": "audio/mpeg", "m4a": "audio/mp4", "wav": "audio/wav", "mp4": "video/mp4",
        "mov": "video/quicktime", "zip": "application/zip",
    ]

    static func guess(for url: URL) -> String {
        byExtension[url.pathExtension.lowercased()] ?? "application/octet-stream"
    }
}

/// Reports blob transfers on standard error, at most once a second while bytes move.
final class BlobProgressReport: Sendable {
    private let last = Mutex<ContinuousClock.Instant?>(nil)

    @Sendable func record(_ progress: BlobProgress) {
        let now = ContinuousClock.now
        let due = last.withLock { last -> Bool in
            if let previous = last, now - previous < .seconds(1) { return false }
            last = now
            return true
        }
        guard due else { return }
        if progress.uploadBytes > 0, progress.uploadsPending > 0 {
            report(
                "uploaded \(progress.uploadedBytes) of \(progress.uploadBytes) bytes (\(progress.uploadedBytes * 100 / max(progress.uploadBytes, 1))%), \(progress.uploadsPending) files left"
            )
        } else if progress.downloadedBytes > 0 {
            report("downloaded \(progress.downloadedBytes) bytes")
        }
    }
}

private func noteID(_ text: String) throws -> NoteID { try NoteCommand.noteID(text) }
