import ArgumentParser
import Foundation
import NotesDomain
import NotesStore
import SyncEngine
import SyncEventStore
import SyncModels
import Synchronization

/// `sync-agent sync`: push and pull until nothing is left, then exit.
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync", abstract: "Push pending edits and pull until both sides are drained; exit 1 on failure.")
    @OptionGroup var options: AgentOptions

    func run() async throws {
        let client = try options.client()
        let progress = PullProgress()
        let engine = try await options.engine(for: client, onRound: progress.record)
        try await syncOrExit(engine)
        let status = engine.status
        report("synced: \(status.pending) pending, \(status.rejected) rejected")
    }
}

/// Reports a long pull's progress on standard error, at most once a second: events pulled of the total the
/// server's `remaining` implies.
final class PullProgress: Sendable {
    private struct State {
        var pulled = 0
        var lastReport: ContinuousClock.Instant?
    }
    private let state = Mutex(State())

    @Sendable func record(_ round: SyncRound) {
        let line = state.withLock { state -> String? in
            state.pulled += round.pulled
            guard let remaining = round.remaining, remaining > 0 else { return nil }
            let now = ContinuousClock.now
            if let last = state.lastReport, now - last < .seconds(1) { return nil }
            state.lastReport = now
            let total = state.pulled + remaining
            return "pulled \(state.pulled) of \(total) events (\(state.pulled * 100 / max(total, 1))%)"
        }
        if let line { report(line) }
    }
}

/// `sync-agent run`: stay up and sync continuously; optionally edit like a user.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Sync continuously until interrupted (Ctrl-C); optionally simulate a user.")
    @OptionGroup var options: AgentOptions
    @Option(help: "Simulated edits per second (0: none).") var simulate: Double = 0
    @Option(help: "The scope simulated edits go to.") var scope: String = "demo"
    @Option(help: "Stop after this many seconds (0: run until interrupted).") var duration: Double = 0
    @Flag(
        inversion: .prefixedNo,
        help: "Hold the live stream (GET /v1/live): others' edits arrive as they commit. --no-live long-polls instead.")
    var live = true

    func run() async throws {
        let client = try options.client()
        let engine = try await options.engine(for: client, live: live)
        let scope = try Scope(scope)
        let simulate = simulate
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await engine.run() }
            group.addTask {
                // A line when an error or rejection appears or clears, or the live stream connects or drops, and
                // otherwise at most every 5 seconds.
                var updates = engine.statusUpdates().makeAsyncIterator()
                var lastLine = ContinuousClock.now - .seconds(10)
                var lastKey = ""
                while let status = await updates.next() {
                    let key =
                        "\(status.rejected) \(status.lastError ?? "") \(status.liveConnected) \(status.longPolling)"
                    guard key != lastKey || ContinuousClock.now - lastLine >= .seconds(5) else { continue }
                    lastKey = key
                    lastLine = ContinuousClock.now
                    let link = status.liveConnected ? "live" : status.longPolling ? "long-poll" : "not live"
                    report(
                        "pending \(status.pending), rejected \(status.rejected), cycles \(status.cycles), \(link), sent \(status.traffic.sentWire) B"
                            + (status.lastError.map { ", last error: \($0)" } ?? ""))
                }
            }
            if simulate > 0 {
                group.addTask { try await UserSimulator(client: client, scope: scope).run(ratePerSecond: simulate) }
            }
            group.addTask {
                await InterruptSignal.wait(seconds: duration)
                throw CancellationError()
            }
            do {
                try await group.next()
            } catch is CancellationError {}
            group.cancelAll()
        }
        report("stopped; \(engine.status.pending) edits pending")
    }
}

/// `sync-agent status`: JSON of the replica's sync state, read from its database.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "Print the sync state as JSON.")
    @OptionGroup var options: AgentOptions

    struct Status: Encodable {
        struct Rejected: Encodable {
            var id: String
            var stream: String
            var type: String
            var code: String
            var message: String
        }
        var replica: String
        var pending: Int
        var confirmed: Int
        var rejected: [Rejected]
        var cursor: String?
        var lastSuccess: Date?
        var lastError: String?
        var journal: [SyncJournal.Entry]
        /// The database file's size, and what the last `compact`, or purge of what a pull folded on arrival,
        /// did (its journal line).
        var fileBytes: Int
        var lastCompaction: SyncJournal.Entry?
        /// Notes with an open conflict (`sync-agent conflicts` lists them).
        var openConflicts: Int
    }

    func run() async throws {
        let client = try options.client()
        let store = client.store
        let journal = try SyncJournal(database: store.database)
        let entries = try await journal.entries(limit: 20)
        let counts = try await store.counts()
        let lastSuccess = entries.last { $0.kind == "push.ok" || $0.kind == "pull.ok" }?.at
        let lastFailure = entries.last { ["retry", "pause", "error", "reset"].contains($0.kind) }
        try printJSON(
            Status(
                replica: store.replica.description, pending: counts[.pending] ?? 0, confirmed: counts[.confirmed] ?? 0,
                rejected: try await store.rejectedEvents().map {
                    .init(
                        id: $0.event.id.description, stream: $0.event.stream, type: $0.event.type,
                        code: $0.rejection?.code ?? "", message: $0.rejection?.message ?? "")
                },
                cursor: try await store.cursor(), lastSuccess: lastSuccess,
                lastError: lastFailure.flatMap { failure in
                    (lastSuccess.map { failure.at > $0 } ?? true) ? "\(failure.kind): \(failure.detail)" : nil
                },
                journal: entries, fileBytes: try store.database.maintenance.statistics().fileBytes,
                lastCompaction: try await journal.entries(limit: 10_000).last {
                    $0.kind == "compact" || $0.kind == "fold.purge"
                }, openConflicts: try await store.streamsInConflict().count))
    }
}

/// `sync-agent verify`: sync, then compare each scope's checksums with the server's and, unless
/// `--no-repair`, repair what differs (`SyncEngine.verify`); print what was found as JSON. Exits 1 when a
/// scope still differs.
struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Sync, then check each scope against the server's checksums and repair what differs; print JSON.")
    @OptionGroup var options: AgentOptions
    @Flag(name: .customLong("repair"), inversion: .prefixedNo, help: "Repair the ranges that differ (the default).")
    var repair = true
    @Flag(help: "Compare the sums only, without recomputing every row's checksum (finds lost rows, not altered ones).")
    var quick = false

    func run() async throws {
        let client = try options.client()
        let engine = try await options.engine(for: client)
        try await syncOrExit(engine)
        let results = try await engine.verify(repair: repair, deep: !quick)
        try printJSON(results)
        if results.contains(where: { $0.outcome == .mismatched }) { throw ExitCode(1) }
    }
}

/// `sync-agent compact`: sync (which brings the server's stable points), then fold the confirmed history at
/// or below them into the projections' snapshots, delete it and give the space back.
struct CompactCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Sync, then prune the history every replica has acknowledged; print what was freed as JSON.")
    @OptionGroup var options: AgentOptions

    struct Report: Encodable {
        var foldedEvents: Int
        var pagesFreed: Int
        var bytesBefore: Int
        var bytesAfter: Int
        var stablePoints: [String: Int64]
    }

    func run() async throws {
        let client = try options.client()
        let engine = try await options.engine(for: client)
        try await syncOrExit(engine)
        let before = try client.store.database.maintenance.statistics().fileBytes
        let pruned = try await engine.compact()
        try printJSON(
            Report(
                foldedEvents: pruned?.foldedEvents ?? 0, pagesFreed: pruned?.pagesFreed ?? 0, bytesBefore: before,
                bytesAfter: try client.store.database.maintenance.statistics().fileBytes,
                stablePoints: engine.status.stablePoints))
    }
}

/// `sync-agent export`: the notes' state, or the whole event log.
struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export", abstract: "Print the notes' state as canonical JSON, or write the event log.")
    @OptionGroup var options: AgentOptions
    @Flag(help: "Print every note's state as canonical JSON (identical bytes on converged replicas).")
    var state = false
    @Option(help: "Write the event log as gzip JSON Lines to this file.") var events: String?

    func validate() throws {
        guard state != (events != nil) else { throw ValidationError("give exactly one of --state or --events FILE") }
    }

    func run() async throws {
        let client = try options.client()
        if state {
            FileHandle.standardOutput.write(try await client.exportState() + Data("\n".utf8))
        } else if let events {
            let count = try await client.store.export(to: URL(fileURLWithPath: events))
            report("exported \(count) events to \(events)")
        }
    }
}

/// `sync-agent replay --until SEQ`: the notes as they were at a point of the server's order.
struct ReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Print the notes' state as of server sequence SEQ (on a scratch copy; the replica is untouched).")
    @OptionGroup var options: AgentOptions
    @Option(help: "The last server seq to include (per scope).") var until: Int64

    func run() async throws {
        let client = try options.client()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("sync-agent-replay-\(UUID())")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let log = scratch.appendingPathComponent("log.jsonl.gz")
        try await client.store.export(to: log)
        let copy = try NotesClient.open(path: scratch.appendingPathComponent("replay.sqlite").path)
        try await copy.store.importLog(from: log)
        try await copy.store.replay(until: .seq(until))
        FileHandle.standardOutput.write(try await copy.exportState() + Data("\n".utf8))
    }
}

/// `sync-agent rebuild`: rebuild the projections from the log and print the time it took.
struct RebuildCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rebuild", abstract: "Rebuild the notes projection from the event log and print how long it took.")
    @OptionGroup var options: AgentOptions

    func run() async throws {
        let client = try options.client()
        let counts = try await client.store.counts()
        let elapsed = try await client.store.rebuildAll()
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        print(String(format: "rebuilt %d events in %.1f ms", counts.values.reduce(0, +), milliseconds))
    }
}

/// One sync, or the failure on standard error and exit code 1: what a command that works on the synced
/// store does first.
func syncOrExit(_ engine: SyncEngine) async throws {
    do {
        try await engine.syncNow()
    } catch {
        report("sync failed: \(error)")
        throw ExitCode(1)
    }
}
