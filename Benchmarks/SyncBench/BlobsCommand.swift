import ArgumentParser
import Foundation
import NotesStore
import SyncEngine
import SyncEngineHTTPClient
import SyncModels
import SyncTestSupport

/// `sync-bench blobs`: one large attachment up and down through the blob routes, against `curl` moving the
/// same bytes to and from a plain static route (nginx's `PUT` and `GET` of a file) in the same run.
///
/// Each run makes a new file of `--mib` MiB of random bytes (a new hash, so the server has to take it), attaches
/// it on a fresh device and times `BlobSync.uploadPending()` (its session, every chunk, the commit), then times
/// `BlobSync.open` on a second fresh device (the download into the cache, checked against the hash). `curl`
/// then puts and gets the same file at `--baseline-url`, the get twice: into a file beside the device's (the
/// bytes kept, as a device keeps them) and into `/dev/null` (the transfer alone). Memory: the growth of this process's peak resident
/// size over each transfer, and with `--server-pid` the server's, sampled every 20 ms.
struct BlobsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "blobs", abstract: "A large attachment up and down, against curl on a static route.")

    @Option(help: "Base URL of the server.") var server: String = "http://127.0.0.1:8080"
    @Option(help: "Bearer token granting --scope (or SYNC_TOKEN).") var token: String?
    @Option(help: "The scope the attachments go to.") var scope: String = "bench-blobs"
    @Option(help: "The file's size in MiB.") var mib: Int = 100
    @Option(help: "Runs (medians are reported).") var runs: Int = 3
    @Option(help: "The server's process id, to sample its resident memory.") var serverPid: Int32?
    @Option(help: "A URL prefix where curl may PUT and GET files (nginx with dav_methods PUT); none: no baseline.")
    var baselineURL: String?
    @Option(help: "Directory for the files (a temporary one, removed after, by default).") var directory: String?
    @Option(help: "What the server keeps blobs in, for the report (e.g. postgres, directory).") var store: String?
    @Flag(help: "Print one JSON object instead of text.") var json = false

    struct Run: Codable {
        var uploadSeconds: Double
        var downloadSeconds: Double
        var curlUploadSeconds: Double?
        /// curl's get into `/dev/null`, and into a file.
        var curlDownloadSeconds: Double?
        var curlDownloadToFileSeconds: Double?
        var deviceUploadGrowthBytes: Int
        var deviceDownloadGrowthBytes: Int
        var serverUploadGrowthBytes: Int?
        var serverDownloadGrowthBytes: Int?
    }

    struct Result: Codable {
        var store: String?
        var bytes: Int
        var chunkBytes: Int?
        var runs: [Run]
        /// Medians, in MiB/s, and the ratios to curl (ours / curl's throughput: 1 is as fast).
        var uploadMiBPerSecond: Double
        var downloadMiBPerSecond: Double
        var curlUploadMiBPerSecond: Double?
        var curlDownloadMiBPerSecond: Double?
        var uploadRatio: Double?
        var downloadRatio: Double?
        /// The download against curl's get into a file.
        var curlDownloadToFileMiBPerSecond: Double?
        var downloadToFileRatio: Double?
        /// The largest growth of resident memory over a transfer, of the device and of the server.
        var deviceGrowthBytes: Int
        var serverGrowthBytes: Int?
    }

    func run() async throws {
        guard let base = URL(string: server) else { throw ValidationError("--server is not a URL") }
        let bearer = token ?? ProcessInfo.processInfo.environment["SYNC_TOKEN"]
        let scope = try Scope(self.scope)
        let folder = URL(
            fileURLWithPath: directory ?? NSTemporaryDirectory() + "sync-bench-blobs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { if directory == nil { try? FileManager.default.removeItem(at: folder) } }
        let bytes = mib << 20
        var results: [Run] = []
        var chunkBytes: Int?
        for index in 0..<runs {
            let file = folder.appendingPathComponent("file-\(index).bin")
            // A seed of its own for every file, so that no run (nor the run of another store in the same
            // second) uploads bytes a device or the server already holds.
            try Self.writeRandom(to: file, bytes: bytes, seed: .random(in: .min ... .max))
            let transport = HTTPClientTransport(baseURL: base, token: bearer, timeout: .seconds(120))

            // Upload from a fresh device.
            let uploader = try NotesClient.open(path: folder.appendingPathComponent("up-\(index).sqlite").path)
            let upBlobs = BlobSync(local: try LocalBlobs(store: uploader.store), transport: transport)
            let reference = try await upBlobs.local.add(file: file, type: "application/octet-stream")
            let note = try await uploader.create(scope: scope, title: "blob \(index)")
            try await uploader.attach(note, name: "file.bin", blob: reference)
            let (upSeconds, upDevice, upServer, report) = try await measure {
                await upBlobs.uploadPending()
            }
            guard report.committed == 1 else {
                throw ValidationError(
                    "the upload did not commit: \(report.lastFailure.map(String.init(describing:)) ?? "nothing was waiting for its upload (the device held these bytes already)")"
                )
            }
            chunkBytes = chunkBytes ?? (report.chunks > 1 ? Int(report.bytes) / report.chunks : nil)

            // Download on another fresh device.
            let reader = try NotesClient.open(path: folder.appendingPathComponent("down-\(index).sqlite").path)
            let downBlobs = BlobSync(
                local: try LocalBlobs(store: reader.store, cacheBytes: Int64(bytes) * 2), transport: transport)
            let (downSeconds, downDevice, downServer, _) = try await measure {
                try await downBlobs.open(reference, scope: scope)
            }

            var run = Run(
                uploadSeconds: upSeconds, downloadSeconds: downSeconds, deviceUploadGrowthBytes: upDevice,
                deviceDownloadGrowthBytes: downDevice, serverUploadGrowthBytes: upServer,
                serverDownloadGrowthBytes: downServer)
            if let baselineURL {
                let target = baselineURL + (baselineURL.hasSuffix("/") ? "" : "/") + "file-\(index).bin"
                run.curlUploadSeconds = try Self.timed { try Self.curl(["-T", file.path, target]) }
                run.curlDownloadSeconds = try Self.timed { try Self.curl(["-o", "/dev/null", target]) }
                let copy = folder.appendingPathComponent("curl-\(index).bin")
                run.curlDownloadToFileSeconds = try Self.timed { try Self.curl(["-o", copy.path, target]) }
                try? FileManager.default.removeItem(at: copy)
            }
            results.append(run)
            for url in [file] { try? FileManager.default.removeItem(at: url) }
            if !json {
                FileHandle.standardError.write(
                    Data(
                        "run \(index + 1): up \(String(format: "%.2f", upSeconds)) s, down \(String(format: "%.2f", downSeconds)) s\(run.curlUploadSeconds.map { String(format: ", curl up %.2f s", $0) } ?? "")\(run.curlDownloadSeconds.map { String(format: ", curl down %.2f s", $0) } ?? "")\n"
                            .utf8))
            }
        }
        let mibs = Double(bytes) / Double(1 << 20)
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        let up = mibs / median(results.map(\.uploadSeconds))
        let down = mibs / median(results.map(\.downloadSeconds))
        let curlUp =
            results.compactMap(\.curlUploadSeconds).isEmpty
            ? nil : mibs / median(results.compactMap(\.curlUploadSeconds))
        let curlDown =
            results.compactMap(\.curlDownloadSeconds).isEmpty
            ? nil : mibs / median(results.compactMap(\.curlDownloadSeconds))
        let curlDownToFile =
            results.compactMap(\.curlDownloadToFileSeconds).isEmpty
            ? nil : mibs / median(results.compactMap(\.curlDownloadToFileSeconds))
        let serverGrowth = results.flatMap { [$0.serverUploadGrowthBytes, $0.serverDownloadGrowthBytes] }.compactMap {
            $0
        }
        var result = Result(
            store: store, bytes: bytes, chunkBytes: chunkBytes, runs: results, uploadMiBPerSecond: up,
            downloadMiBPerSecond: down,
            curlUploadMiBPerSecond: curlUp, curlDownloadMiBPerSecond: curlDown, uploadRatio: curlUp.map { up / $0 },
            downloadRatio: curlDown.map { down / $0 },
            deviceGrowthBytes: results.map { max($0.deviceUploadGrowthBytes, $0.deviceDownloadGrowthBytes) }.max() ?? 0,
            serverGrowthBytes: serverGrowth.max())
        result.curlDownloadToFileMiBPerSecond = curlDownToFile
        result.downloadToFileRatio = curlDownToFile.map { down / $0 }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            FileHandle.standardOutput.write(try encoder.encode(result) + Data("\n".utf8))
        } else {
            print(
                String(
                    format: "blobs: %d MiB up %.1f MiB/s, down %.1f MiB/s", mib, result.uploadMiBPerSecond,
                    result.downloadMiBPerSecond)
                    + (result.uploadRatio.map { String(format: " (%.2fx curl up", $0) } ?? "")
                    + (result.downloadRatio.map { String(format: ", %.2fx curl down", $0) } ?? "")
                    + (result.downloadToFileRatio.map { String(format: ", %.2fx curl down to a file)", $0) } ?? "")
                    + "; device memory +\(result.deviceGrowthBytes >> 20) MiB"
                    + (result.serverGrowthBytes.map { ", server +\($0 >> 20) MiB" } ?? ""))
        }
    }

    /// Runs `body`, timing it and sampling resident memory: this process's peak growth over its resident size
    /// before, and the server's largest resident size seen over its size before.
    func measure<T: Sendable>(_ body: () async throws -> T) async throws -> (Double, Int, Int?, T) {
        let pid = serverPid
        let serverBefore = pid.map { ProcessMemory.bytes("VmRSS", pid: String($0)) }
        ProcessMemory.resetPeak()
        let deviceBefore = ProcessMemory.resident
        let sampler = Task { () -> Int in
            var highest = 0
            while !Task.isCancelled {
                if let pid { highest = max(highest, ProcessMemory.bytes("VmRSS", pid: String(pid))) }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return highest
        }
        let started = ContinuousClock.now
        let value = try await body()
        let seconds = (ContinuousClock.now - started) / .seconds(1)
        sampler.cancel()
        let serverHighest = await sampler.value
        let deviceGrowth = max(0, ProcessMemory.peak - deviceBefore)
        return (seconds, deviceGrowth, serverBefore.map { max(0, serverHighest - $0) }, value)
    }

    /// Writes `bytes` pseudo-random bytes a MiB at a time (never the whole file in memory).
    static func writeRandom(to url: URL, bytes: Int, seed: UInt64) throws {
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        var random = SplitMix64(seed: seed)
        var written = 0
        while written < bytes {
            let count = min(1 << 20, bytes - written)
            var piece = [UInt64](repeating: 0, count: (count + 7) / 8)
            for index in piece.indices { piece[index] = random.next() }
            try handle.write(contentsOf: piece.withUnsafeBytes { Data($0.prefix(count)) })
            written += count
        }
    }

    static func timed(_ body: () throws -> Void) throws -> Double {
        let started = ContinuousClock.now
        try body()
        return (ContinuousClock.now - started) / .seconds(1)
    }

    static func curl(_ arguments: [String]) throws {
        let result = try ChildProcess.run(
            "/usr/bin/env", ["curl", "-sSf"] + arguments, environment: ProcessInfo.processInfo.environment)
        guard result.status == 0 else {
            throw ValidationError(
                "curl \(arguments.joined(separator: " ")) failed: \(String(decoding: result.stderr, as: UTF8.self))")
        }
    }
}
