import ArgumentParser
import Foundation
import NotesDomain
import NotesStore
import SyncModels

/// `sync-agent note …`: edits that work offline and return at once.
struct NoteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "note", abstract: "Create, edit and read notes (offline; nothing waits for the network).",
        subcommands: [
            Create.self, SetTitle.self, SetBody.self, Tag.self, Pin.self, View.self, Checklist.self, Delete.self,
            Resolve.self,
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

private func noteID(_ text: String) throws -> NoteID { try NoteCommand.noteID(text) }
