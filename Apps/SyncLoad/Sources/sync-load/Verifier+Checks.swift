import Foundation
import GRDB
import NotesStore
import SyncEngine
import SyncEngineHTTPClient
import SyncModels
import SyncStorage

/// What the verdict's checks found: the first findings of each kind (at most `Verifier.shown`), and how many
/// of each.
struct Findings {
    var shown: [String: [Finding]] = [:]
    var counts: [String: Int] = [:]

    mutating func found(_ kind: String, _ finding: Finding) {
        counts[kind, default: 0] += 1
        if shown[kind, default: []].count < Verifier.shown { shown[kind, default: []].append(finding) }
    }

    /// How many findings of `kind`.
    subscript(kind: String) -> Int { counts[kind, default: 0] }
}

/// The server's log as the checks look it up: each scope's events in seq order, every event by id, and how
/// many events carry each dot.
struct IndexedLog {
    var byScope: [String: [Verifier.ServerEvent]]
    var byID: [String: [Verifier.ServerEvent]] = [:]
    var byDot: [Dot: Int] = [:]
}

/// What the devices made, counted against the log.
struct MadeEvents {
    /// Events made and not rejected (each must be on the server exactly once), and those rejected, by code.
    var made = 0
    var rejected = 0
    var rejectedByCode: [String: Int] = [:]
    /// The full replicas by replica id, and the ids of the events they made.
    var replicas: [ReplicaID: Device] = [:]
    var ownIDs = Set<String>()
}

/// The phases of `Verifier.verify`, in the order it runs them.
extension Verifier {
    /// Indexes the log, finding gaps in each scope's seqs and events on the server twice by id.
    static func index(_ events: [String: [Event]], into findings: inout Findings) -> IndexedLog {
        var log = IndexedLog(
            byScope: events.mapValues { events in
                events.map { ServerEvent(id: $0.id.description, dot: $0.dot, seq: $0.seq ?? 0) }
            })
        for (scope, events) in log.byScope {
            var expected: Int64 = 1
            for event in events {
                log.byID[event.id, default: []].append(event)
                log.byDot[event.dot, default: 0] += 1
                if event.seq != expected {
                    findings.found("gaps", Finding(scope: scope, detail: "seq \(event.seq) follows \(expected - 1)"))
                }
                expected = event.seq + 1
            }
        }
        for (id, copies) in log.byID where copies.count > 1 {
            findings.found("duplicated", Finding(scope: "?", event: id, detail: "on the server \(copies.count) times"))
        }
        return log
    }

    /// Every event a full replica made: rejected ones must be absent from the log, the others on it.
    static func checkReplicas(_ devices: [Device], against log: IndexedLog, into findings: inout Findings)
        async throws -> MadeEvents
    {
        var made = MadeEvents()
        for device in devices {
            guard let store = device.engine?.store else { continue }
            made.replicas[store.replica] = device
            let own = try await store.database.read { db in
                try Row.fetchAll(
                    db, sql: "SELECT event_id, status, type, reject_code FROM events WHERE dot_replica = ?",
                    arguments: [store.replica.description]
                ).map {
                    (
                        id: $0["event_id"] as String, status: $0["status"] as String, type: $0["type"] as String,
                        code: $0["reject_code"] as String?
                    )
                }
            }
            for event in own {
                made.ownIDs.insert(event.id)
                let copies = log.byID[event.id]?.count ?? 0
                if event.status == "rejected" {
                    made.rejected += 1
                    made.rejectedByCode[event.code ?? "?", default: 0] += 1
                    if copies > 0 {
                        findings.found(
                            "rejectedOnServer",
                            Finding(
                                device: device.plan.index, scope: device.plan.scope, event: event.id,
                                detail: "\(event.type) was rejected here but is on the server"))
                    }
                    continue
                }
                made.made += 1
                if copies == 0 {
                    findings.found(
                        "lost",
                        Finding(
                            device: device.plan.index, scope: device.plan.scope, event: event.id,
                            detail: "\(event.type) (\(event.status) here) is not on the server"))
                }
            }
        }
        return made
    }

    /// A replica's event on the server under an id the replica does not know (a copy under its dot is
    /// counted once), and dots on the server more than once.
    static func checkCopiesUnderTheirDots(_ log: IndexedLog, of made: MadeEvents, into findings: inout Findings) {
        for (scope, events) in log.byScope {
            for event in events
            where made.replicas[event.dot.replica] != nil && !made.ownIDs.contains(event.id)
                && log.byDot[event.dot] == 1
            {
                let device = made.replicas[event.dot.replica]!
                findings.found(
                    "duplicated",
                    Finding(
                        device: device.plan.index, scope: scope, event: event.id,
                        detail:
                            "seq \(event.seq) carries dot \(event.dot) of this device, which never made an event with this id"
                    ))
            }
        }
        for (dot, count) in log.byDot where count > 1 {
            if let device = made.replicas[dot.replica] {
                findings.found(
                    "duplicated",
                    Finding(
                        device: device.plan.index, scope: device.plan.scope,
                        detail: "dot \(dot) is on the server \(count) times"))
            }
        }
    }

    /// Thin devices: what they made against the log (by dot), and what they received against it.
    static func checkThinDevices(
        _ thin: [ThinDevice], against log: IndexedLog, events: [String: [Event]], made: inout MadeEvents,
        into findings: inout Findings
    ) {
        var messages: [String: String] = [:]
        for device in thin {
            for (code, rejection) in device.rejections {
                made.rejectedByCode[code, default: 0] += rejection.count
                messages[code] = messages[code] ?? rejection.message
            }
            for (index, status) in device.statuses.enumerated() {
                let copies = log.byDot[Dot(replica: device.replica, counter: UInt64(index + 1))] ?? 0
                if status == .rejected {
                    made.rejected += 1
                    if copies > 0 {
                        findings.found(
                            "rejectedOnServer",
                            Finding(
                                device: device.plan.index, scope: device.plan.scope,
                                detail: "the event of dot \(index + 1) was rejected here but is on the server"))
                    }
                } else {
                    made.made += 1
                    if copies == 0 {
                        findings.found(
                            "lost",
                            Finding(
                                device: device.plan.index, scope: device.plan.scope,
                                detail: "the event of dot \(index + 1) (\(status) here) is not on the server"))
                    } else if copies > 1 {
                        findings.found(
                            "duplicated",
                            Finding(
                                device: device.plan.index, scope: device.plan.scope,
                                detail: "the event of dot \(index + 1) is on the server \(copies) times"))
                    }
                }
            }
            checkDelivery(of: device, against: events[device.plan.scope] ?? [], into: &findings)
        }
        for (code, message) in messages.sorted(by: { $0.key < $1.key }) {
            findings.shown["rejected", default: []].append(
                Finding(scope: "*", detail: "thin devices' events rejected with \(code), e.g. \(message)"))
        }
    }

    /// What a thin device received against its scope's log: seqs skipped or delivered twice, and events that
    /// differ from the server's.
    static func checkDelivery(of device: ThinDevice, against events: [Event], into findings: inout Findings) {
        let received = device.log
        for anomaly in received.anomalies {
            findings.found(
                "delivery",
                Finding(
                    device: device.plan.index, scope: device.plan.scope,
                    detail: anomaly.kind == .skipped
                        ? "seq \(anomaly.seq)" + (anomaly.count > 1 ? "…\(anomaly.seq + anomaly.count - 1)" : "")
                            + " skipped: the device moved past it without receiving it"
                        : "seq \(anomaly.seq) delivered twice"))
        }
        if received.anomalyCount > received.anomalies.count {
            findings.counts["delivery", default: 0] += received.anomalyCount - received.anomalies.count
        }
        if let difference = received.firstDifference(from: events) {
            findings.found(
                "delivery",
                Finding(
                    device: device.plan.index, scope: device.plan.scope,
                    detail: difference.exact
                        ? "seq \(difference.seq) differs from the server's event"
                        : "an event of seqs \(difference.seq)…\(difference.seq + difference.count - 1) differs from the server's"
                ))
        }
    }

    /// Every replica against a fresh device of its scope: the fresh device bootstraps, every attachment of a
    /// live note is read (on it and on every replica of the scope), and every replica's state must equal
    /// the fresh device's. Returns the attachments checked and, by scope, the blobs live notes refer to.
    func checkScopes(_ devices: [Device], into findings: inout Findings) async throws -> (
        blobsChecked: Int, live: [String: Set<BlobHash>]
    ) {
        var blobsChecked = 0
        var live: [String: Set<BlobHash>] = [:]
        let directory = URL(fileURLWithPath: manifest.configuration.dataDirectory)
        for scope in Set(devices.map(\.plan.scope)).sorted() {
            let path = directory.appendingPathComponent("verify-\(scope).sqlite").path
            try SyncDatabase.removeWithCompanions(path)
            let fresh = try Device.openClient(path: path)
            let transport = HTTPClientTransport(
                baseURL: baseURL,
                token: try await tokens.token(
                    subject: "\(manifest.configuration.scopePrefix)-verifier", scopes: [scope]),
                client: http)
            var configuration = SyncEngine.Configuration(scopes: [try Scope(scope)])
            configuration.autoCompactAfter = nil
            let freshBlobs: BlobSync
            do {
                freshBlobs = BlobSync(
                    local: try LocalBlobs(store: fresh.store, cacheBytes: 16 << 20), transport: transport)
                let engine = try SyncEngine(
                    store: fresh.store, transport: transport, configuration: configuration, blobs: freshBlobs)
                try await Self.retrying { try await engine.syncNow() }
                // Once more, from the head: the server records what the device holds (a bootstrap of one page
                // asked from position 0), so that the collection's compaction is not held back by it.
                try await Self.retrying { try await engine.syncNow() }
            } catch {
                findings.found(
                    "bootstrap", Finding(scope: scope, detail: "a fresh device could not bootstrap: \(error)"))
                continue
            }
            // Every attachment readable from the server, and on every device of the scope, with its hash.
            for (device, client, blobs) in [(nil, fresh, freshBlobs)]
                + devices.compactMap({ device in
                    device.plan.scope == scope
                        ? device.client.flatMap { client in device.engine?.blobs.map { (device, client, $0) } } : nil
                })
            {
                let (checked, problems, hashes) = await Self.checkAttachments(client, blobs)
                if device == nil { live[scope] = hashes }
                blobsChecked += checked
                for problem in problems {
                    findings.found("blobs", Finding(device: device?.plan.index, scope: scope, detail: problem))
                }
            }
            let reference = try await fresh.exportState()
            for device in devices where device.plan.scope == scope {
                guard let client = device.client else { continue }
                let state = try await client.exportState()
                if state != reference {
                    findings.found(
                        "diverged",
                        Finding(
                            device: device.plan.index, scope: scope,
                            detail: "state differs from a fresh device's: " + Self.difference(state, reference)))
                }
            }
        }
        return (blobsChecked, live)
    }
}
