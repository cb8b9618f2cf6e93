import ArgumentParser
import Foundation
import Logging
import PostgresNIO
import SyncModels

/// Gives the events stored before migration `0008-checksums` their checksums, so that a server upgraded
/// from before it answers every checksum (docs/PROTOCOL.md, "Checksums"), and its devices can verify the
/// whole of such a scope, not only what came after the upgrade.
///
/// The migration left each scope that held events a `checksum_from` (its head then): the events at or
/// below it have no checksum, and the scope's running sum (`scopes.checksum`) counts only what came after.
/// A pass computes, one transaction per batch, the checksums of the scope's highest `batchEvents` such
/// events the way a push does (`EventChecksum` over the event's fields and its payload text, the bytes the
/// wire carries and a device hashes), writes them, adds their sum to the running sum and lowers
/// `checksum_from` below them. Ranges above the new `checksum_from` are answered at once; the scope's prefix,
/// once it reaches 0. Pushes go on meanwhile (they write above the head only), and a pass that stops midway
/// resumes where it was, in the same transaction as its writes.
///
/// A scope that compaction folded while its events had no checksums cannot be completed: the folded
/// snapshots carry no sum (`carries` is unknown), and what a purge dropped was counted as 0. It is left as it
/// is and reported (`ScopeReport.skipped`); its ranges above the folded point keep being answered. Each batch
/// holds the scope's compaction lock, so a compactor never folds a window the pass is halfway through.
public struct ChecksumBackfill: Sendable {
    /// What the pass did for one scope.
    public struct ScopeReport: Sendable, Codable, Hashable {
        public var scope: String
        /// Events given their checksum by this pass.
        public var events: Int
        /// The scope's `checksum_from` after the pass: 0 when every event has its checksum.
        public var checksumFrom: Int64
        /// Why the scope was left as it was, or nil.
        public var skipped: String?
    }

    let database: Database
    let batchEvents: Int
    let logger: Logger

    init(database: Database, batchEvents: Int = 2000, logger: Logger) {
        self.database = database
        self.batchEvents = max(1, batchEvents)
        self.logger = logger
    }

    /// The scopes that hold events without checksums.
    func candidates() async throws -> [String] {
        try await database.withConnection { [logger] connection in
            var names: [String] = []
            for try await name in try await connection.checkedQuery(
                "SELECT scope FROM scopes WHERE checksum_from > 0 ORDER BY scope", logger: logger
            ).decode(String.self) { names.append(name) }
            return names
        }
    }

    /// Backfills `scope` to the end, batch after batch.
    func backfill(scope: String) async throws -> ScopeReport {
        var report = ScopeReport(scope: scope, events: 0, checksumFrom: 0)
        while true {
            let batch = try await nextBatch(scope: scope)
            report.events += batch.events
            report.checksumFrom = batch.checksumFrom
            report.skipped = batch.skipped
            if batch.events == 0 || batch.checksumFrom == 0 || batch.skipped != nil { break }
        }
        logger.info(
            "checksums backfilled",
            metadata: [
                "sync.scope": "\(scope)", "sync.backfill.events": "\(report.events)",
                "sync.backfill.checksum_from": "\(report.checksumFrom)",
            ])
        return report
    }

    /// One transaction: the checksums of the scope's highest `batchEvents` events below `checksum_from`.
    func nextBatch(scope: String) async throws -> (events: Int, checksumFrom: Int64, skipped: String?) {
        try await database.withTransaction(logger: logger) { [logger, batchEvents] connection in
            // The compactor's lock (`Compactor.foldWindow`): no window folds this scope meanwhile.
            try await connection.checkedQuery(
                "SELECT pg_advisory_xact_lock(hashtextextended('sync.compaction:' || \(scope), 0))", logger: logger)
            var state: (from: Int64, folded: Int64)?
            for try await row in try await connection.checkedQuery(
                """
                SELECT s.checksum_from, coalesce(c.compacted_through, 0)
                FROM scopes s LEFT JOIN scope_compaction c ON c.scope = s.scope
                WHERE s.scope = \(scope)
                """, logger: logger
            ).decode((Int64, Int64).self) { state = row }
            guard let (from, folded) = state else { return (0, 0, "no such scope") }
            guard from > 0 else { return (0, 0, nil) }
            guard folded == 0 else {
                return (
                    0, from,
                    "compacted through \(folded) while its events through \(from) had no checksums: the sums of what was folded are unknown"
                )
            }
            let rows = try await connection.checkedQuery(
                """
                SELECT seq, event_id, stream, stream_version, type, schema_version, hlc, dot_replica, dot_counter,
                       payload::text, received_at
                FROM events WHERE scope = \(scope) AND seq <= \(from) AND checksum IS NULL
                ORDER BY seq DESC LIMIT \(Int64(batchEvents))
                """, logger: logger)
            var seqs: [Int64] = []
            var checksums: [Int64] = []
            let name = try Scope(scope)
            for try await row in rows {
                let stored = try StoredEvent(pulled: row, scope: name)
                let hlc = try HLCTimestamp(stored.hlc)
                let dot = Dot(replica: try ReplicaID(stored.dotReplica), counter: UInt64(bitPattern: stored.dotCounter))
                var text = stored.payloadJSON
                let checksum = text.withUTF8 { bytes in
                    EventChecksum.of(
                        id: stored.id, stream: stored.stream, type: stored.type,
                        schemaVersion: Int(stored.schemaVersion), hlc: hlc, dot: dot,
                        payload: UnsafeRawBufferPointer(bytes))
                }
                seqs.append(stored.seq)
                checksums.append(checksum)
            }
            if !seqs.isEmpty {
                try await connection.checkedQuery(
                    """
                    UPDATE events SET checksum = v.checksum
                    FROM unnest(\(seqs)::int8[], \(checksums)::int8[]) AS v(seq, checksum)
                    WHERE events.scope = \(scope) AND events.seq = v.seq
                    """, logger: logger)
            }
            // Below the batch's lowest seq, or 0 when it was the last.
            let lowered = seqs.count < batchEvents ? 0 : seqs[seqs.count - 1] - 1
            try await connection.checkedQuery(
                """
                UPDATE scopes SET checksum = checksum + \(checksums.reduce(0, +)), checksum_from = \(lowered)
                WHERE scope = \(scope)
                """, logger: logger)
            return (seqs.count, lowered, nil)
        }
    }
}

/// What `sync-server backfill-checksums` did, printed as JSON.
public struct ChecksumBackfillReport: Sendable, Codable, Hashable {
    /// One entry per scope that held events without checksums.
    public var scopes: [ChecksumBackfill.ScopeReport]
    public var seconds: Double
}

extension SyncServerApp {
    /// Gives the events stored before migration `0008-checksums` their checksums, in `scopes` (every scope
    /// that holds such events when nil), `batchEvents` per transaction (`ChecksumBackfill`): what
    /// `sync-server backfill-checksums` runs. Applies pending migrations first. Safe beside running servers
    /// and compactors, and to run again: a scope already whole is left alone.
    public static func backfillChecksums(
        configuration: ServerConfiguration, domain: any SyncDomain, scopes: [String]?, batchEvents: Int = 2000,
        logger: Logger
    ) async throws -> ChecksumBackfillReport {
        let started = ContinuousClock.now
        return try await withMigratedDatabase(configuration: configuration, domain: domain, logger: logger) {
            database in
            let backfill = ChecksumBackfill(database: database, batchEvents: batchEvents, logger: logger)
            var reports: [ChecksumBackfill.ScopeReport] = []
            var names = scopes ?? []
            if scopes == nil { names = try await backfill.candidates() }
            for scope in names {
                reports.append(try await backfill.backfill(scope: scope))
            }
            return ChecksumBackfillReport(scopes: reports, seconds: (ContinuousClock.now - started) / .seconds(1))
        }
    }
}

/// `backfill-checksums [--scope S …] [--batch N]`: gives the events stored before the server kept checksums
/// theirs, printed as JSON (`ChecksumBackfillReport`). A server executable adds it among its subcommands
/// with its domain, as it does `CompactOptions`.
public struct BackfillChecksumsOptions: ParsableArguments {
    @OptionGroup public var common: CommonOptions

    @Option(help: "PostgreSQL URL postgres://user@host:port/database (SYNC_DATABASE_URL).")
    public var databaseURL: String?

    @Option(name: .customLong("scope"), help: "A scope to backfill (repeatable; default: every scope that needs it).")
    public var scopes: [String] = []

    @Option(help: "Events per transaction.")
    public var batch: Int = 2000

    public init() {}

    /// Runs the pass and prints its report.
    public func run(domain: any SyncDomain) async throws {
        var configuration = try common.configuration(environment: ProcessInfo.processInfo.environment)
        if let databaseURL { configuration.databaseURL = databaseURL }
        guard batch > 0 else { throw ValidationError("--batch must be at least 1") }
        configuration.logFormat.bootstrap()
        var logger = Logger(label: "sync-server")
        logger.logLevel = Logger.Level(rawValue: configuration.logLevel) ?? .notice
        try printJSON(
            try await SyncServerApp.backfillChecksums(
                configuration: configuration, domain: domain, scopes: scopes.isEmpty ? nil : scopes,
                batchEvents: batch, logger: logger))
    }
}
