import ArgumentParser
import Foundation
import NotesDomain
import NotesStore

/// `sync-agent conflicts`: the open conflicts of this replica's notes, values written on devices that did
/// not see each other, all kept for review (`note resolve` closes one).
struct ConflictsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "List the notes' open conflicts: concurrent values kept for review, the shown one marked *.")
    @OptionGroup var options: AgentOptions
    @Flag(help: "Print canonical JSON (an array of {note, field, values, winner}) instead of a table.")
    var json = false

    func run() async throws {
        let conflicts = try await options.client().conflicts()
        if json {
            try printJSON(conflicts)
        } else {
            print(Self.table(conflicts), terminator: "")
        }
    }

    /// One line per value: the note and field on the first line of each conflict, `*` on the value shown.
    static func table(_ conflicts: [NoteConflict]) -> String {
        guard !conflicts.isEmpty else { return "no open conflicts\n" }
        var rows = [["NOTE", "FIELD", "", "VALUE", "REPLICA", "HLC"]]
        for conflict in conflicts {
            for (index, value) in conflict.values.enumerated() {
                rows.append([
                    index == 0 ? conflict.note.description : "", index == 0 ? conflict.field.rawValue : "",
                    index == 0 ? "*" : "", Self.quoted(value.value), value.replica.description, value.hlc.description,
                ])
            }
        }
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.indices.map { column in
                column == row.count - 1
                    ? row[column] : row[column].padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }
            .joined(separator: "  ") + "\n"
        }
        .joined()
    }

    /// A value on one line: quoted, with its line breaks, tabs and quotes escaped.
    static func quoted(_ value: String) -> String {
        let escaped = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n").replacingOccurrences(of: "\t", with: "\\t")
            .replacingOccurrences(of: "\r", with: "\\r")
        return "\"\(escaped)\""
    }
}
