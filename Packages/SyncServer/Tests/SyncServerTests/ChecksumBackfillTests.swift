import Foundation
import Logging
import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Testing

@testable import SyncServer

/// A server upgraded from before checksums: its database is put in the state migration `0008-checksums`
/// leaves (the events without checksums, each scope's running sum at 0 and `checksum_from` at its head), then
/// `SyncServerApp.backfillChecksums` gives those events the checksums their pushes gave them, while pushes go
/// on, and the checksum endpoint answers for the whole scope.
@Suite struct ChecksumBackfillTests {
    /// `GET /v1/checksum`: its status and, when 200, its answer.
    static func checksum(_ server: TestServer, _ request: ChecksumRequest) async throws -> (Int, ChecksumResponse?) {
        var components = URLComponents()
        components.path = "/v1/checksum"
        components.queryItems = request.queryItems.map { URLQueryItem(name: $0.name, value: $0.value) }
        let response = try await server.send(
            .get, components.string!, headers: try await server.bearer([request.scope.name]))
        guard response.status == .ok else { return (Int(response.status.code), nil) }
        return (200, try server.decode(ChecksumResponse.self, response))
    }

    static func events(_ count: Int, scope: Scope, tag: String) -> [Event] {
        (0..<count).map { index in
            EventFixtures.event(
                scope: scope, stream: EventFixtures.stream(),
                payload: .object([
                    "title": .string("\(tag) \(index) — é ✓"), "body": .string(String(repeating: "x", count: index)),
                ]))
        }
    }

    /// What the migration leaves for a scope that held events: none has a checksum, the running sum is 0 and
    /// `checksum_from` is the head.
    static func forgetChecksums(of scopes: [String], in server: TestServer) async throws {
        try await server.database.execute("UPDATE events SET checksum = NULL WHERE scope = ANY(\(scopes)::text[])")
        try await server.database.execute(
            "UPDATE scopes SET checksum = 0, checksum_from = head WHERE scope = ANY(\(scopes)::text[])")
    }

    static func backfill(_ server: TestServer, batch: Int) async throws -> ChecksumBackfillReport {
        var configuration = ServerConfiguration()
        configuration.databaseURL = server.database.url.urlString
        configuration.citus = TestServer.onCitus
        var logger = Logger(label: "backfill-test")
        logger.logLevel = .warning
        return try await SyncServerApp.backfillChecksums(
            configuration: configuration, domain: TestDomain(), scopes: nil, batchEvents: batch, logger: logger)
    }

    @Test func eventsStoredBeforeChecksumsGetThoseTheirPushesGave() async throws {
        try await TestServer.run(domain: TestDomain()) { server in
            let old: Scope = "upgraded"
            for round in 0..<5 {
                _ = try await server.push(Self.events(30, scope: old, tag: "r\(round)"), scopes: [old.name])
            }
            let pushed = try await server.database.integers(
                "SELECT checksum FROM events WHERE scope = \(old.name) ORDER BY seq")
            #expect(pushed.count == 150)
            let total = try await server.database.integers("SELECT checksum FROM scopes WHERE scope = \(old.name)")
            #expect(total == [pushed.reduce(0, +)])

            try await Self.forgetChecksums(of: [old.name], in: server)
            let (refused, _) = try await Self.checksum(server, ChecksumRequest(scope: old, through: 150))
            #expect(refused == 409, "a prefix over events without checksums is unavailable")
            // After the upgrade: these have checksums from their pushes.
            _ = try await server.push(Self.events(20, scope: old, tag: "after"), scopes: [old.name])

            // The backfill, in batches of 32, while pushes go on.
            let report = try await withThrowingTaskGroup(of: ChecksumBackfillReport?.self) { group in
                group.addTask {
                    for round in 0..<4 {
                        _ = try await server.push(
                            Self.events(10, scope: old, tag: "during \(round)"), scopes: [old.name])
                    }
                    return nil
                }
                group.addTask { try await Self.backfill(server, batch: 32) }
                var report: ChecksumBackfillReport?
                for try await value in group where value != nil { report = value }
                return try #require(report)
            }
            #expect(
                report.scopes
                    == [ChecksumBackfill.ScopeReport(scope: old.name, events: 150, checksumFrom: 0, skipped: nil)])

            let backfilled = try await server.database.integers(
                "SELECT checksum FROM events WHERE scope = \(old.name) AND seq <= 150 ORDER BY seq")
            let differing = zip(backfilled, pushed).filter { $0 != $1 }.count
            #expect(
                backfilled.count == pushed.count && differing == 0,
                "\(differing) of \(backfilled.count) checksums differ from those the pushes computed")
            let missing = try await server.database.integers(
                "SELECT count(*) FROM events WHERE scope = \(old.name) AND checksum IS NULL")
            #expect(missing == [0])
            let all = try await server.database.integers(
                "SELECT checksum FROM events WHERE scope = \(old.name) ORDER BY seq")
            #expect(all.count == 210)
            let running = try await server.database.integers(
                "SELECT checksum FROM scopes WHERE scope = \(old.name)")
            #expect(running == [all.reduce(0, +)], "the running sum counts every event")

            // Every prefix and range is answered, and adds up the rows.
            for through in [1, 64, 150, 151, 210] as [Int64] {
                let (status, answer) = try await Self.checksum(server, ChecksumRequest(scope: old, through: through))
                #expect(status == 200)
                #expect(answer?.checksum == all.prefix(Int(through)).reduce(0, +), "prefix through \(through)")
            }
            let (status, range) = try await Self.checksum(server, ChecksumRequest(scope: old, after: 40, through: 170))
            #expect(status == 200 && range?.checksum == all[40..<170].reduce(0, +) && range?.events == 130)

            // Again: nothing left to do.
            #expect(try await Self.backfill(server, batch: 32).scopes.isEmpty)
        }
    }

    /// A scope folded while its events had no checksums keeps `checksum_from`: what its snapshots replaced
    /// is gone, so its running sum cannot be made whole. It is reported and left as it was; the other scopes
    /// are made whole.
    @Test func aScopeFoldedBeforeChecksumsIsReportedAndLeftAsItIs() async throws {
        try await TestServer.run(domain: TestDomain()) { server in
            let folded: Scope = "folded-before"
            let whole: Scope = "whole"
            _ = try await server.push(Self.events(40, scope: folded, tag: "f"), scopes: [folded.name])
            _ = try await server.push(Self.events(5, scope: whole, tag: "w"), scopes: [whole.name])
            try await Self.forgetChecksums(of: [folded.name, whole.name], in: server)
            // As a fold through seq 10 would have left it (its rows are not needed to tell).
            try await server.database.execute(
                "INSERT INTO scope_compaction (scope, compacted_through) VALUES (\(folded.name), 10)")

            let report = try await Self.backfill(server, batch: 1000)
            #expect(report.scopes.map(\.scope) == [folded.name, whole.name])
            let skipped = report.scopes[0]
            #expect(skipped.events == 0 && skipped.checksumFrom == 40 && skipped.skipped?.contains("compacted") == true)
            #expect(report.scopes[1] == .init(scope: whole.name, events: 5, checksumFrom: 0, skipped: nil))
            let untouched = try await server.database.integers(
                "SELECT count(*) FROM events WHERE scope = \(folded.name) AND checksum IS NULL")
            #expect(untouched == [40])
            let (status, _) = try await Self.checksum(server, ChecksumRequest(scope: folded, through: 40))
            #expect(status == 409)
        }
    }
}
