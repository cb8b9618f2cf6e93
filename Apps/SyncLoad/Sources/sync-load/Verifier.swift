import AsyncHTTPClient
import Foundation
import GRDB
import NotesDomain
import NotesStore
import SyncEngine
import SyncEngineHTTPClient
import SyncModels
import SyncProtocol
import SyncToolSupport
import Synchronization

/// One thing the verdict found wrong, with where.
struct Finding: Codable, Sendable, CustomStringConvertible {
    var device: Int?
    var scope: String
    var event: String?
    var detail: String

    var description: String {
        "scope \(scope)" + (device.map { ", device \($0)" } ?? "") + (event.map { ", event \($0)" } ?? "")
            + ": \(detail)"
    }
}

/// The end of a run: whether anything was lost, duplicated or left diverged.
struct Verdict: Codable, Sendable {
    var passed: Bool
    /// Seconds from the end of writing until every outbox was empty and a whole pass moved nothing.
    var settleSeconds: Double
    var serverEvents: Int
    /// Events the devices made and the server did not reject (each must be on the server exactly once).
    var deviceEvents: Int
    /// Events the server rejected (each must be absent from it, and rolled back on its device), and by code.
    var rejected: Int
    var rejectedByCode: [String: Int]
    var lost: Int
    var duplicated: Int
    var diverged: Int
    var rejectedOnServer: Int
    var unsettled: Int
    var gaps: Int
    /// Scopes a fresh device could not bootstrap (the server serves something a client refuses).
    var bootstrap: Int
    /// What thin devices received wrong: a seq skipped or delivered twice, an event that differs from the
    /// server's, a device that never reached its scope's head (absent in earlier versions).
    var delivery: Int? = nil
    /// Devices whose checksums still differ from the server's after the settle, each verified and repaired
    /// once more there (absent in earlier versions).
    var checksums: Int? = nil
    /// Ranges repaired and resets made by the devices' verification during the run and the settle (absent in
    /// earlier versions).
    var repairs: Int? = nil
    /// Attachments checked (every attachment of every live note, on every device and on a fresh device of
    /// its scope: readable, its bytes matching its hash), and those that were not (absent in earlier
    /// versions).
    var blobsChecked: Int? = nil
    var blobs: Int? = nil
    /// After the collection command (`--collect-command`): blobs that no live note refers to any more and
    /// that the collection removed, and those still there (orphans: the verdict fails). Absent when no
    /// collection ran.
    var blobsCollected: Int? = nil
    var orphans: Int? = nil
    /// The first findings of each kind (at most 20 each).
    var findings: [String: [Finding]]
}

/// Brings every device online without faults, syncs them until quiet, then checks them against the
/// server's log (read through the API) and against fresh devices bootstrapped from it.
struct Verifier {
    let manifest: Manifest
    let tokens: Tokens
    let http: HTTPClient
    let baseURL: URL
    /// A shell command that compacts and collects on the server once everything has settled (none: the
    /// collection is not checked).
    var collectCommand: String? = nil

    static let shown = 20

    func settleAndVerify(_ devices: [Device], thin: [ThinDevice] = []) async throws -> Verdict {
        let start = ContinuousClock.now
        let deadline = start + .seconds(manifest.configuration.settleTimeout)
        for device in thin {
            device.transport.stopFaults()
            device.transport.setOnline(true)
        }
        var unsettled = await drain(thin, until: deadline)
        unsettled += await settle(devices, timeout: deadline - .now)
        let log = try await serverLog()
        unsettled += await follow(thin, to: log, until: deadline)
        let settleSeconds = (ContinuousClock.now - start).secondsValue
        let (repairs, sums) = await verifyChecksums(devices)
        var verdict = try await verify(devices, thin: thin, log: log)
        verdict.repairs = repairs
        verdict.checksums = sums.count
        if !sums.isEmpty { verdict.findings["checksums"] = Array(sums.prefix(Self.shown)) }
        verdict.passed = verdict.passed && sums.isEmpty
        verdict.settleSeconds = settleSeconds
        verdict.unsettled = unsettled.count
        if !unsettled.isEmpty { verdict.findings["unsettled"] = Array(unsettled.prefix(Self.shown)) }
        verdict.passed = verdict.passed && unsettled.isEmpty
        return verdict
    }

    /// Verifies every device against the server's checksums, repairing what differs (`SyncEngine.verify`),
    /// then once more without repairing; returns the repairs the devices' journals hold and the devices that
    /// still differ.
    func verifyChecksums(_ devices: [Device]) async -> (repairs: Int, findings: [Finding]) {
        let repairs = Mutex(0)
        let failed = Mutex<[Finding]>([])
        await forEach(devices, concurrency: 16) { device in
            guard let engine = device.engine else { return }
            do {
                // Through the same network as the run: a fault may outlast it by a moment (`retrying`).
                try await Self.retrying { try await engine.verify() }
                // Those of the whole run: the journal is in the device's file, across its crashes.
                let made = try await engine.journal.entries(limit: 100_000).count {
                    $0.kind == "verify.repair" || $0.kind == "verify.reset"
                }
                repairs.withLock { $0 += made }
                let again = try await Self.retrying { try await engine.verify(repair: false) }
                for result in again where result.outcome == .mismatched {
                    failed.withLock {
                        $0.append(
                            Finding(
                                device: device.plan.index, scope: result.scope,
                                detail: "its checksums differ from the server's: \(result.detail)"))
                    }
                }
            } catch {
                failed.withLock {
                    $0.append(
                        Finding(device: device.plan.index, scope: device.plan.scope, detail: "verify failed: \(error)"))
                }
            }
        }
        return (repairs.withLock { $0 }, failed.withLock { $0 })
    }

    /// Waits until every thin device's outbox is empty (their push loops run on); returns those still
    /// holding events at the deadline.
    func drain(_ thin: [ThinDevice], until deadline: ContinuousClock.Instant) async -> [Finding] {
        while ContinuousClock.now < deadline, thin.contains(where: { $0.pending > 0 }) {
            try? await Task.sleep(for: .milliseconds(100))
        }
        return thin.filter { $0.pending > 0 }.map {
            Finding(device: $0.plan.index, scope: $0.plan.scope, detail: "\($0.pending) events still in the outbox")
        }
    }

    /// Waits until every thin device has received its scope to the head of `log` (their receive loops run
    /// on); returns those still behind at the deadline.
    func follow(_ thin: [ThinDevice], to log: [String: [Event]], until deadline: ContinuousClock.Instant) async
        -> [Finding]
    {
        func behind(_ device: ThinDevice) -> Bool { device.position < (log[device.plan.scope]?.last?.seq ?? 0) }
        while ContinuousClock.now < deadline, thin.contains(where: behind) {
            try? await Task.sleep(for: .milliseconds(100))
        }
        return thin.filter(behind).map {
            Finding(
                device: $0.plan.index, scope: $0.plan.scope,
                detail: "received up to seq \($0.position) of \(log[$0.plan.scope]?.last?.seq ?? 0)")
        }
    }

    /// Stops background sync and faults, then syncs every device (16 at a time) in passes until a whole pass
    /// pushes and pulls nothing and every outbox is empty; returns the devices that never got there.
    func settle(_ devices: [Device], timeout: Duration) async -> [Finding] {
        guard !devices.isEmpty else { return [] }
        for device in devices {
            await device.stopSync()
            device.transport.stopFaults()
            device.transport.setOnline(true)
            if device.engine == nil { try? device.open() }
        }
        let deadline = ContinuousClock.now + timeout
        var failures: [Int: String] = [:]
        while ContinuousClock.now < deadline {
            let moved = Mutex(0)
            let failed = Mutex<[Int: String]>([:])
            await forEach(devices, concurrency: 16) { device in
                guard let engine = device.engine else {
                    failed.withLock { $0[device.plan.index] = "the replica could not be opened" }
                    return
                }
                let before = try? await engine.store.counts()
                do {
                    try await engine.syncNow()
                } catch {
                    failed.withLock { $0[device.plan.index] = "sync failed: \(error)" }
                }
                let after = try? await engine.store.counts()
                if before != after || (after?[.pending] ?? 1) > 0 { moved.withLock { $0 += 1 } }
            }
            failures = failed.withLock { $0 }
            if moved.withLock({ $0 }) == 0 && failures.isEmpty { return [] }
        }
        var findings: [Finding] = []
        for device in devices {
            let pending = (try? await device.engine?.store.counts()[.pending]) ?? nil
            if let failure = failures[device.plan.index] {
                findings.append(Finding(device: device.plan.index, scope: device.plan.scope, detail: failure))
            } else if let pending, pending > 0 {
                findings.append(
                    Finding(
                        device: device.plan.index, scope: device.plan.scope, detail: "\(pending) events still pending"))
            }
        }
        if findings.isEmpty {
            findings.append(
                Finding(scope: "*", detail: "devices were still syncing new events when the settle timed out"))
        }
        return findings
    }

    /// An event as the server holds it.
    struct ServerEvent {
        var id: String
        var dot: Dot
        var seq: Int64
    }

    /// Checks (1) every event a device made and the server did not reject is on the server exactly once
    /// (by id, and by its dot: a copy under a new id is a duplicate too), (2) every rejected event is absent
    /// from the server, (3) every device's state equals that of a fresh device bootstrapped from the
    /// server (so rejected events are rolled back), (4) each scope's seqs are gap-free, (5) every thin device
    /// received its scope's log exactly, (6) every live note's attachments are readable, and (7) with a
    /// collection command, that the collection leaves no orphan. The phases run in this order, so the first
    /// findings shown of each kind are the same whatever a phase's code.
    func verify(_ devices: [Device], thin: [ThinDevice], log events: [String: [Event]]) async throws -> Verdict {
        var findings = Findings()
        let log = Self.index(events, into: &findings)
        var made = try await Self.checkReplicas(devices, against: log, into: &findings)
        Self.checkCopiesUnderTheirDots(log, of: made, into: &findings)
        Self.checkThinDevices(thin, against: log, events: events, made: &made, into: &findings)
        let scopes = try await checkScopes(devices, into: &findings)
        var collection: (collected: Int, orphans: Int)?
        if let collectCommand {
            let checked = try await checkCollection(
                command: collectCommand, attached: Self.attachedBlobs(events), live: scopes.live)
            for (kind, finding) in checked.findings { findings.found(kind, finding) }
            collection = (checked.collected, checked.orphans)
        }
        let failed = [
            "lost", "duplicated", "diverged", "rejectedOnServer", "gaps", "bootstrap", "delivery", "blobs", "orphans",
            "collection",
        ]
        .contains { findings[$0] > 0 }
        return Verdict(
            passed: !failed, settleSeconds: 0, serverEvents: log.byScope.values.reduce(0) { $0 + $1.count },
            deviceEvents: made.made, rejected: made.rejected, rejectedByCode: made.rejectedByCode,
            lost: findings["lost"], duplicated: findings["duplicated"], diverged: findings["diverged"],
            rejectedOnServer: findings["rejectedOnServer"], unsettled: 0, gaps: findings["gaps"],
            bootstrap: findings["bootstrap"], delivery: findings["delivery"], blobsChecked: scopes.blobsChecked,
            blobs: findings["blobs"], blobsCollected: collection?.collected, orphans: collection?.orphans,
            findings: findings.shown)
    }

    /// Opens every attachment of every live note `client` shows (downloading what is not on the device, checked
    /// against its hash); returns how many it checked, what failed, and the blobs it saw.
    static func checkAttachments(_ client: NotesClient, _ blobs: BlobSync) async -> (Int, [String], Set<BlobHash>) {
        var checked = 0
        var problems: [String] = []
        var hashes = Set<BlobHash>()
        let notes =
            (try? await client.store.database.read { db in
                try String.fetchAll(db, sql: "SELECT id FROM notes WHERE created = 1 AND deleted = 0")
            }) ?? []
        for note in notes.compactMap(NoteID.init) {
            guard let (scope, attachments) = try? await client.attachments(note) else { continue }
            for attachment in attachments {
                checked += 1
                hashes.insert(attachment.blob.hash)
                do {
                    _ = try await retrying { try await blobs.open(attachment.blob, scope: scope) }
                } catch {
                    problems.append("note \(note) shows \(attachment.blob.hash.hex), which cannot be read: \(error)")
                }
            }
        }
        return (checked, problems, hashes)
    }

    /// Every blob an event of the server's log attached, by scope: the attachments' events and the
    /// attachments of snapshots.
    static func attachedBlobs(_ log: [String: [Event]]) -> [String: Set<BlobHash>] {
        log.mapValues { events in Set(events.flatMap { NoteAttachment.blobs(in: $0).map(\.hash) }) }
    }

    /// Runs the collection command, then asks the server (`HEAD /v1/blobs/{hash}`) for every blob the run
    /// attached: one a live note refers to must still be there (else a `blobs` finding), one none does must be
    /// gone (else an `orphans` finding). The unreferencing is stable by then: every device has settled.
    func checkCollection(command: String, attached: [String: Set<BlobHash>], live: [String: Set<BlobHash>])
        async throws -> (collected: Int, orphans: Int, findings: [(String, Finding)])
    {
        do {
            let run = try await ChildProcess.runOnThread(
                "/bin/sh", ["-c", command], environment: ProcessInfo.processInfo.environment)
            guard run.status == 0 else {
                let output = String(decoding: run.stderr.suffix(2000), as: UTF8.self)
                return (
                    0, 0, [("collection", Finding(scope: "*", detail: "\(command) exited \(run.status): \(output)"))]
                )
            }
        } catch {
            return (0, 0, [("collection", Finding(scope: "*", detail: "\(command): \(error)"))])
        }
        var collected = 0
        var orphans = 0
        var findings: [(String, Finding)] = []
        for (scope, hashes) in attached.sorted(by: { $0.key < $1.key }) {
            let token = try await tokens.token(
                subject: "\(manifest.configuration.scopePrefix)-verifier", scopes: [scope])
            let referenced = live[scope] ?? []
            for hash in hashes.sorted(by: { $0.hex < $1.hex }) {
                let held = try await Self.retrying { try await holds(hash, scope: scope, token: token) }
                switch (referenced.contains(hash), held) {
                case (true, false):
                    findings.append(
                        ("blobs", Finding(scope: scope, detail: "\(hash.hex) is gone while a live note refers to it")))
                case (false, true):
                    orphans += 1
                    findings.append(
                        ("orphans", Finding(scope: scope, detail: "\(hash.hex) is left after the collection")))
                case (false, false):
                    collected += 1
                case (true, true):
                    break
                }
            }
        }
        return (collected, orphans, findings)
    }

    /// Whether the server holds blob `hash` in `scope` (`HEAD`: 200 or 404; anything else throws).
    func holds(_ hash: BlobHash, scope: String, token: String) async throws -> Bool {
        var request = HTTPClientRequest(
            url: HTTPTransport.blobURL(base: baseURL, hash: hash, scope: try Scope(scope)).absoluteString)
        request.method = .HEAD
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        let response = try await http.execute(request, timeout: .seconds(30))
        switch response.status.code {
        case 200: return true
        case 404: return false
        default: throw LoadError("HEAD \(hash.hex) in \(scope): HTTP \(response.status.code)")
        }
    }

    /// Every event of the run's scopes, read with `GET /v1/pull` from the start, by scope in seq order; 100
    /// scopes at a time (a token granting a thousand would not fit a request's headers).
    private func serverLog() async throws -> [String: [Event]] {
        var log: [String: [Event]] = [:]
        let names = manifest.scopes
        for start in stride(from: 0, to: names.count, by: 100) {
            let batch = Array(names[start..<min(names.count, start + 100)])
            let scopes = try batch.map { try Scope($0) }
            let transport = HTTPClientTransport(
                baseURL: baseURL,
                token: try await tokens.token(
                    subject: "\(manifest.configuration.scopePrefix)-verifier", scopes: batch),
                client: http)
            var cursor = ScopeCursor()
            while true {
                let request = PullRequest(cursor: cursor, scopes: scopes, limit: 1000)
                let page = try await Self.retrying { try await transport.pull(request) }
                for event in page.events {
                    log[event.scope.name, default: []].append(event)
                }
                cursor = try ScopeCursor(encoded: page.cursor)
                if !page.hasMore { break }
            }
        }
        return log
    }

    /// `operation`, again after a pause when it fails, up to 8 times: the verdict reads the server through the
    /// same network as the devices, and a network fault may outlast the writing by a moment on a loaded
    /// machine (the chaos runs lift theirs on a timer). What is read is then checked as it is; a retry cannot
    /// hide a lost or diverged event.
    static func retrying<T>(_ operation: () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await operation()
            } catch  where attempt < 8 {
                try await Task.sleep(for: .milliseconds(500 * attempt))
            }
        }
    }

    /// Which notes differ between two exports (canonical JSON objects keyed by note id).
    static func difference(_ a: Data, _ b: Data) -> String {
        guard let left = try? JSONSerialization.jsonObject(with: a) as? [String: Any],
            let right = try? JSONSerialization.jsonObject(with: b) as? [String: Any]
        else { return "\(a.count) bytes against \(b.count)" }
        let missing = Set(right.keys).subtracting(left.keys).sorted()
        let extra = Set(left.keys).subtracting(right.keys).sorted()
        func canonical(_ value: Any?) -> Data? {
            value.flatMap {
                try? JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys, .fragmentsAllowed])
            }
        }
        let changed = Set(left.keys).intersection(right.keys).filter { canonical(left[$0]) != canonical(right[$0]) }
            .sorted()
        var parts: [String] = []
        if !missing.isEmpty { parts.append("missing notes \(missing.prefix(3).joined(separator: ", "))") }
        if !extra.isEmpty { parts.append("extra notes \(extra.prefix(3).joined(separator: ", "))") }
        if !changed.isEmpty { parts.append("different notes \(changed.prefix(3).joined(separator: ", "))") }
        return parts.isEmpty ? "same notes, different bytes" : parts.joined(separator: "; ")
    }
}

/// Runs `body` for every item, at most `concurrency` at a time.
func forEach<T: Sendable>(_ items: [T], concurrency: Int, _ body: @escaping @Sendable (T) async -> Void) async {
    await withTaskGroup(of: Void.self) { group in
        var next = 0
        while next < min(concurrency, items.count) {
            let item = items[next]
            group.addTask { await body(item) }
            next += 1
        }
        while await group.next() != nil {
            if next < items.count {
                let item = items[next]
                group.addTask { await body(item) }
                next += 1
            }
        }
    }
}
