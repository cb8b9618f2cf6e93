import ArgumentParser
import AsyncHTTPClient
import Foundation
import GRDB
import NotesStore
import SyncEngine
import SyncEngineHTTPClient
import SyncEventStore
import SyncModels

/// `sync-bench verify`: what verifying a device against the server's checksums costs (docs/ARCHITECTURE.md,
/// "Verification and repair").
///
/// Pushes a log of `--events` events into one scope (`bench-0`), pulls it into a device that keeps every
/// row, then measures, in the device's process:
/// - a verification when nothing is wrong (`verify(repair: false)`: the sums and one request), `--runs` times;
/// - a deep one (every row's checksum recomputed, the projections' rows digested and rebuilt);
/// - a repair: `--damage` consecutive confirmed rows deleted from the middle of the log behind the store's
///   back, then `verify()`: how many events it pulled again, against the range.
struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "The device CPU of a verification against the server's checksums, and what a repair pulls again.")

    @Option(help: "Base URL of the server.") var server: String = "http://127.0.0.1:8080"
    @Option(help: "Bearer token granting bench-0 (or SYNC_TOKEN).") var token: String?
    @Option(help: "Events to push first (0: the server already holds the log in bench-0).") var events = 1_000_000
    @Option(help: "Notes the events edit.") var notes = 10_000
    @Option(help: "Verifications measured when nothing is wrong.") var runs = 5
    @Option(help: "Consecutive confirmed rows deleted from the middle of the device's log.") var damage = 1_000
    @Flag(help: "Print one JSON object instead of text.") var json = false

    struct Report: Codable {
        var events: Int
        var deviceRows: Int
        /// Device CPU (user and system) of each verification with nothing wrong, in milliseconds.
        var quickCPUMilliseconds: [Double]
        var quickWallMilliseconds: [Double]
        var deepCPUMilliseconds: Double
        var deepWallMilliseconds: Double
        var damagedRows: Int
        var repairedRanges: Int
        var downloadedEvents: Int
        var repairCPUMilliseconds: Double
        var repairWallMilliseconds: Double
        var matchedAfterRepair: Bool

        var text: String {
            let quickCPU = quickCPUMilliseconds.sorted()[quickCPUMilliseconds.count / 2]
            let quickWall = quickWallMilliseconds.sorted()[quickWallMilliseconds.count / 2]
            return """
                verify: \(events) events in one scope, \(deviceRows) rows on the device
                  nothing wrong:  median \(String(format: "%.2f", quickCPU)) ms device CPU, \(String(format: "%.2f", quickWall)) ms wall (\(quickCPUMilliseconds.count) runs)
                  deep:           \(String(format: "%.0f", deepCPUMilliseconds)) ms device CPU, \(String(format: "%.0f", deepWallMilliseconds)) ms wall
                  repair:         \(damagedRows) rows deleted; \(repairedRanges) ranges repaired, \(downloadedEvents) events pulled again (\(String(format: "%.2f", Double(downloadedEvents) / Double(max(damagedRows, 1))))x the damage), \(String(format: "%.0f", repairCPUMilliseconds)) ms device CPU, \(String(format: "%.0f", repairWallMilliseconds)) ms wall; matched after: \(matchedAfterRepair)
                """
        }
    }

    func run() async throws {
        guard let token = token ?? ProcessInfo.processInfo.environment["SYNC_TOKEN"] else {
            throw ValidationError("pass --token or set SYNC_TOKEN (sync-server token --sub bench --scopes bench-0)")
        }
        let base = server.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        if events > 0 {
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            do {
                let push = try BootstrapCommand.parse([
                    "--server", base, "--token", token, "--events", String(events), "--scopes", "1", "--notes",
                    String(notes),
                ])
                _ = try await push.pushLog(base: base, token: token, http: http)
                try await http.shutdown()
            } catch {
                try? await http.shutdown()
                throw error
            }
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-bench-verify-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let client = try NotesClient.open(path: folder.appendingPathComponent("device.sqlite").path)
        let scope = try Scope("bench-0")
        var configuration = SyncEngine.Configuration(scopes: [scope])
        configuration.autoCompactAfter = nil  // every row stays: the most a deep verification and a repair read
        configuration.verifyInterval = nil
        configuration.maxPageSize = 5_000
        let engine = try SyncEngine(
            store: client.store, transport: HTTPClientTransport(baseURL: URL(string: base)!, token: token),
            configuration: configuration)
        try await engine.syncNow()

        func measured<T>(_ body: () async throws -> T) async throws -> (T, cpu: Double, wall: Double) {
            let cpu = CPUTime.now
            let start = ContinuousClock.now
            let value = try await body()
            let wall = ContinuousClock.now - start
            return (
                value, (CPUTime.now - cpu) * 1000,
                Double(wall.components.attoseconds) / 1e15
                    + Double(wall.components.seconds) * 1000
            )
        }
        var quickCPU: [Double] = []
        var quickWall: [Double] = []
        for _ in 0..<max(runs, 1) {
            let (results, cpu, wall) = try await measured { try await engine.verify(repair: false) }
            guard results.allSatisfy({ $0.outcome == .matched }) else {
                throw ValidationError("the device does not match the server before any damage: \(results)")
            }
            quickCPU.append(cpu)
            quickWall.append(wall)
        }
        let (_, deepCPU, deepWall) = try await measured { try await engine.verify(repair: false, deep: true) }

        let rows = try await client.store.database.writer.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM events WHERE status = 'confirmed'") ?? 0
        }
        let deleted = try await client.store.database.writer.write { [damage] db -> Int in
            let middle =
                try Int64.fetchOne(
                    db, sql: "SELECT seq FROM events WHERE status = 'confirmed' ORDER BY seq LIMIT 1 OFFSET ?",
                    arguments: [rows / 2]) ?? 0
            try db.execute(
                sql: "DELETE FROM events WHERE status = 'confirmed' AND scope = ? AND seq > ? AND seq <= ?",
                arguments: [scope.name, middle, middle + Int64(damage)])
            return db.changesCount
        }
        let (repaired, repairCPU, repairWall) = try await measured { try await engine.verify() }
        let after = try await engine.verify(repair: false)
        let report = Report(
            events: events, deviceRows: rows, quickCPUMilliseconds: quickCPU, quickWallMilliseconds: quickWall,
            deepCPUMilliseconds: deepCPU, deepWallMilliseconds: deepWall, damagedRows: deleted,
            repairedRanges: repaired.reduce(0) { $0 + $1.repairs.count },
            downloadedEvents: repaired.reduce(0) { $0 + $1.downloaded }, repairCPUMilliseconds: repairCPU,
            repairWallMilliseconds: repairWall, matchedAfterRepair: after.allSatisfy { $0.outcome == .matched })
        if json {
            print(String(decoding: try JSONEncoder.sortedKeys.encode(report), as: UTF8.self))
        } else {
            print(report.text)
        }
    }
}
