import ArgumentParser
import Foundation
import GRDB
import NotesDomain
import NotesStore
import SyncCRDT
import SyncEventStore
import SyncModels
import SyncTestSupport

/// `sync-bench rebuild --events N`: builds a log of N reference-domain (Notes) events, then times a full
/// rebuild of the notes projection against a plain SQLite insert of the same rows in one transaction,
/// measured in the same run, and an incremental update of 10 events.
struct RebuildCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rebuild",
        abstract: "Time a full rebuild of the notes projection from N events, next to a plain SQLite insert baseline.")

    @Option(help: "Events in the log.") var events: Int = 100_000
    @Option(help: "Distinct notes the events touch.") var notes: Int = 2_000
    @Option(help: "Timed runs of each measurement; the median is reported.") var runs: Int = 5
    @Option(help: "Directory for the database files (a temporary one by default).") var directory: String?
    @Option(help: "Time rebuilds of this existing notes store instead (no log is built, no baseline is measured).")
    var existing: String?
    @Option(help: "Threads the notes projection rebuilds on (default: one per active processor).")
    var workers: Int?

    struct Result: Codable {
        var events: Int
        var notes: Int
        /// Threads the rebuild applied events and encoded notes on.
        var workers: Int
        var runs: Int
        var rebuild_ms: Double
        /// The fastest and slowest timed rebuilds: their spread is the noise of this run.
        var rebuild_ms_min: Double
        var rebuild_ms_max: Double
        var events_per_s: Double
        var baseline_insert_ms: Double
        var rebuild_to_baseline: Double
        var incremental_10_ms: Double
        var database_bytes: Int
    }

    var projection: NotesProjection { workers.map { NotesProjection(workers: $0) } ?? NotesProjection() }

    func run() async throws {
        if let existing {
            let store = try EventStore(path: existing, projections: [projection])
            var rebuilds: [Double] = []
            for _ in 0..<runs { rebuilds.append(milliseconds(try await store.rebuild(projection: "notes"))) }
            let count = try await store.database.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM events") ?? 0
            }
            print(
                String(
                    format: "rebuild of %@ (%d events) on %d threads: %.1f ms median of %d", existing, count,
                    projection.workers, median(rebuilds), runs))
            return
        }
        let folder =
            directory.map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("sync-bench-rebuild-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { if directory == nil { try? FileManager.default.removeItem(at: folder) } }

        let store = try EventStore(
            path: folder.appendingPathComponent("rebuild.sqlite").path, projections: [projection])
        let workload = NotesWorkload(notes: notes, seed: 42)
        let logCount: Int
        do {
            let log = workload.events(count: events)
            logCount = log.count
            for start in stride(from: 0, to: log.count, by: 10_000) {
                try await store.applyConfirmed(Array(log[start..<min(start + 10_000, log.count)]), cursor: nil)
            }
        }
        // The store as an app finds it when it opens: the write-ahead log copied into the database file.
        try store.database.checkpoint()
        // The generated log is freed before the rebuilds are timed, so they run in a process holding what an
        // app would hold: for a million events it is about 2 GB of objects (the process peaks at 2.4 GB), and
        // timing beside it made the same rebuild about 20% slower. The baseline is measured after the
        // rebuilds, on the same log made again: measured before them, its 21 runs (an array of boxed values
        // per run, a synced file each) left 5,000-event rebuilds about 30% slower.
        var rebuilds: [Double] = []
        for _ in 0..<runs {
            rebuilds.append(milliseconds(try await store.rebuild(projection: "notes")))
        }
        var incrementals: [Double] = []
        let extra = NotesWorkload(notes: notes, seed: 7).events(count: 10 * runs, firstSeq: Int64(logCount) + 1)
        for run in 0..<runs {
            let page = Array(extra[(run * 10)..<(run * 10 + 10)])
            let start = ContinuousClock.now
            try await store.applyConfirmed(page, cursor: nil)
            incrementals.append(milliseconds(ContinuousClock.now - start))
        }
        var baselines: [Double] = []
        do {
            let log = workload.events(count: events)
            for run in 0..<runs {
                baselines.append(
                    try baselineInsert(log, path: folder.appendingPathComponent("baseline-\(run).sqlite").path))
            }
        }
        let rebuild = median(rebuilds)
        let baseline = median(baselines)
        let result = Result(
            events: logCount, notes: notes, workers: projection.workers, runs: runs, rebuild_ms: rebuild,
            rebuild_ms_min: rebuilds.min() ?? rebuild, rebuild_ms_max: rebuilds.max() ?? rebuild,
            events_per_s: Double(logCount) / (rebuild / 1000), baseline_insert_ms: baseline,
            rebuild_to_baseline: rebuild / baseline, incremental_10_ms: median(incrementals),
            database_bytes: try store.database.maintenance.statistics().fileBytes)
        print(
            String(
                format:
                    "rebuild of %d events (%d notes, %d threads): %.1f ms median of %d (%.0f events/s); baseline insert %.1f ms (%.2f×); incremental 10 events %.3f ms",
                result.events, notes, result.workers, rebuild, runs, result.events_per_s, baseline,
                result.rebuild_to_baseline,
                result.incremental_10_ms))
        print(String(decoding: try JSONEncoder.sortedKeys.encode(result), as: UTF8.self))
    }

    /// A plain SQLite insert of the same rows (same columns, one transaction, prepared statement).
    func baselineInsert(_ events: [Event], path: String) throws -> Double {
        try? FileManager.default.removeItem(atPath: path)
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE events (position INTEGER PRIMARY KEY, event_id TEXT NOT NULL UNIQUE, scope TEXT NOT NULL,
                        stream TEXT NOT NULL, stream_version INTEGER NOT NULL, type TEXT NOT NULL,
                        schema_version INTEGER NOT NULL, payload BLOB NOT NULL, hlc TEXT NOT NULL,
                        dot_replica TEXT NOT NULL, dot_counter INTEGER NOT NULL, seq INTEGER)
                    """)
        }
        let encoder = CanonicalJSON.encoder()
        let rows = try events.map { event in
            [
                event.id.description, event.scope.name, event.stream, event.streamVersion, event.type,
                event.schemaVersion, try encoder.encode(event.payload), event.hlc.description,
                event.dot.replica.description, Int64(event.dot.counter), event.seq,
            ] as [(any DatabaseValueConvertible)?]
        }
        let start = ContinuousClock.now
        try queue.write { db in
            let statement = try db.makeStatement(
                sql: """
                    INSERT INTO events (event_id, scope, stream, stream_version, type, schema_version, payload, hlc,
                        dot_replica, dot_counter, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
            for row in rows { try statement.execute(arguments: StatementArguments(row)) }
        }
        return milliseconds(ContinuousClock.now - start)
    }
}

/// A reproducible stream of Notes events from several devices, made the way the app makes them: each
/// event is an operation on the note's CRDT state (typing into bodies, retitling, tagging, viewing, pinning,
/// checklist items). The same seed gives the same events, ids included.
struct NotesWorkload {
    let notes: Int
    let seed: UInt64
    var scope: Scope = "bench"

    func events(count: Int, firstSeq: Int64 = 1) -> [Event] {
        var random = SplitMix64(seed: seed)
        let replicas = (0..<4).map { _ in ReplicaID.random(using: &random) }
        var states = [NoteState](repeating: NoteState(), count: notes)
        let ids = (0..<notes).map { _ in NoteID(uuid: UUID.random(using: &random)) }
        var versions = [Int64](repeating: 0, count: notes)
        var counters = [UInt64](repeating: 0, count: replicas.count)
        var generator = EventIDGenerator()
        var physical: UInt64 = 1_700_000_000_000
        var events: [Event] = []
        events.reserveCapacity(count)
        let words = ["milk", "plan", "call", "draft", "trip", "fix", "idea", "read"]
        for index in 0..<count {
            let note = Int.random(in: 0..<notes, using: &random)
            let device = Int.random(in: 0..<replicas.count, using: &random)
            let replica = replicas[device]
            counters[device] += 1
            physical += 1
            let dot = Dot(replica: replica, counter: counters[device])
            let hlc = HLCTimestamp(physical: physical, counter: 0, node: replica.high)
            var payload = NotePayload.created(.init(title: "note \(note)"))
            if states[note].created {
                let word = words[Int.random(in: 0..<words.count, using: &random)]
                switch Int.random(in: 0..<100, using: &random) {
                case 0..<30:
                    payload = .titleSet(.init(title: "\(word) \(index)"))
                case 30..<60:
                    let at = states[note].body.count
                    let op = states[note].body.insert(" \(word)", at: at, replica: replica)
                    payload = .bodyEdited(.init(ops: op.map { [$0] } ?? []))
                case 60..<70:
                    payload = .tagAdded(.init(tag: word, op: states[note].tags.add(word, replica: replica)))
                case 70..<85:
                    let next = states[note].views.increments[replica] + 1
                    let op = states[note].views.add(1, at: Dot(replica: replica, counter: next))
                    payload = .viewed(.init(count: 1, op: op))
                case 85..<90:
                    payload = .pinnedSet(.init(pinned: Bool.random(using: &random)))
                default:
                    let item = NoteID(uuid: UUID.random(using: &random)).description
                    let op = states[note].checklist.insertElement(
                        item, at: states[note].checklist.count, replica: replica)
                    payload = .checklistItemAdded(.init(item: item, text: word, op: op))
                }
            }
            states[note].apply(payload, hlc: hlc, dot: dot)
            versions[note] += 1
            events.append(
                Event(
                    id: generator.next(wall: physical, using: &random), scope: scope, stream: ids[note].stream,
                    streamVersion: versions[note], type: payload.type.rawValue, hlc: hlc, dot: dot,
                    payload: payload.json,
                    seq: firstSeq + Int64(index), receivedAt: Date(timeIntervalSince1970: Double(physical) / 1000)))
        }
        return events
    }
}

extension UUID {
    /// A version-4 UUID from `random`.
    static func random(using random: inout some RandomNumberGenerator) -> UUID {
        var bytes = (random.next(), random.next())
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = raw[6] & 0x0F | 0x40
            raw[8] = raw[8] & 0x3F | 0x80
            return UUID(uuid: raw.load(as: uuid_t.self))
        }
    }
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    return sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

extension JSONEncoder {
    static var sortedKeys: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}
