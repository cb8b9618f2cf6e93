import Crypto
import Foundation
import SyncEngine
import SyncEventStore
import SyncTestSupport
import Testing

/// Attachments through real processes (docs/ARCHITECTURE.md, "Attachments"): `sync-agent note attach` on one
/// device, uploads killed and resumed, the blob read back on another device, byte for byte.
@Suite(.serialized, .onOwnThreads) struct AttachmentTests {
    /// Small chunks, so that a few MiB make many of them.
    static let chunkBytes = 256 << 10
    static let environment = ["SYNC_BLOB_CHUNK_BYTES": String(chunkBytes)]

    /// A file of `bytes` pseudo-random bytes (incompressible, as photos are) and its SHA-256.
    static func randomFile(in directory: URL, name: String, bytes: Int, seed: UInt64) throws -> (URL, String) {
        var random = SplitMix64(seed: seed)
        var data = Data(count: bytes)
        data.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) in
            for index in stride(from: 0, to: bytes, by: 8) {
                var word = random.next()
                withUnsafeBytes(of: &word) { word in
                    for offset in 0..<min(8, bytes - index) { buffer[index + offset] = word[offset] }
                }
            }
        }
        let url = directory.appendingPathComponent(name)
        try data.write(to: url)
        return (url, sha256(data))
    }

    static func sha256(_ data: Data) -> String {
        SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }

    /// `sync-fault-proxy` in front of the stack's server with `faults` (its flags); stopped when released.
    final class Proxy: @unchecked Sendable {
        // @unchecked: set once in init, only stopped in deinit.
        let port: Int
        let control: Int
        let process: ChildProcess.Running

        init(_ stack: Stack, _ faults: [String]) async throws {
            port = try Stack.freePort()
            control = try Stack.freePort()
            let process = try ChildProcess.start(
                Stack.productsDirectory.appendingPathComponent("sync-fault-proxy").path,
                ["--port", String(port), "--control-port", String(control), "--upstream", "127.0.0.1:\(stack.port)"]
                    + faults, environment: ProcessInfo.processInfo.environment,
                output: stack.directory.appendingPathComponent("proxy-\(port).log").path)
            self.process = process
            try await Stack.waitUntilAnswered("http://127.0.0.1:\(control)/stats", while: { process.isRunning })
        }

        deinit {
            process.terminate()
            // Reaped on a thread of its own: a deinit cannot wait without blocking its thread, which may be
            // one of the concurrency pool's.
            Thread { [process] in process.waitUntilExit() }.start()
        }

        /// `agent` talking to the server through this proxy.
        func route(_ agent: Agent) -> Agent {
            Agent(
                executable: agent.executable, database: agent.database, server: "http://127.0.0.1:\(port)",
                token: agent.token)
        }
    }

    /// Waits until the server holds `parts` parts of uploads, as long as `process` (the uploading agent) runs:
    /// bounded by the upload's progress, not by a time (a loaded machine starts the agent and sends its first
    /// chunk late, but it sends it; an agent that gives up ends, and the test then says so).
    static func waitForParts(_ parts: Int, of stack: Stack, while process: ChildProcess.Running) async throws {
        while true {
            let stored = Int(try await stack.sql("SELECT count(*) FROM blob_upload_parts").first ?? "0") ?? 0
            if stored >= parts { return }
            guard process.isRunning else {
                Issue.record(
                    "the agent ended (status \(process.terminationStatus ?? -1)) with \(stored) of \(parts) parts stored"
                )
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Waits for `process` to end without holding a thread of the concurrency pool.
    static func exit(of process: ChildProcess.Running) async {
        while process.terminationStatus == nil { try? await Task.sleep(for: .milliseconds(20)) }
    }

    struct Listed: Decodable {
        var name: String
        var hash: String
        var size: Int64
        var local: Bool
    }

    @Test func aKilledUploadResumesSendingAtMostOneChunkAgainAndAnotherDeviceReadsTheSameBytes() async throws {
        let stack = try await Stack(serverEnvironment: Self.environment)
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        let chunks = 24
        let (file, hash) = try Self.randomFile(
            in: stack.directory, name: "photo.jpg", bytes: chunks * Self.chunkBytes - 1000, seed: 46)
        let note = try await a("note", "create", "--scope", "team-1", "--title", "Trip")
        #expect(try await a("note", "attach", note, file.path) == hash)
        let listedOffline = try JSONDecoder().decode(
            [Listed].self, from: Data(try await a("note", "files", note).utf8))
        #expect(listedOffline.map(\.name) == ["photo.jpg"] && listedOffline.first?.local == true, "readable at once")

        // Killed once the server holds a chunk or two, long before it holds them all: through a proxy at
        // 256 KiB/s a connection, a chunk a second, so that the 24 take over ten seconds however fast the
        // machine, and a poll of the server's table that takes a second or more on a loaded machine (a psql
        // process each) still comes in time. (At 1 MiB/s a loaded CI machine saw the whole upload finish
        // between two polls.)
        let slow = try await Proxy(stack, ["--bandwidth", "256KiB"])
        let syncing = try slow.route(a).start(["sync"])
        try await Self.waitForParts(1, of: stack, while: syncing)
        kill(syncing.processIdentifier, SIGKILL)
        await Self.exit(of: syncing)
        let stored = Int(try await stack.sql("SELECT count(*) FROM blob_upload_parts").first ?? "0") ?? 0
        #expect(stored > 0 && stored < chunks, "killed mid-upload (\(stored) of \(chunks) chunks stored)")
        #expect(
            try await stack.sql("SELECT count(*) FROM events WHERE type = 'note.attachmentAdded'") == ["0"],
            "the attachment's event waits for its blob")

        try await a("sync")
        let journal = try await a.status().journal.filter { $0.kind == "blob.upload" }
        let detail = try #require(journal.last?.detail)
        let sent = try #require(Int(detail.split(separator: " ").dropFirst(3).first ?? ""), "\(detail)")
        #expect(sent <= chunks - stored + 1, "the rerun sent \(sent) chunks; the server lacked \(chunks - stored)")
        #expect(try await stack.sql("SELECT count(*) FROM blobs") == ["1"])
        #expect(try await stack.sql("SELECT count(*) FROM events WHERE type = 'note.attachmentAdded'") == ["1"])

        let b = stack.agent("b", token: token)
        try await b("sync")
        let listed = try JSONDecoder().decode([Listed].self, from: Data(try await b("note", "files", note).utf8))
        #expect(listed.map(\.hash) == [hash] && listed.first?.local == false)
        let copy = stack.directory.appendingPathComponent("copy.jpg")
        try await b("note", "open", note, "photo.jpg", "--out", copy.path)
        #expect(Self.sha256(try Data(contentsOf: copy)) == hash, "byte-identical on the second device")
        let after = try JSONDecoder().decode([Listed].self, from: Data(try await b("note", "files", note).utf8))
        #expect(after.first?.local == true, "kept in the second device's cache")
        #expect(try await a("export", "--state") == b("export", "--state"))
    }

    @Test func twoDevicesAttachingTheSameFileOfflineStoreItOnce() async throws {
        let stack = try await Stack(serverEnvironment: Self.environment)
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        let b = stack.agent("b", token: token)
        let (file, hash) = try Self.randomFile(
            in: stack.directory, name: "scan.pdf", bytes: 3 * Self.chunkBytes + 17, seed: 7)
        let first = try await a("note", "create", "--scope", "team-1", "--title", "A")
        let second = try await b("note", "create", "--scope", "team-1", "--title", "B")
        try await a("note", "attach", first, file.path)
        try await b("note", "attach", second, file.path, "--name", "same scan.pdf")
        try await a("sync")
        try await b("sync")
        try await a("sync")
        #expect(try await stack.sql("SELECT count(*) FROM blobs") == ["1"], "stored once")
        #expect(try await stack.sql("SELECT hash FROM blobs") == [hash])
        #expect(try await a("export", "--state") == b("export", "--state"))
        let listed = try JSONDecoder().decode([Listed].self, from: Data(try await a("note", "files", second).utf8))
        #expect(listed.map(\.name) == ["same scan.pdf"] && listed.first?.local == true, "the bytes were here already")
    }

    @Test func anUploadCutByAServerRestartResumes() async throws {
        let stack = try await Stack(serverEnvironment: Self.environment)
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        let chunks = 48
        let (file, hash) = try Self.randomFile(
            in: stack.directory, name: "talk.m4a", bytes: chunks * Self.chunkBytes, seed: 3)
        let note = try await a("note", "create", "--scope", "team-1", "--title", "Talk")
        try await a("note", "attach", note, file.path)
        // Through a proxy at 4 MiB/s: the upload takes seconds, however fast the machine.
        let slow = try await Proxy(stack, ["--bandwidth", "4MiB"])
        let syncing = try slow.route(a).start(["sync"])
        try await Self.waitForParts(2, of: stack, while: syncing)
        // The server dies mid-upload and comes back while the agent retries the chunk it was sending.
        await stack.killServer()
        let stored = Int(try await stack.sql("SELECT count(*) FROM blob_upload_parts").first ?? "0") ?? 0
        #expect(try await stack.sql("SELECT count(*) FROM blobs") == ["0"] && stored < chunks, "cut mid-upload")
        try await stack.startServer()
        await Self.exit(of: syncing)
        #expect(syncing.terminationStatus == 0, "the same run resumed on the restarted server")
        try await a("sync")
        #expect(try await a.status().pending == 0)
        #expect(try await stack.sql("SELECT hash FROM blobs") == [hash])
        let b = stack.agent("b", token: token)
        try await b("sync")
        let copy = stack.directory.appendingPathComponent("copy.m4a")
        try await b("note", "open", note, "talk.m4a", "--out", copy.path)
        #expect(Self.sha256(try Data(contentsOf: copy)) == hash)
    }

    /// `sync-fault-proxy` resets every connection after 1 byte to 2 MiB of its answer: a download of 6 MiB
    /// through it is cut again and again, and each attempt resumes with `Range` where the last one stopped.
    ///
    /// What proves the resume is what the device received, summed over every `note open` run (each reports
    /// `downloaded N bytes in all`, whether it finished or not): exactly the blob's size, so no attempt got a
    /// byte an earlier one had already kept. The bytes that crossed the proxy are not that measure: they
    /// include what the proxy wrote into the device's socket before a reset discarded it, which grows with a
    /// loaded machine's socket buffers (8.6 MB for this 6 MiB blob in a loaded run).
    @Test func aDownloadCutByTheNetworkResumesWhereItStopped() async throws {
        let stack = try await Stack(serverEnvironment: Self.environment)
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        let size = 6 << 20
        let (file, hash) = try Self.randomFile(in: stack.directory, name: "video.mp4", bytes: size, seed: 11)
        let note = try await a("note", "create", "--scope", "team-1", "--title", "Clip")
        try await a("note", "attach", note, file.path)
        try await a("sync")

        let proxy = try await Proxy(stack, ["--reset", "1", "--reset-after", String(2 << 20), "--seed", "46"])
        let b = stack.agent("b", token: token)
        try await b("sync")
        let throughProxy = proxy.route(b)
        let copy = stack.directory.appendingPathComponent("copy.mp4")
        // Each run makes up to 8 attempts; the partial file carries over from one run to the next.
        var opened = false
        var received = 0
        var reports: [String] = []
        for _ in 0..<4 where !opened {
            let run = try await throughProxy.capturing(["note", "open", note, "video.mp4", "--out", copy.path])
            opened = run.status == 0
            let total = run.stderr.split(separator: "\n").last {
                $0.hasPrefix("downloaded ") && $0.hasSuffix(" in all")
            }
            reports.append(total.map(String.init) ?? "(no total)")
            received += total.flatMap { Int($0.split(separator: " ")[1]) } ?? 0
        }
        #expect(opened)
        #expect(Self.sha256(try Data(contentsOf: copy)) == hash, "byte-identical after the cuts")
        struct Stats: Decodable {
            var connectionsReset: Int
        }
        let stats = try await JSONDecoder().decode(
            Stats.self,
            from: Data(try Stack.run("/usr/bin/env", ["curl", "-sf", "http://127.0.0.1:\(proxy.control)/stats"]).utf8))
        #expect(stats.connectionsReset >= 2, "the download was cut \(stats.connectionsReset) times")
        #expect(
            received == size, "resumed, not restarted: the device received \(received) bytes for \(size): \(reports)")
    }

    /// A blob whose last note is deleted is collected once the deletion is stable, never before: while a device
    /// that has not seen the deletion holds the stable point back, the blob stays and that device can still
    /// read it. A note folded into a snapshot keeps its attachment, and afterwards the store holds only what
    /// live notes refer to.
    @Test func aBlobIsCollectedOnceTheDeletionOfItsLastNoteIsStableAndNotBefore() async throws {
        let stack = try await Stack(
            serverEnvironment: Self.environment.merging(["SYNC_BLOB_COLLECT_AFTER_SECONDS": "0"]) { $1 })
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        let b = stack.agent("b", token: token)
        let (doomedFile, _) = try Self.randomFile(in: stack.directory, name: "old.pdf", bytes: 700_000, seed: 21)
        let (keptFile, keptHash) = try Self.randomFile(in: stack.directory, name: "kept.png", bytes: 500_000, seed: 22)
        let doomed = try await a("note", "create", "--scope", "team-1", "--title", "to delete")
        let kept = try await a("note", "create", "--scope", "team-1", "--title", "to keep")
        try await a("note", "attach", doomed, doomedFile.path)
        try await a("note", "attach", kept, keptFile.path)
        try await a("sync")
        try await b("sync")
        try await b("sync")
        try await a("note", "delete", doomed)
        try await a("sync")
        try await a("sync")

        struct Report: Decodable {
            var collectedBlobs: Int
        }
        func compact() async throws -> Report {
            // The server reads a scope's stable point at most once a second (SYNC_STABLE_POINT_REFRESH_MS).
            try await Task.sleep(for: .milliseconds(1100))
            return try await JSONDecoder().decode(
                Report.self,
                from: Data(try stack.compact(environment: ["SYNC_BLOB_COLLECT_AFTER_SECONDS": "0"]).utf8))
        }
        // b has not seen the deletion: it is not stable, the blob stays, and b (offline) still reads it.
        #expect(try await compact().collectedBlobs == 0)
        #expect(try await stack.sql("SELECT count(*) FROM blobs") == ["2"])
        let copy = stack.directory.appendingPathComponent("copy.pdf")
        try await b("note", "open", doomed, "old.pdf", "--out", copy.path)
        #expect(try Data(contentsOf: copy) == Data(contentsOf: doomedFile))

        // b syncs (twice: a replica acknowledges a page when it next asks from past it): the deletion is stable.
        try await b("sync")
        try await b("sync")
        try await a("sync")
        #expect(try await compact().collectedBlobs == 1)
        #expect(try await stack.sql("SELECT hash FROM blobs") == [keptHash], "the folded note keeps its attachment")
        let stored = try await stack.sql("SELECT coalesce(sum(length(bytes)), 0) FROM blob_parts")
        #expect(stored == ["500000"], "the store holds only what live notes refer to: \(stored)")
        #expect(try await stack.sql("SELECT count(*) FROM folded_events WHERE type = 'note.snapshot'") == ["1"])

        // A fresh device bootstraps from the snapshot and reads the kept attachment.
        let c = stack.agent("c", token: token)
        try await c("sync")
        let keptCopy = stack.directory.appendingPathComponent("copy.png")
        try await c("note", "open", kept, "kept.png", "--out", keptCopy.path)
        #expect(Self.sha256(try Data(contentsOf: keptCopy)) == keptHash)
        #expect(try await c("export", "--state") == a("export", "--state"))
    }

    /// A file attached to a note whose creation the quota then rejects: nothing refuses the attachment's event
    /// (a rule sees only the creation), so the server accepts it, while no device shows the note (it was never
    /// created). Once that is stable, compaction drops the note, a stream of that single event, and collection
    /// deletes the blob nobody can read any more: the leak `sync-load`'s verdict once found after a run with a
    /// quota. The blob must answer 404 afterwards.
    @Test func theBlobOfANoteWhoseCreationWasRejectedIsCollected() async throws {
        // The server folds nothing by itself: only the `compact` below does.
        let stack = try await Stack(
            noteQuota: 1,
            serverEnvironment: Self.environment.merging([
                "SYNC_BLOB_COLLECT_AFTER_SECONDS": "0", "SYNC_COMPACTION_INTERVAL_SECONDS": "0",
            ]) { $1 })
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        let allowed = try await a("note", "create", "--scope", "team-1", "--title", "the one the quota allows")
        try await a("sync")
        // Offline: the note past the quota, and a file attached to it while its creation is pending.
        let (file, hash) = try Self.randomFile(in: stack.directory, name: "orphan.bin", bytes: 300_000, seed: 31)
        let rejected = try await a("note", "create", "--scope", "team-1", "--title", "past the quota")
        #expect(try await a("note", "attach", rejected, file.path) == hash)
        try await a("sync")
        let status = try await a.status()
        #expect(status.pending == 0)
        #expect(
            status.rejected.count == 1 && status.rejected.first?.code == "validation.failed", "the creation only")
        let stream = "note:\(rejected)"
        #expect(try await stack.sql("SELECT type FROM events WHERE stream = '\(stream)'") == ["note.attachmentAdded"])
        #expect(try await a.state().keys.sorted() == [allowed], "the device hides the note it could not create")

        // The HTTP status of `HEAD` (or `GET`) of the blob in team-1.
        func blobStatus(head: Bool) async throws -> String {
            var arguments = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}"]
            arguments += ["-H", "Authorization: Bearer \(token)"]
            if head { arguments.append("-I") }
            arguments.append("\(stack.serverURL)/v1/blobs/\(hash)?scope=team-1")
            let code = try await Stack.run("/usr/bin/env", arguments)
            return code.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try await blobStatus(head: true) == "200", "stored and referred to")

        // A second sync acknowledges everything: all of it is stable.
        try await a("sync")
        struct Report: Decodable {
            var collectedBlobs: Int
        }
        // The server reads a scope's stable point at most once a second (SYNC_STABLE_POINT_REFRESH_MS).
        try await Task.sleep(for: .milliseconds(1100))
        let report = try JSONDecoder().decode(
            Report.self,
            from: Data(try await stack.compact(environment: ["SYNC_BLOB_COLLECT_AFTER_SECONDS": "0"]).utf8))
        #expect(report.collectedBlobs == 1, "the never-created note's blob is collected")
        #expect(try await stack.sql("SELECT count(*) FROM blobs") == ["0"])
        #expect(try await stack.sql("SELECT count(*) FROM blob_refs") == ["0"])
        #expect(try await stack.sql("SELECT count(*) FROM folded_events WHERE stream = '\(stream)'") == ["0"])
        #expect(try await stack.sql("SELECT count(*) FROM events WHERE stream = '\(stream)'") == ["0"])
        #expect(try await blobStatus(head: true) == "404")
        #expect(try await blobStatus(head: false) == "404")

        // A fresh device reads what the first one shows: the note the quota allowed, and nothing else.
        let c = stack.agent("c", token: token)
        try await c("sync")
        #expect(try await c.state().keys.sorted() == [allowed])
        #expect(try await c("export", "--state") == a("export", "--state"))
    }

    /// A 1 GiB file up and down (`sync-bench blobs`: a device uploads it in 4 MiB chunks to the default
    /// PostgreSQL store, another downloads it): neither the device's nor the server's resident memory grows by
    /// more than a few chunks. The bound is generous (the benchmark measures it exactly); holding the file
    /// would take 1 GiB.
    @Test func aGigabyteUpAndDownKeepsBothProcessesMemoryFlat() async throws {
        let stack = try await Stack()
        let token = try await stack.token(scopes: ["bench-blobs"])
        let pid = try #require(stack.serverProcessIdentifier)
        let output = try await Stack.run(
            Stack.productsDirectory.appendingPathComponent("sync-bench").path,
            [
                "blobs", "--server", stack.serverURL, "--token", token, "--mib", "1024", "--runs", "1",
                "--server-pid", String(pid), "--directory", stack.directory.appendingPathComponent("blobs").path,
                "--json",
            ])
        struct Result: Decodable {
            var bytes: Int
            var deviceGrowthBytes: Int
            var serverGrowthBytes: Int?
        }
        let result = try JSONDecoder().decode(Result.self, from: Data(output.utf8))
        #expect(result.bytes == 1 << 30)
        let bound = 128 << 20
        #expect(result.deviceGrowthBytes < bound, "the device grew by \(result.deviceGrowthBytes >> 20) MiB")
        let server = try #require(result.serverGrowthBytes)
        #expect(server < bound, "the server grew by \(server >> 20) MiB")
    }

    /// The blob routes through URLSession (`HTTPTransport`, what apps on Apple platforms use), against the real
    /// server: a blob of several chunks uploaded by one device's queue, read back by another's, byte for byte;
    /// and a download resumed from a partial file with `Range`.
    @Test func theURLSessionTransportMovesBlobsToo() async throws {
        let stack = try await Stack(serverEnvironment: Self.environment)
        let token = try await stack.token(scopes: ["team-1"])
        let transport = HTTPTransport(baseURL: URL(string: stack.serverURL)!, token: token)
        let (file, hash) = try Self.randomFile(
            in: stack.directory, name: "a.bin", bytes: 3 * Self.chunkBytes + 5, seed: 77)

        let upStore = try EventStore(path: stack.directory.appendingPathComponent("up.sqlite").path)
        let up = BlobSync(local: try LocalBlobs(store: upStore), transport: transport)
        let reference = try await up.local.add(file: file)
        var draft = EventDraft(
            scope: "team-1", stream: "files", type: "file.added", payload: reference.json)
        draft.blobs = [reference]
        try await upStore.append([draft])
        let report = await up.uploadPending()
        #expect(report.committed == 1 && report.chunks == 4, "\(report)")
        #expect(try await stack.sql("SELECT hash FROM blobs") == [hash])

        let downStore = try EventStore(path: stack.directory.appendingPathComponent("down.sqlite").path)
        let down = BlobSync(local: try LocalBlobs(store: downStore), transport: transport)
        // Half of it arrived before: the rest comes with Range.
        let bytes = try Data(contentsOf: file)
        try bytes.prefix(bytes.count / 2).write(to: down.local.directory.appendingPathComponent(hash + ".part"))
        let opened = try await down.open(reference, scope: "team-1")
        #expect(Self.sha256(try Data(contentsOf: opened)) == hash)
        #expect(down.progress.downloadedBytes == Int64(bytes.count - bytes.count / 2), "only the rest was fetched")
    }
}
