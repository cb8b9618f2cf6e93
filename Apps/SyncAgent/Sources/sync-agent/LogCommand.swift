import ArgumentParser
import Foundation
import SyncEngine
import SyncModels

/// `sync-agent log`: the replica's sync journal (`SyncJournal`), oldest first, filtered by kind and time.
struct LogCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Print the sync journal (start, push, pull, conflict, retry, …), oldest first, filtered.")
    @OptionGroup var options: AgentOptions

    @Option(
        name: .customLong("kind"),
        help:
            "Only entries of this kind, or of its family (push: push.ok; live: live.connect, live.drop, …; verify: verify.repair, …); repeat for several."
    )
    var kinds: [String] = []

    @Option(help: "Only entries at or after this time: RFC 3339, or an age such as 90s, 15m, 2h or 3d.")
    var since: String?

    @Option(help: "The newest matching entries to print, at most.")
    var limit: Int = 100

    @Flag(help: "JSON Lines (at, kind, detail) instead of text.")
    var json = false

    func validate() throws {
        guard limit > 0 else { throw ValidationError("--limit must be at least 1") }
        if let since { _ = try Self.time(since, now: Date()) }
    }

    func run() async throws {
        let client = try options.client()
        let journal = try SyncJournal(database: client.store.database)
        let from = try since.map { try Self.time($0, now: Date()) }
        let entries = try await journal.entries(limit: journal.bounds.maxEntries + 1000).filter { entry in
            (from.map { entry.at >= $0 } ?? true) && Self.matches(entry.kind, kinds)
        }.suffix(limit)
        var output = Data()
        for entry in entries {
            if json {
                output += try CanonicalJSON.encode(entry) + Data("\n".utf8)
            } else {
                output += Data("\(RFC3339.string(from: entry.at))  \(entry.kind)  \(entry.detail)\n".utf8)
            }
        }
        FileHandle.standardOutput.write(output)
    }

    /// Whether `kind` is one of `kinds` or in the family of one (`push` matches `push.ok`); no filter
    /// matches everything.
    static func matches(_ kind: String, _ kinds: [String]) -> Bool {
        kinds.isEmpty || kinds.contains { kind == $0 || kind.hasPrefix($0 + ".") }
    }

    /// `text` as a time: RFC 3339, or an age before `now` (`90s`, `15m`, `2h`, `3d`).
    static func time(_ text: String, now: Date) throws -> Date {
        if let date = RFC3339.date(from: text) { return date }
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        if let unit = text.last, let seconds = units[unit], let count = Double(text.dropLast()), count >= 0 {
            return now.addingTimeInterval(-count * seconds)
        }
        throw ValidationError(
            "--since \(text): use an RFC 3339 time (2026-12-02T10:00:00Z) or an age (90s, 15m, 2h, 3d)")
    }
}
