import Foundation
import Testing

/// `sync-load` end to end against a real server and PostgreSQL: a short run with faults, offline spells and
/// crashes passes its verdict and writes its reports; and the verifier catches what it claims to when the
/// server's database or a device is tampered with behind their backs.
@Suite(.serialized) struct LoadTests {
    struct Report: Decodable {
        struct Step: Decodable {
            struct Latency: Decodable { var count: Int, p50: Int, p99: Int }
            struct Verdict: Decodable {
                var passed: Bool
                var serverEvents: Int
                var deviceEvents: Int
                var rejected: Int
                var rejectedByCode: [String: Int]
                var lost: Int
                var duplicated: Int
                var diverged: Int
                var delivery: Int?
                var checksums: Int?
                var repairs: Int?
                var blobsChecked: Int?
                var blobsCollected: Int?
                var orphans: Int?
            }
            struct Bytes: Decodable { var sentWire: Int, receivedWire: Int }
            var devices: Int
            var replicas: Int?
            var scopes: Int
            var bytes: Bytes
            var edits: Int
            var accepted: Int
            var writeToVisibleMs: Latency
            var faults: [String: Int]
            var offlineSpells: Int
            var crashes: Int
            var corruptions: Int?
            var tokensRenewed: Int?
            var label: String
            var verdict: Verdict
        }
        var tool: String
        var configuration: Configuration
        var steps: [Step]
        struct Configuration: Decodable { var seed: UInt64 }
    }

    static var load: String { Stack.productsDirectory.appendingPathComponent("sync-load").path }

    /// The server folds nothing here: the verdict reads back every event the devices made.
    static func stack(noteQuota: Int = 100_000) async throws -> Stack {
        try await Stack(noteQuota: noteQuota, serverEnvironment: ["SYNC_COMPACTION_INTERVAL_SECONDS": "0"])
    }

    func run(_ stack: Stack, _ arguments: [String], command: String = "run") async throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        try await Stack.runCapturing(
            Self.load, [command, "--server", stack.serverURL, "--jwt-secret", Stack.secret] + arguments)
    }

    /// Thin devices and full replicas together, with faults, offline spells and the replicas' crashes. A
    /// quota of two live notes per scope makes the server reject creations past it: the verdict also
    /// proves those are rolled back on the replicas (every replica equals a fresh bootstrap) and absent from
    /// the server, and that every thin device received its scope's log exactly. After the verdict's other
    /// checks, `sync-server compact` folds and collects: no blob that only deleted notes referred to is left,
    /// and every blob a live note refers to is still there.
    /// Its full replicas run encrypted at rest (`--encrypt-replicas`), so the verdict covers encrypted devices.
    @Test func aMixedRunWithFaultsPassesTheVerdictAndWritesItsReports() async throws {
        let stack = try await Self.stack(noteQuota: 2)
        let out = stack.directory.appendingPathComponent("report")
        let server = Stack.productsDirectory.appendingPathComponent("sync-server").path
        let collect =
            "SYNC_DATABASE_URL='\(stack.databaseURL)' SYNC_BLOB_COLLECT_AFTER_SECONDS=0 SYNC_EVICTION_HORIZON_SECONDS=1 SYNC_LOG_LEVEL=error "
            + "'\(server)' compact >/dev/null"
        let result = try await run(
            stack,
            [
                "--devices", "30", "--replicas", "12", "--scopes", "4", "--duration", "6", "--ramp-up", "1",
                "--rate", "2", "--faults", "0.15", "--offline", "0.2", "--offline-min", "0.5", "--offline-max", "2",
                "--crash-interval", "4", "--seed", "7", "--out", out.path, "--encrypt-replicas", "--keep",
                "--data-dir", stack.directory.appendingPathComponent("devices").path, "--collect-command", collect,
            ])
        #expect(result.status == 0, "\(result.stderr.suffix(3000))")
        // The replicas ran encrypted at rest (crashes and reopens included): no file of theirs is plain SQLite.
        let devices = stack.directory.appendingPathComponent("devices")
        let files = try FileManager.default.contentsOfDirectory(atPath: devices.path).filter { $0.hasSuffix(".sqlite") }
        #expect(
            files.count >= 12
                && FileManager.default.fileExists(atPath: devices.appendingPathComponent("replicas.key").path))
        for name in files {
            let header = try FileHandle(forReadingFrom: devices.appendingPathComponent(name)).read(upToCount: 16)
            #expect(header != Data("SQLite format 3\0".utf8), "\(name) is plain SQLite")
        }
        let report = try JSONDecoder().decode(
            Report.self, from: Data(contentsOf: out.appendingPathComponent("report.json")))
        let step = try #require(report.steps.first)
        #expect(report.tool == "sync-load" && report.configuration.seed == 7)
        #expect(step.devices == 30 && step.replicas == 12 && step.scopes == 4)
        #expect(step.verdict.passed && step.verdict.lost == 0 && step.verdict.duplicated == 0)
        #expect(step.verdict.delivery == 0 && step.verdict.rejectedByCode["event.invalid"] == nil)
        #expect(step.verdict.diverged == 0)
        #expect(
            step.verdict.orphans == 0 && step.verdict.blobsCollected != nil,
            "collection checked: \(String(describing: step.verdict.blobsCollected)) collected of \(String(describing: step.verdict.blobsChecked))"
        )
        #expect(step.edits > 0 && step.verdict.serverEvents == step.verdict.deviceEvents)
        #expect(step.verdict.serverEvents > 0)
        #expect(step.verdict.rejected > 0 && step.verdict.rejectedByCode["validation.failed", default: 0] > 0)
        // The faults, offline spells and crashes happened, and events reached other devices.
        #expect(step.faults.values.reduce(0, +) > 0 && step.offlineSpells > 0 && step.crashes > 0)
        #expect(step.writeToVisibleMs.count > 0)
        #expect(step.bytes.sentWire > 0 && step.bytes.receivedWire > 0)
        #expect(["healthy", "degraded", "collapsed"].contains(step.label))
        let markdown = try String(contentsOf: out.appendingPathComponent("report.md"), encoding: .utf8)
        #expect(markdown.contains("| 30 | 12 | 4 |") && markdown.contains("**pass**"))
        // After the collection, the server's own tables agree: every blob left is one an event or a snapshot
        // refers to (the verdict asked through the API).
        let orphans = try await stack.sql(
            """
            SELECT count(*) FROM blobs b
            WHERE NOT EXISTS (SELECT 1 FROM blob_refs r WHERE r.scope = b.scope AND r.hash = b.hash)
            """)
        #expect(orphans == ["0"])
    }

    /// Replicas whose files lose rows behind their stores' backs during the run: they find the losses by
    /// their checksums and pull the bad ranges again, so the verdict passes, and the report counts both.
    @Test func replicasWhoseFilesLoseRowsRepairThemselvesAndThePassesVerdict() async throws {
        let stack = try await Self.stack()
        let out = stack.directory.appendingPathComponent("report")
        let result = try await run(
            stack,
            [
                "--devices", "0", "--replicas", "6", "--scopes", "2", "--duration", "6", "--ramp-up", "0.5",
                "--rate", "4", "--faults", "0", "--offline", "0", "--crash-interval", "0", "--corrupt-interval", "1.5",
                "--seed", "9", "--out", out.path, "--data-dir", stack.directory.appendingPathComponent("devices").path,
            ])
        #expect(result.status == 0, "\(result.stderr.suffix(3000))")
        let report = try JSONDecoder().decode(
            Report.self, from: Data(contentsOf: out.appendingPathComponent("report.json")))
        let step = try #require(report.steps.first)
        #expect(step.verdict.passed && step.verdict.lost == 0 && step.verdict.diverged == 0)
        #expect(step.verdict.checksums == 0)
        #expect((step.corruptions ?? 0) > 0, "rows were deleted")
        #expect((step.verdict.repairs ?? 0) > 0, "and repaired")
        let markdown = try String(contentsOf: out.appendingPathComponent("report.md"), encoding: .utf8)
        #expect(markdown.contains("rows deleted"))
    }

    struct VerdictJSON: Decodable {
        struct Finding: Decodable {
            var device: Int?
            var scope: String
            var event: String?
            var detail: String
        }
        var passed: Bool
        var lost: Int
        var duplicated: Int
        var diverged: Int
        var findings: [String: [Finding]]
    }

    func verify(_ stack: Stack, _ devices: URL) async throws -> (status: Int32, verdict: VerdictJSON, stderr: String) {
        let result = try await run(stack, ["--data-dir", devices.path], command: "verify")
        guard let verdict = try? JSONDecoder().decode(VerdictJSON.self, from: Data(result.stdout.utf8)) else {
            throw Stack.StackError("sync-load verify printed no verdict (exit \(result.status)): \(result.stderr)")
        }
        return (result.status, verdict, result.stderr)
    }

    @Test func theVerifierCatchesALostEventADuplicateAndADivergedDevice() async throws {
        let stack = try await Self.stack()
        let devices = stack.directory.appendingPathComponent("devices")
        let result = try await run(
            stack,
            [
                "--devices", "0", "--replicas", "6", "--scopes", "2", "--duration", "3", "--ramp-up", "0.5", "--rate",
                "3",
                "--faults", "0", "--offline", "0", "--crash-interval", "0", "--scope-prefix", "tamper",
                "--data-dir", devices.path,
            ])
        #expect(result.status == 0, "\(result.stderr.suffix(3000))")
        let clean = try await verify(stack, devices)
        #expect(clean.status == 0 && clean.verdict.passed, "\(clean.stderr)")

        // An accepted event deleted from PostgreSQL behind the server's back: lost, and named. (Then put
        // back, so that the next check finds only its own fault.)
        let deleted = try #require(
            try await stack.sql(
                """
                CREATE TABLE tampered AS SELECT * FROM events
                    WHERE scope = 'tamper-s0' AND seq = (SELECT max(seq) FROM events WHERE scope = 'tamper-s0');
                DELETE FROM events WHERE event_id = (SELECT event_id FROM tampered) RETURNING event_id
                """
            ).first { $0.count == 36 })
        let lost = try await verify(stack, devices)
        #expect(lost.status != 0 && lost.verdict.lost == 1)
        #expect(lost.verdict.findings["lost"]?.first?.event == deleted, "\(lost.verdict.findings)")
        #expect(lost.stderr.contains(deleted))
        _ = try await stack.sql("INSERT INTO events SELECT * FROM tampered; DROP TABLE tampered")
        let restored = try await verify(stack, devices)
        #expect(restored.status == 0 && restored.verdict.passed, "\(restored.verdict.findings)")

        // One device's state corrupted (a note dropped from its table): diverged, naming the device.
        let file = devices.appendingPathComponent("device-0.sqlite").path
        _ = try await Stack.run(
            "/usr/bin/env",
            [
                "python3", "-c",
                "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('DELETE FROM notes WHERE rowid = (SELECT min(rowid) FROM notes WHERE deleted = 0)'); c.commit()",
                file,
            ])
        let diverged = try await verify(stack, devices)
        #expect(diverged.status != 0 && diverged.verdict.diverged == 1 && diverged.verdict.lost == 0)
        #expect(diverged.verdict.findings["diverged"]?.first?.device == 0, "\(diverged.verdict.findings)")

        // A row of the other scope copied under a new seq and id (what a retry without deduplication would
        // leave): duplicated, in that scope.
        _ = try await stack.sql(
            """
            CREATE TEMP TABLE copy AS SELECT * FROM events WHERE scope = 'tamper-s1' ORDER BY seq DESC LIMIT 1;
            UPDATE copy SET seq = seq + 1,
                event_id = overlay(event_id::text placing substr(md5(random()::text), 1, 12) from 25 for 12)::uuid;
            INSERT INTO events SELECT * FROM copy;
            SELECT 1
            """)
        let duplicated = try await verify(stack, devices)
        #expect(duplicated.status != 0 && duplicated.verdict.duplicated >= 1)
        #expect(duplicated.verdict.findings["duplicated"]?.first?.scope == "tamper-s1")
    }

    /// The thin devices' delivery check catches what it claims to: the first thin device skips one event it
    /// receives, takes one twice and alters one (`--delivery-faults`), and the verdict fails naming each with
    /// its scope and seq; the other devices are clean.
    @Test func theDeliveryCheckCatchesASkippedADuplicatedAndAnAlteredEvent() async throws {
        let stack = try await Self.stack()
        let out = stack.directory.appendingPathComponent("report")
        let result = try await run(
            stack,
            [
                "--devices", "6", "--replicas", "1", "--scopes", "1", "--duration", "4", "--ramp-up", "0.5",
                "--rate", "4", "--faults", "0", "--offline", "0", "--crash-interval", "0", "--scope-prefix", "checked",
                "--delivery-faults", "skip,duplicate,alter", "--out", out.path,
                "--data-dir", stack.directory.appendingPathComponent("devices").path,
            ])
        #expect(result.status == 1, "\(result.stderr.suffix(3000))")
        struct Findings: Decodable {
            struct Step: Decodable {
                struct Verdict: Decodable {
                    var passed: Bool
                    var delivery: Int?
                    var lost: Int
                    var findings: [String: [VerdictJSON.Finding]]
                }
                var verdict: Verdict
            }
            var steps: [Step]
        }
        let report = try JSONDecoder().decode(
            Findings.self, from: Data(contentsOf: out.appendingPathComponent("report.json")))
        let verdict = try #require(report.steps.first?.verdict)
        #expect(!verdict.passed && verdict.delivery == 3 && verdict.lost == 0, "\(verdict.findings)")
        let findings = verdict.findings["delivery"] ?? []
        // Device 1 is the first thin device (device 0 is the replica).
        #expect(findings.allSatisfy { $0.device == 1 && $0.scope == "checked-s0" }, "\(findings)")
        let details = findings.map(\.detail)
        #expect(details.contains { $0.contains(/^seq \d+ skipped/) }, "\(details)")
        #expect(details.contains { $0.contains(/^seq \d+ delivered twice$/) }, "\(details)")
        #expect(details.contains { $0.contains(/^seq \d+ differs from the server's event$/) }, "\(details)")
    }

    /// Full replicas started at once, four times as many as Dispatch has threads for blocking work (64): the
    /// run that hung had every one of those threads blocked in GRDB's reader pools. They open, edit and sync,
    /// the watchdog never finds the run stalled (it would exit 3), and the verdict passes. (`make bench` and
    /// `make load` start a thousand, on release builds; here each replica costs a debug build's start-up.)
    @Test func fourTimesMoreReplicasThanDispatchThreadsStartedTogetherAcceptEventsAndPass() async throws {
        let stack = try await Self.stack()
        let out = stack.directory.appendingPathComponent("report")
        let result = try await run(
            stack,
            [
                "--devices", "0", "--replicas", "256", "--scopes", "32", "--duration", "15", "--ramp-up", "0",
                "--rate", "0.2", "--faults", "0", "--offline", "0", "--crash-interval", "0", "--stall-timeout", "60",
                "--out", out.path, "--data-dir", stack.directory.appendingPathComponent("devices").path,
            ])
        #expect(result.status == 0, "\(result.stderr.suffix(3000))")
        let report = try JSONDecoder().decode(
            Report.self, from: Data(contentsOf: out.appendingPathComponent("report.json")))
        let step = try #require(report.steps.first)
        #expect(step.replicas == 256 && step.devices == 0)
        #expect(step.accepted > 0 && step.verdict.passed && step.verdict.serverEvents == step.verdict.deviceEvents)
    }
}
