import Foundation
import SyncEngineHTTPClient
import SyncModels
import SyncProtocol
import Testing

/// `sync-server` on a real Citus cluster (`scripts/citus.sh`: a coordinator and two workers, each a
/// PostgreSQL with Citus), its tables distributed by scope at start-up (`SYNC_CITUS=true`): the protocol
/// through `sync-agent`s, gap-free pulls while 16 pushers write, a `sync-load` run with faults and its
/// verdict, compaction and a fresh device's bootstrap, and a worker stopped and restarted under load.
///
/// It runs when `SYNC_CITUS_URL` names the cluster's coordinator: `make test` and `make citus` start the
/// cluster when Citus is installed or `CITUS_SOURCE` names its source archive, and say when they skip it.
/// The server's own suites run on the cluster too there (`SYNC_TEST_ON_CITUS`, see `scripts/citus-test.sh`).
@Suite(
    .serialized,
    .enabled(if: CitusCluster.available, "no Citus cluster (SYNC_CITUS_URL is not set; make citus starts one)"))
struct CitusTests {
    static func stack(noteQuota: Int = 100_000) async throws -> Stack {
        try await Stack(noteQuota: noteQuota, serverEnvironment: ["SYNC_COMPACTION_INTERVAL_SECONDS": "0"], citus: true)
    }

    /// The worker a scope's shard of `events` is placed on (its port).
    static func worker(of scope: String, _ stack: Stack) async throws -> String {
        try await stack.sql(
            """
            SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
            WHERE p.shardid = get_shard_id_for_distribution_column('events', '\(scope)')
            """
        ).first ?? ""
    }

    @Test func theTablesAreDistributedByScopeAndTwoDevicesConvergeWithTheQuotaEnforced() async throws {
        let stack = try await Self.stack(noteQuota: 2)
        // Every table with a scope column is distributed by it, co-located with `scopes`; the others are
        // reference tables.
        let tables = try await stack.sql(
            """
            SELECT logicalrelid::text || ' ' || partmethod::text || ' '
                   || (colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'scopes'::regclass))
            FROM pg_dist_partition ORDER BY 1
            """)
        #expect(
            Set(tables) == [
                "blob_parts h true", "blob_refs h true", "blob_upload_parts h true", "blob_uploads h true",
                "blobs h true", "events h true", "folded_events h true", "live_notes h true", "note_counts h true",
                "replica_progress h true", "schema_migrations n false", "scope_compaction h true", "scopes h true",
                "streams h true",
            ], "\(tables)")
        let scopes = (0..<6).map { "team-\($0)" }
        var workers = Set<String>()
        for scope in scopes { workers.insert(try await Self.worker(of: scope, stack)) }
        #expect(workers.count == 2, "the scopes span both workers")

        let token = try await stack.token(scopes: scopes)
        let a = stack.agent("a", token: token)
        let b = stack.agent("b", token: token)
        var notes: [String] = []
        for scope in scopes {
            let note = try await a("note", "create", "--scope", scope, "--title", "plan \(scope)", "--tag", "work")
            notes.append(note)
            try await a("note", "checklist", note, "add", "first")
        }
        try await a("sync")
        try await b("sync")
        // Offline on both, concurrent edits of the same notes.
        for note in notes {
            try await a("note", "set-title", note, "A's title")
            try await b("note", "tag", note, "add", "urgent")
            try await b("note", "view", note)
        }
        // A second note in team-0 reaches the quota of 2; b's third, made offline, is rejected.
        _ = try await a("note", "create", "--scope", "team-0", "--title", "second")
        try await a("sync")
        let third = try await b("note", "create", "--scope", "team-0", "--title", "third")
        try await b("sync")
        try await a("sync")
        #expect(try await a("export", "--state") == b("export", "--state"), "the replicas converged")
        let state = try await a.state()
        for note in notes {
            #expect(state[note]?.title == "A's title" && state[note]?.tags == ["urgent", "work"])
            #expect(state[note]?.viewCount == 1)
        }
        #expect(state[third] == nil, "the note past the quota was rejected and rolled back")
        #expect(try await b.status().rejected.contains { $0.code == "validation.failed" })
        // Each event once, seqs dense per scope.
        let rows = try await stack.sql(
            "SELECT scope || ' ' || count(*) || ' ' || count(DISTINCT event_id) || ' ' || max(seq) FROM events GROUP BY scope ORDER BY scope"
        )
        #expect(rows.count == 6)
        for row in rows {
            let parts = row.split(separator: " ")
            #expect(parts[1] == parts[2] && parts[2] == parts[3], "\(row)")
        }
    }

    /// 16 pushers at once on four scopes (`sync-bench push`), while a reader per scope pulls what commits:
    /// every page continues its cursor exactly (a later seq is never visible before an earlier one), and the
    /// reader ends with every event once.
    @Test func sixteenConcurrentPushersLeavePullsGapFree() async throws {
        let stack = try await Self.stack()
        let scopes = (0..<4).map { "bench-\($0)" }
        let token = try await stack.token(scopes: scopes)
        let events = 4000
        let bench = Stack.productsDirectory.appendingPathComponent("sync-bench").path
        let push = Task {
            try await Stack.run(
                bench,
                [
                    "push", "--server", stack.serverURL, "--token", token, "--events", String(events), "--batch", "5",
                    "--concurrency", "16", "--scopes", "4", "--json",
                ])
        }
        let transport = HTTPClientTransport(baseURL: URL(string: stack.serverURL)!, token: token)
        let read = try await withThrowingTaskGroup(of: (String, Int).self) { group in
            for name in scopes {
                group.addTask {
                    let scope = try Scope(name)
                    var position: Int64 = 0
                    var ids = Set<EventID>()
                    let deadline = ContinuousClock.now + .seconds(300)
                    while ids.count < events / 4, ContinuousClock.now < deadline {
                        var cursor = ScopeCursor()
                        cursor[scope] = position
                        let page = try await transport.pull(
                            PullRequest(cursor: cursor, scopes: [scope], limit: 97, wait: 2))
                        for event in page.events {
                            let seq = try #require(event.seq)
                            #expect(seq == position + 1, "\(name): \(seq) after \(position)")
                            position = seq
                            ids.insert(event.id)
                        }
                    }
                    return (name, ids.count)
                }
            }
            var counts: [String: Int] = [:]
            for try await (name, count) in group { counts[name] = count }
            return counts
        }
        _ = try await push.value
        #expect(read == Dictionary(uniqueKeysWithValues: scopes.map { ($0, events / 4) }), "\(read)")
        #expect(
            try await stack.sql("SELECT count(*) || ' ' || count(DISTINCT event_id) FROM events") == [
                "\(events) \(events)"
            ])
    }

    /// Thin devices and full replicas with faults, offline spells and crashes: the verdict (nothing lost,
    /// duplicated or diverged; every thin device received its scope's log exactly) holds on Citus.
    @Test func aLoadRunWithFaultsPassesItsVerdict() async throws {
        let stack = try await Self.stack(noteQuota: 3)
        let out = stack.directory.appendingPathComponent("report")
        let result = try await Stack.runCapturing(
            LoadTests.load,
            [
                "run", "--server", stack.serverURL, "--jwt-secret", Stack.secret, "--devices", "24", "--replicas",
                "8", "--scopes", "6", "--duration", "6", "--ramp-up", "1", "--rate", "2", "--faults", "0.15",
                "--offline", "0.2", "--offline-min", "0.5", "--offline-max", "2", "--crash-interval", "4", "--seed",
                "11", "--out", out.path, "--data-dir", stack.directory.appendingPathComponent("devices").path,
            ])
        #expect(result.status == 0, "\(result.stderr.suffix(3000))")
        let step = try await Self.passedStep(out, stack)
        #expect(step.verdict.rejectedByCode["validation.failed", default: 0] > 0, "the quota rule ran on Citus")
        #expect(step.faults.values.reduce(0, +) > 0 && step.crashes > 0)
    }

    /// History folded by `sync-server compact` on the cluster; a new device bootstraps from the snapshots to
    /// the same state as the devices that saw every event.
    @Test func compactionFoldsOnTheClusterAndAFreshDeviceBootstrapsFromIt() async throws {
        let stack = try await Self.stack()
        let scopes = ["team-a", "team-b", "team-c"]
        let token = try await stack.token(scopes: scopes)
        let a = stack.agent("a", token: token)
        let b = stack.agent("b", token: token)
        var notes: [String] = []
        for (index, scope) in scopes.enumerated() {
            for round in 0..<3 {
                let note = try await a("note", "create", "--scope", scope, "--title", "n\(index)-\(round)")
                notes.append(note)
                try await a("note", "tag", note, "add", "draft")
                try await a("note", "set-title", note, "n\(index)-\(round) v2")
                try await a("note", "tag", note, "remove", "draft")
            }
        }
        try await a("note", "delete", notes[0])
        try await a("sync")
        try await b("sync")
        try await b("sync")  // acknowledges what the first sync brought
        try await a("sync")
        let before = Int(try await stack.sql("SELECT count(*) FROM events").first ?? "") ?? 0
        struct Report: Decodable {
            struct Scope: Decodable {
                var scope: String
                var compactedThrough: Int64
            }
            var scopes: [Scope]
            var bytesAfter: [String: Int64]
        }
        let report = try await JSONDecoder().decode(Report.self, from: Data(try stack.compact(["--vacuum"]).utf8))
        #expect(Set(report.scopes.map(\.scope)) == Set(scopes) && report.scopes.allSatisfy { $0.compactedThrough > 0 })
        // The shards' bytes on the workers, not the coordinator's empty tables.
        #expect(report.bytesAfter["folded_events", default: 0] > 32 * 8192, "\(report.bytesAfter)")
        let folded = try await stack.sql("SELECT count(*) || ' ' || count(DISTINCT stream) FROM folded_events")
        #expect(folded == ["8 8"], "one row per live note, the deleted one gone: \(folded)")
        #expect(Int(try await stack.sql("SELECT count(*) FROM events").first ?? "") ?? before < before)
        try await b("note", "set-title", notes[1], "after the fold")
        try await b("sync")
        let c = stack.agent("c", token: token)
        try await c("sync")
        try await a("sync")
        #expect(try await c("export", "--state") == a("export", "--state"))
        #expect(try await c("export", "--state") == b("export", "--state"))
        let state = try await c.state()
        #expect(state[notes[0]] == nil && state[notes[1]]?.title == "after the fold")
        #expect(state[notes[2]]?.title == "n0-2 v2" && state[notes[2]]?.tags == [])
    }

    /// A scope's shards moved to the other worker (`citus_move_shard_placement`, as a rebalance does), then
    /// split off into shards of its own (`isolate_tenant_to_new_shard`), between two syncs: the devices go on
    /// as before, and a fresh one bootstraps to the same state.
    @Test func aScopeMovedAndIsolatedKeepsSyncing() async throws {
        let stack = try await Self.stack()
        let token = try await stack.token(scopes: ["team-m"])
        let a = stack.agent("a", token: token)
        let b = stack.agent("b", token: token)
        let note = try await a("note", "create", "--scope", "team-m", "--title", "before the move")
        try await a("sync")
        try await b("sync")
        let placement =
            try await stack.sql(
                """
                SELECT shardid || ' ' || nodename || ' ' || nodeport FROM citus_shards
                WHERE table_name = 'events'::regclass AND shardid = get_shard_id_for_distribution_column('events', 'team-m')
                """
            ).first?.split(separator: " ").map(String.init) ?? []
        #expect(placement.count == 3)
        let target =
            try await stack.sql(
                "SELECT nodeport FROM pg_dist_node WHERE groupid <> 0 AND nodeport <> \(placement[2]) LIMIT 1"
            ).first ?? ""
        _ = try await stack.sql(
            "SELECT citus_move_shard_placement(\(placement[0]), '\(placement[1])', \(placement[2]), '\(placement[1])', \(target))"
        )
        #expect(try await Self.worker(of: "team-m", stack) == target)
        try await b("note", "set-title", note, "after the move")
        try await b("sync")
        _ = try await stack.sql("SELECT isolate_tenant_to_new_shard('events', 'team-m', 'CASCADE')")
        try await a("note", "tag", note, "add", "moved")
        try await a("sync")
        try await b("sync")
        let c = stack.agent("c", token: token)
        try await c("sync")
        #expect(try await a("export", "--state") == b("export", "--state"))
        #expect(try await c("export", "--state") == a("export", "--state"))
        let moved = try await c.state()[note]
        #expect(moved?.title == "after the move" && moved?.tags == ["moved"])
    }

    /// One worker stopped at once (`-m immediate`, as a crash) three seconds into a load run and started again
    /// three seconds later: the pushes and pulls of its scopes fail meanwhile and are retried, and the
    /// verdict finds nothing lost, duplicated or diverged.
    @Test func aWorkerRestartedMidLoadLosesAndDuplicatesNothing() async throws {
        let stack = try await Self.stack()
        let out = stack.directory.appendingPathComponent("report")
        let load = Task {
            try await Stack.runCapturing(
                LoadTests.load,
                [
                    "run", "--server", stack.serverURL, "--jwt-secret", Stack.secret, "--devices", "16", "--replicas",
                    "8", "--scopes", "8", "--duration", "10", "--ramp-up", "1", "--rate", "3", "--seed", "5",
                    "--out", out.path, "--data-dir", stack.directory.appendingPathComponent("devices").path,
                ])
        }
        try await Task.sleep(for: .seconds(3))
        try await Stack.run(Stack.citusScript, ["stop-worker", "2"])
        try await Task.sleep(for: .seconds(3))
        try await Stack.run(Stack.citusScript, ["start-worker", "2"])
        let result = try await load.value
        #expect(result.status == 0, "\(result.stderr.suffix(3000))")
        _ = try await Self.passedStep(out, stack)
    }

    /// The two-phase commits Citus recorded for this stack's database, on every node (`pg_dist_transaction`:
    /// a transaction that wrote over more than one connection, or a statement that wrote more than one shard).
    static func twoPhaseCommits(_ stack: Stack) async throws -> Set<String> {
        var gids = Set<String>()
        for port in try await stack.sql("SELECT nodeport FROM pg_dist_node ORDER BY groupid") {
            var components = try #require(URLComponents(string: stack.databaseURL))
            components.port = Int(port)
            let rows = try await Stack.run(
                "/usr/bin/env",
                ["psql", try #require(components.string), "-tAc", "SELECT gid FROM pg_dist_transaction"])
            for gid in rows.split(separator: "\n") { gids.insert("\(port) \(gid)") }
        }
        return gids
    }

    /// `sync_push_transactions_total` by node, from the server's `/metrics`.
    static func pushTransactions(_ stack: Stack) async throws -> [String: Double] {
        try await counters("sync_push_transactions_total", stack)
    }

    /// A counter of the server's `/metrics` by the value of its one dimension.
    static func counters(_ name: String, _ stack: Stack) async throws -> [String: Double] {
        let text = try await Stack.run("/usr/bin/env", ["curl", "-sf", "\(stack.serverURL)/metrics"])
        var counts: [String: Double] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix(name + "{") {
            // sync_push_transactions_total{node="group 1"} 12
            guard let open = line.firstIndex(of: "\""), let close = line.lastIndex(of: "\""), open < close,
                let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...])
            else { continue }
            counts[String(line[line.index(after: open)..<close])] = value
        }
        return counts
    }

    /// A counter of the server's `/metrics` without dimensions (0 when it is not there yet).
    static func counter(_ name: String, _ stack: Stack) async throws -> Double {
        let text = try await Stack.run("/usr/bin/env", ["curl", "-sf", "\(stack.serverURL)/metrics"])
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.split(separator: " ").last ?? "") ?? 0
        }
        return 0
    }

    /// A shard group's function (`CitusShardAppend`), called on a worker, writes only for scopes of its shard
    /// group on the node that holds it: on the other worker, or with a scope of another shard group, it raises
    /// `SY004` and writes nothing; where it belongs, it appends as `sync_append` does.
    @Test func aShardGroupsFunctionWritesOnlyItsOwnShardsWhereTheyAre() async throws {
        let stack = try await Self.stack()
        let ports = try await stack.sql("SELECT nodeport FROM pg_dist_node WHERE groupid <> 0 ORDER BY groupid")
        #expect(ports.count == 2)
        // Two scopes on the first worker, in different shard groups.
        var mine: [(scope: String, shard: String)] = []
        for index in 0..<200 where mine.count < 2 {
            let scope = "own-\(index)"
            let found =
                try await stack.sql(
                    """
                    SELECT n.nodeport || ' ' || p.shardid FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
                    WHERE p.shardid = get_shard_id_for_distribution_column('scopes', '\(scope)')
                    """
                ).first?.split(separator: " ").map(String.init) ?? []
            if found.first == ports[0], !mine.contains(where: { $0.shard == found[1] }) {
                mine.append((scope, found[1]))
            }
        }
        #expect(mine.count == 2)
        func call(on port: String, function shard: String, scope: String) async throws -> (Int32, String) {
            var worker = try #require(URLComponents(string: stack.databaseURL))
            worker.port = Int(port)
            let sql = """
                SELECT * FROM sync_append_shard_\(shard)(ARRAY['\(scope)'], ARRAY[1::int8], ARRAY[gen_random_uuid()],
                  ARRAY['doc:1'], ARRAY[1::int8], ARRAY['doc.edited'], ARRAY[1],
                  ARRAY['0000018f4e3a5b7c:0000:6d2c1f0e9a8b4c7d'], ARRAY['6d2c1f0e9a8b4c7d8e9f001122334455'],
                  ARRAY[1::int8], ARRAY['{}'], ARRAY[0::int8], '{}'::text[], '{}'::text[], '{}'::int8[], '{}'::int8[],
                  '{}'::text[], '{}'::text[], '{}'::bool[])
                """
            let result = try await Stack.runCapturing(
                "/usr/bin/env",
                [
                    "psql", try #require(worker.string), "-tAq", "-v", "VERBOSITY=verbose", "-v", "ON_ERROR_STOP=1",
                    "-c", sql,
                ])
            return (result.status, result.stdout + result.stderr)
        }
        let elsewhere = try await call(on: ports[1], function: mine[0].shard, scope: mine[0].scope)
        #expect(elsewhere.0 != 0 && elsewhere.1.contains("SY004"), "\(elsewhere)")
        let otherShard = try await call(on: ports[0], function: mine[0].shard, scope: mine[1].scope)
        #expect(otherShard.0 != 0 && otherShard.1.contains("SY004"), "\(otherShard)")
        #expect(try await stack.sql("SELECT count(*) FROM events") == ["0"])
        let own = try await call(on: ports[0], function: mine[0].shard, scope: mine[0].scope)
        #expect(own.0 == 0 && own.1.contains("\(mine[0].scope)|0"), "\(own)")
        #expect(try await stack.sql("SELECT scope || ' ' || seq FROM events") == ["\(mine[0].scope) 1"])
        #expect(try await stack.sql("SELECT head FROM scopes WHERE scope = '\(mine[0].scope)'") == ["1"])
    }

    /// One-event pushes of scopes on both workers, 16 in flight (`sync-bench push`): once the server knows
    /// where the scopes are, each push group runs on the worker of its scopes, not through the coordinator, as
    /// one call of `sync_append`; no node records a two-phase commit; every event is stored once.
    @Test func pushesRunOnTheWorkerOfTheirScopesAndCommitInOnePhase() async throws {
        let stack = try await Self.stack()
        let scopes = (0..<8).map { "bench-\($0)" }
        var workers = Set<String>()
        for scope in scopes { workers.insert(try await Self.worker(of: scope, stack)) }
        #expect(workers.count == 2, "the scopes span both workers")
        let token = try await stack.token(scopes: scopes)
        let bench = Stack.productsDirectory.appendingPathComponent("sync-bench").path
        func push(_ events: Int, concurrency: Int) async throws {
            _ = try await Stack.run(
                bench,
                [
                    "push", "--server", stack.serverURL, "--token", token, "--events", String(events), "--batch", "1",
                    "--concurrency", String(concurrency), "--scopes", "8", "--json",
                ])
        }
        // A scope's first push goes through the coordinator while the server looks up where the scope is.
        var warmed = 0
        repeat {
            try await push(8, concurrency: 1)
            warmed += 8
            let nodes = try await Self.pushTransactions(stack).filter { $0.key.hasPrefix("group ") }
            if nodes.count == 2 { break }
            try await Task.sleep(for: .milliseconds(200))
        } while warmed < 400
        let before = try await Self.twoPhaseCommits(stack)
        let counted = try await Self.pushTransactions(stack)
        let oneStatement = try await Self.counters("sync_push_one_statement_total", stack)
        let shardCalls = try await Self.counter("sync_push_on_shards_total", stack)
        try await push(800, concurrency: 16)
        let after = try await Self.pushTransactions(stack)
        // Each push, or group, ran as one call of `sync_append` on its node (docs/ARCHITECTURE.md, "A push in one
        // statement"), none refused.
        let calls = try await Self.counters("sync_push_one_statement_total", stack)
        let transactions = after.values.reduce(0, +) - counted.values.reduce(0, +)
        #expect(
            (calls["appended"] ?? 0) - (oneStatement["appended"] ?? 0) == transactions
                && calls["refused"] == oneStatement["refused"], "\(calls), \(transactions) transactions")
        #expect(after["database"] == counted["database"], "no push went through the coordinator: \(after)")
        let onNodes = after.filter { $0.key.hasPrefix("group ") }
        #expect(onNodes.count == 2 && onNodes.allSatisfy { $0.value > counted[$0.key] ?? 0 }, "\(after)")
        #expect(
            onNodes.values.reduce(0, +) - counted.filter { $0.key.hasPrefix("group ") }.values.reduce(0, +) < 800,
            "pushes in flight together shared transactions")
        // Each call ran the functions of its scopes' shard groups, on the shards (`CitusShardAppend`).
        #expect(
            try await Self.counter("sync_push_on_shards_total", stack) - shardCalls == transactions,
            "\(transactions) transactions")
        let added = try await Self.twoPhaseCommits(stack).subtracting(before)
        #expect(added.isEmpty, "two-phase commits: \(added.sorted())")
        #expect(
            try await stack.sql("SELECT count(*) || ' ' || count(DISTINCT event_id) FROM events") == [
                "\(800 + warmed) \(800 + warmed)"
            ])
    }

    /// A pooled connection to a worker does not grow with every push: the schema's PL/pgSQL functions plan at
    /// every call there (`CitusDistribution.planAtEveryCall`). With the generic plan PL/pgSQL keeps after a few
    /// calls, Citus 13.2 adds a local plan of about 96 KiB to it at every call of `sync_append`, kept until the
    /// session ends.
    @Test func aWorkerSessionDoesNotGrowWithEveryCall() async throws {
        let stack = try await Self.stack()
        let scope = "grow-1"
        // A first push creates the scope's head row; then calls on the worker that holds it, in one session.
        let token = try await stack.token(scopes: [scope])
        let agent = stack.agent("grow", token: token)
        _ = try await agent("note", "create", "--scope", scope, "--title", "first")
        try await agent("sync")
        var worker = URLComponents(string: stack.databaseURL)!
        worker.port = Int(try await Self.worker(of: scope, stack))
        func calls(_ count: Int) -> String {
            """
            DO $$ BEGIN FOR i IN 1..\(count) LOOP
              PERFORM sync_append(ARRAY['\(scope)'], ARRAY[1::int8], ARRAY[gen_random_uuid()], ARRAY['doc:' || i],
                ARRAY[1::int8], ARRAY['doc.edited'], ARRAY[1], ARRAY['0000018f4e3a5b7c:0000:6d2c1f0e9a8b4c7d'],
                ARRAY['6d2c1f0e9a8b4c7d8e9f001122334455'], ARRAY[i::int8], ARRAY['{}'], ARRAY[0::int8], '{}'::text[],
                '{}'::text[], '{}'::int8[], '{}'::int8[], ARRAY['6d2c1f0e9a8b4c7d8e9f001122334455'],
                ARRAY['\(scope)'], ARRAY[false]);
            END LOOP; END $$
            """
        }
        let held = "SELECT coalesce(sum(total_bytes), 0) FROM pg_backend_memory_contexts WHERE name = 'CachedPlan'"
        let output = try await Stack.run(
            "/usr/bin/env", ["psql", worker.string!, "-tAq", "-c", calls(50), "-c", held, "-c", calls(300), "-c", held])
        let readings = output.split(separator: "\n").compactMap { Int($0) }
        #expect(readings.count == 2, "\(output)")
        // 300 calls grew it by about 28 MiB before; now by nothing but noise.
        #expect((readings.last ?? 0) - (readings.first ?? 0) < 4 << 20, "\(readings)")
    }

    /// A node that moves is followed, and its old pool and `LISTEN` retired (`CitusWorkers`). Here a worker's
    /// group moves to a port nothing listens on, then back: the server's `LISTEN` at the dead address counts as
    /// down, and once the node is back the long-poll hub counts every `LISTEN` up again, so long-polls at the
    /// heads wait without reading the database; the pool of before the move has closed its connections, and the
    /// worker's scopes sync again.
    @Test func aNodeThatMovesIsFollowedAndItsOldListenRetired() async throws {
        let stack = try await Stack(
            noteQuota: 100_000,
            serverEnvironment: ["SYNC_COMPACTION_INTERVAL_SECONDS": "0", "SYNC_CITUS_NODE_REFRESH_SECONDS": "1"],
            citus: true)
        func listening(_ expected: Double, _ what: String) async throws {
            var value = -1.0
            // Within a minute: a bound against a hang (a refresh each second, then the old pool's 5 s).
            for _ in 0..<240 {
                value = try await Self.counter("sync_longpoll_listening", stack)
                if value == expected { return }
                try await Task.sleep(for: .milliseconds(250))
            }
            Issue.record("sync_longpoll_listening is \(value) after a minute, not \(expected): \(what)")
        }
        try await listening(1, "the LISTENs up at start")
        let node = try #require(
            try await stack.sql(
                "SELECT nodeid || ' ' || nodeport FROM pg_dist_node WHERE groupid <> 0 ORDER BY groupid LIMIT 1"
            ).first?.split(separator: " "))
        var scopes: [String] = []
        for scope in (0..<16).map({ "moved-\($0)" }) where try await Self.worker(of: scope, stack) == node[1] {
            scopes.append(scope)
        }
        let scope = try #require(scopes.first)
        let agent = stack.agent("moved", token: try await stack.token(scopes: [scope]))
        _ = try await agent("note", "create", "--scope", scope, "--title", "before")
        try await agent("sync")

        var worker = try #require(URLComponents(string: stack.databaseURL))
        worker.port = Int(node[1])
        let workerURL = try #require(worker.string)
        let moved = try #require(try await stack.sql("SELECT now()").first)
        // Port 1: nothing listens there, a connection is refused at once.
        _ = try await stack.sql("SELECT citus_update_node(\(node[0]), '127.0.0.1', 1)")
        try await listening(0, "the LISTEN at the node's new address cannot connect")
        _ = try await stack.sql("SELECT citus_update_node(\(node[0]), '127.0.0.1', \(node[1]))")
        try await listening(1, "the LISTEN at the dead address retired once the node moved back")
        // The server's connections to the worker opened before the move (its first pool's) are gone.
        let opened = """
            SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sync-server'
            AND datname = current_database() AND backend_start < '\(moved)'
            """
        var left = ""
        for _ in 0..<120 {
            left = try await Stack.run("/usr/bin/env", ["psql", workerURL, "-tAc", opened])
                .trimmingCharacters(in: .whitespacesAndNewlines)
            if left == "0" { break }
            try await Task.sleep(for: .milliseconds(500))
        }
        #expect(left == "0", "connections of the pool before the move still open")
        _ = try await agent("note", "create", "--scope", scope, "--title", "after")
        var synced = false
        for _ in 0..<60 where !synced {
            synced = (try? await agent("sync")) != nil
            if !synced { try await Task.sleep(for: .milliseconds(500)) }
        }
        #expect(synced, "the node's scope syncs at its address again")
        #expect(try await agent.status().pending == 0)
        #expect(try await stack.sql("SELECT count(*) FROM events WHERE scope = '\(scope)'") == ["2"])
    }

    /// One worker stopped: a device of the other worker's scope keeps syncing (its pushes run on that worker
    /// alone), a device of the stopped worker's scope fails to sync until the worker is back, then catches up.
    @Test func aStoppedWorkerLeavesTheOtherWorkersScopesWritable() async throws {
        let stack = try await Self.stack()
        let ports = try await stack.sql("SELECT nodeport FROM pg_dist_node WHERE groupid <> 0 ORDER BY groupid")
        #expect(ports.count == 2)
        var byWorker: [String: [String]] = [:]
        for scope in (0..<8).map({ "team-\($0)" }) {
            byWorker[try await Self.worker(of: scope, stack), default: []].append(scope)
        }
        let running = try #require(byWorker[ports[0]]?.first)
        let stopped = try #require(byWorker[ports[1]]?.first)
        let a = stack.agent("a", token: try await stack.token(scopes: [running]))
        let b = stack.agent("b", token: try await stack.token(scopes: [stopped]))
        _ = try await a("note", "create", "--scope", running, "--title", "before")
        _ = try await b("note", "create", "--scope", stopped, "--title", "before")
        try await a("sync")
        try await b("sync")
        try await Stack.run(Stack.citusScript, ["stop-worker", "2"])
        for index in 0..<3 {
            _ = try await a("note", "create", "--scope", running, "--title", "while stopped \(index)")
            try await a("sync")
        }
        #expect(try await a.status().pending == 0, "the running worker's scope took every push")
        _ = try await b("note", "create", "--scope", stopped, "--title", "while stopped")
        let failed = try await b.capturing(["sync"])
        #expect(failed.status != 0, "the stopped worker's scope cannot sync")
        try await Stack.run(Stack.citusScript, ["start-worker", "2"])
        var synced = false
        for _ in 0..<60 where !synced {
            synced = (try? await b("sync")) != nil
            if !synced { try await Task.sleep(for: .milliseconds(500)) }
        }
        #expect(synced, "the stopped worker's scope syncs again once it is back")
        #expect(try await b.status().pending == 0)
        #expect(
            try await stack.sql("SELECT scope || ' ' || count(*) FROM events GROUP BY scope ORDER BY scope")
                == [
                    "\(running) 4", "\(stopped) 2",
                ].sorted())
    }

    /// The step of a `sync-load` report in `out`, checked: its verdict passed (nothing lost, duplicated,
    /// diverged or delivered wrong), and the cluster holds each of its events once.
    /// Attachments on the cluster: a file uploaded in chunks to a scope's shard, its event pushed after it,
    /// read byte for byte on another device, deduplicated when attached again, and collected once its note's
    /// deletion is stable.
    @Test func anAttachmentTravelsThroughTheClusterAndIsCollectedWhenItsNoteIsGone() async throws {
        let stack = try await Stack(
            serverEnvironment: [
                "SYNC_COMPACTION_INTERVAL_SECONDS": "0", "SYNC_BLOB_CHUNK_BYTES": String(256 << 10),
            ], citus: true)
        let token = try await stack.token(scopes: ["team-1", "team-2"])
        let a = stack.agent("a", token: token)
        let b = stack.agent("b", token: token)
        let (file, hash) = try AttachmentTests.randomFile(
            in: stack.directory, name: "plan.pdf", bytes: 5 * (256 << 10) + 99, seed: 50)
        var notes: [String] = []
        for scope in ["team-1", "team-2"] {
            let note = try await a("note", "create", "--scope", scope, "--title", "plan \(scope)")
            try await a("note", "attach", note, file.path)
            notes.append(note)
        }
        try await a("sync")
        try await b("sync")
        #expect(
            try await stack.sql("SELECT scope || ' ' || hash FROM blobs ORDER BY scope") == [
                "team-1 \(hash)", "team-2 \(hash)",
            ], "once per scope, on each scope's shard")
        let copy = stack.directory.appendingPathComponent("copy.pdf")
        try await b("note", "open", notes[1], "plan.pdf", "--out", copy.path)
        #expect(AttachmentTests.sha256(try Data(contentsOf: copy)) == hash)

        try await a("note", "delete", notes[0])
        for _ in 0..<2 {
            try await a("sync")
            try await b("sync")
        }
        try await Task.sleep(for: .milliseconds(1100))
        struct Report: Decodable { var collectedBlobs: Int }
        let report = try await JSONDecoder().decode(
            Report.self,
            from: Data(try stack.compact(environment: ["SYNC_BLOB_COLLECT_AFTER_SECONDS": "0"]).utf8))
        #expect(report.collectedBlobs == 1)
        #expect(try await stack.sql("SELECT scope FROM blobs") == ["team-2"])
        #expect(try await a("export", "--state") == b("export", "--state"))
    }

    static func passedStep(_ out: URL, _ stack: Stack) async throws -> LoadTests.Report.Step {
        let report = try JSONDecoder().decode(
            LoadTests.Report.self, from: Data(contentsOf: out.appendingPathComponent("report.json")))
        let step = try #require(report.steps.first)
        #expect(step.verdict.passed && step.verdict.lost == 0 && step.verdict.duplicated == 0)
        #expect(step.verdict.diverged == 0 && step.verdict.delivery == 0)
        #expect(step.verdict.serverEvents > 0 && step.verdict.serverEvents == step.verdict.deviceEvents)
        let rows = try await stack.sql("SELECT count(*), count(DISTINCT event_id) FROM events")
        #expect(rows == ["\(step.verdict.serverEvents)|\(step.verdict.serverEvents)"])
        return step
    }
}

/// Whether a Citus cluster is there to test on.
enum CitusCluster {
    static var available: Bool { !(ProcessInfo.processInfo.environment["SYNC_CITUS_URL"] ?? "").isEmpty }
}
