import ArgumentParser
import Foundation
import SyncEngine

/// `sync-agent diagnostics --out FILE`: what support needs to understand this replica's sync (its journal,
/// counts, status, schema, versions) with the user's content left out (`SyncDiagnostics`): no title, body,
/// file name, token or scope name.
struct DiagnosticsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diagnostics",
        abstract: "Write what support needs (journal, counts, status, schema, versions), without the user's content.")
    @OptionGroup var options: AgentOptions

    @Option(help: "The file to write (JSON); standard output when omitted.")
    var out: String?

    @Option(help: "The newest journal entries to include, at most.")
    var journalEntries: Int = 2000

    func run() async throws {
        let client = try options.client()
        let diagnostics = try await SyncDiagnostics.collect(
            store: client.store, blobs: try LocalBlobs(store: client.store), app: "sync-agent",
            appVersion: SyncAgent.version, journalEntries: journalEntries)
        let json = try diagnostics.json() + Data("\n".utf8)
        guard let out else {
            FileHandle.standardOutput.write(json)
            return
        }
        try json.write(to: URL(fileURLWithPath: out), options: .atomic)
        report(
            "diagnostics in \(out): \(diagnostics.journal.count) journal entries, "
                + "\(diagnostics.events.reduce(0) { $0 + $1.count }) events, no user content")
    }
}
