import ArgumentParser
import Foundation
import SyncEngine
import SyncEventStore
import SyncStorage

/// `--crash-at STEP` (hidden): the process kills itself with SIGKILL at that step of `encrypt` or `rekey`,
/// so that tests can check what a crash there leaves.
struct CrashOption: ParsableArguments {
    @Option(help: .hidden) var crashAt: String?

    func step(_ step: EncryptionStep) {
        if crashAt == step.rawValue { kill(getpid(), SIGKILL) }
    }
}

/// `sync-agent encrypt`: encrypts a plaintext replica in place of itself.
struct EncryptCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encrypt",
        abstract:
            "Encrypt a plaintext replica's file in place under --key-file (made if missing); a crash at any instant leaves the old file or the new one."
    )
    @OptionGroup var options: AgentOptions
    @OptionGroup var crash: CrashOption

    func run() async throws {
        guard let keyFile = options.keyFile else { throw ValidationError("--key-file is required") }
        try SyncDatabase.encrypt(path: options.db, keys: FileKeyProvider(path: keyFile), onStep: crash.step)
        report("encrypted \(options.db)")
    }
}

/// `sync-agent rekey`: re-encrypts a replica under a new random key.
struct RekeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rekey",
        abstract:
            "Re-encrypt the replica's file under a new random key, stored in --key-file; a crash at any instant leaves a file that one of the two keys opens, whole."
    )
    @OptionGroup var options: AgentOptions
    @OptionGroup var crash: CrashOption

    func run() async throws {
        guard let keyFile = options.keyFile else { throw ValidationError("--key-file is required") }
        let keys = FileKeyProvider(path: keyFile)
        try SyncDatabase.rekey(path: options.db, keys: keys, onStep: crash.step)
        report("rekeyed \(options.db): key \(try keys.load().current?.fingerprint ?? "?")")
    }
}

/// `sync-agent logout`: pushes what is pending, then destroys the replica, key first.
struct LogoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout",
        abstract: """
            Push pending edits (with --server), then destroy the replica: its key first (crypto-shredding: no copy \
            of the files can be read after), then its files and blob cache. The next use of --db is a new replica \
            that bootstraps from the server.
            """)
    @OptionGroup var options: AgentOptions
    @Option(
        help: """
            Confirms that exactly this many edits, which the server does not have, are destroyed with the replica; \
            without it logout refuses while any remain (sync-agent status shows them as pending).
            """)
    var discardPending: Int?

    struct Result: Encodable {
        var destroyed: Bool
        var discarded: Int
    }

    func run() async throws {
        let pending = try await pushPending()
        guard pending == 0 || discardPending == pending else {
            report(
                "logout: \(pending) edit(s) exist only on this replica and would be lost; sync them, or confirm with"
                    + " --discard-pending \(pending)")
            throw ExitCode(1)
        }
        if let keyFile = options.keyFile ?? ProcessInfo.processInfo.environment["SYNC_STORAGE_KEY_FILE"] {
            try SyncDatabase.destroy(path: options.db, keys: FileKeyProvider(path: keyFile))
        } else {
            try SyncDatabase.removeWithCompanions(options.db)
        }
        try? FileManager.default.removeItem(atPath: options.db + ".blobs")
        try printJSON(Result(destroyed: true, discarded: pending))
    }

    /// The edits still pending once a sync (when a server is given) has pushed what it could.
    func pushPending() async throws -> Int {
        guard FileManager.default.fileExists(atPath: options.db) else { return 0 }
        let client = try options.client()
        if options.server != nil, (try await client.store.counts()[.pending] ?? 0) > 0 {
            let engine = try await options.engine(for: client)
            do { try await engine.syncNow() } catch { report("logout: the sync failed: \(error)") }
        }
        return try await client.store.counts()[.pending] ?? 0
    }
}
