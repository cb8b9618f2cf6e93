import ArgumentParser

/// The performance suite. Build it with `swift build -c release` at the repository root and run
/// `.build/release/sync-bench <subcommand>`; every subcommand prints human-readable numbers and a JSON line.
@main
struct SyncBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-bench",
        abstract: "Benchmarks of the offline-sync stack: CRDT traces, projection rebuilds, sync throughput.",
        subcommands: [
            TraceCommand.self, ConformanceCommand.self, RebuildCommand.self, PushCommand.self, PGBaselineCommand.self,
            BootstrapCommand.self, ChurnCommand.self, FanoutCommand.self, ReportCommand.self, VerifyCommand.self,
            BlobsCommand.self, BareServerCommand.self,
        ])
}
