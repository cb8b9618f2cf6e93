import Foundation
import NotesDomain
import NotesStore
import SyncEngine
import SyncEngineHTTPClient
import SyncEventStore
import SyncModels
import SyncStorage
import Synchronization

/// One virtual device: a real replica (its own SQLite file through `NotesStore`, its own `SyncEngine`)
/// that syncs through a `FaultyTransport` over the shared HTTP client, holding the live stream (or, without
/// it, long-polling).
final class Device: Sendable {
    struct Plan: Codable, Sendable {
        var index: Int
        var scope: String
        var subject: String
        var path: String
        /// How far this device's clock is off, in milliseconds (`--clock-skew`; absent: none).
        var clockSkewMilliseconds: Int64? = nil
    }

    let plan: Plan
    let scope: Scope
    let transport: FaultyTransport
    private let metrics: LoadMetrics
    private let longPoll: Duration?
    private let live: Bool
    private let debounce: Duration
    private let minPushInterval: Duration
    private let pollLinger: Duration
    /// The engine's `verifyInterval` (nil: its default).
    private let verifyInterval: Duration?
    /// The engine's `tokenProvider`: a new token when the server refuses the device's (nil: none).
    private let tokenProvider: (@Sendable () async throws -> String)?
    private struct Replica: Sendable {
        var client: NotesClient
        var engine: SyncEngine
        var running: Task<Void, Never>?
    }
    private let replica: Mutex<Replica?> = Mutex(nil)
    /// What the device's driver does now, and since when (for the watchdog).
    private let activity = Mutex<(what: String, since: ContinuousClock.Instant)>(("created", .now))

    /// - Parameters:
    ///   - live: whether the engine holds the live stream (`SyncEngine.Configuration.live`); `longPoll` is
    ///     then its fallback.
    ///   - debounce, minPushInterval: when a local write is pushed (the engine's, latency-first by default).
    init(
        plan: Plan, transport: FaultyTransport, metrics: LoadMetrics,
        tokenProvider: (@Sendable () async throws -> String)? = nil, longPoll: Duration?, live: Bool = true,
        debounce: Duration = .zero, minPushInterval: Duration = .milliseconds(50),
        pollLinger: Duration = .milliseconds(100), verifyInterval: Duration? = nil
    ) throws {
        self.tokenProvider = tokenProvider
        self.verifyInterval = verifyInterval
        self.live = live
        self.debounce = debounce
        self.minPushInterval = minPushInterval
        self.pollLinger = pollLinger
        self.plan = plan
        self.scope = try Scope(plan.scope)
        self.transport = transport
        self.metrics = metrics
        self.longPoll = longPoll
    }

    /// Opens the store on the device's file: small caches and no checkpoint thread, so that a thousand of
    /// them fit one process.
    static func openClient(path: String, clockSkewMilliseconds skew: Int64 = 0) throws -> NotesClient {
        var storage = StorageConfiguration()
        storage.cacheSizeKiB = 1024
        storage.maximumReaderCount = 2
        storage.backgroundCheckpointPages = 0
        return NotesClient(
            store: try EventStore(
                path: path, projections: [NotesProjection(workers: 1, cachedNotes: 256)],
                validators: [NotesValidator()], configuration: storage,
                wallClock: { UInt64(max(0, Int64(HybridLogicalClock.systemMilliseconds()) + skew)) }))
    }

    /// Opens (or reopens) the replica from its file; does not start syncing.
    func open() throws {
        let client = try Self.openClient(path: plan.path, clockSkewMilliseconds: plan.clockSkewMilliseconds ?? 0)
        var configuration = SyncEngine.Configuration(scopes: [scope])
        configuration.live = live
        configuration.longPoll = longPoll
        configuration.interval = .seconds(30)
        configuration.debounce = debounce
        configuration.minPushInterval = minPushInterval
        configuration.longPollLinger = pollLinger
        // The verdict reads each device's own events from its log: keep them.
        configuration.autoCompactAfter = nil
        if let verifyInterval { configuration.verifyInterval = verifyInterval }
        configuration.backoff = BackoffPolicy(base: .milliseconds(200), cap: .seconds(5))
        configuration.tokenProvider = tokenProvider
        let metrics = metrics
        let replicaID = client.store.replica
        configuration.onRound = { round in metrics.applied(round, by: replicaID) }
        // Attachments: a small cache, so that a thousand devices' blobs fit the disk; pending uploads are kept.
        let blobs = BlobSync(
            local: try LocalBlobs(store: client.store, cacheBytes: 16 << 20), transport: transport,
            backoff: configuration.backoff)
        let engine = try SyncEngine(
            store: client.store, transport: transport, configuration: configuration, blobs: blobs)
        replica.withLock { $0 = Replica(client: client, engine: engine, running: nil) }
    }

    var client: NotesClient? { replica.withLock { $0?.client } }

    func doing(_ what: String) { activity.withLock { $0 = (what, .now) } }

    /// Seconds the driver has been in its current step, unless it is one that waits by design (thinking,
    /// offline, done).
    var busyFor: Double {
        let (what, since) = activity.withLock { $0 }
        guard !["thinking", "done editing", "created"].contains(what) else { return 0 }
        return (ContinuousClock.now - since).secondsValue
    }

    /// What the device waits on, for a stalled run's diagnosis: its driver's step and its engine's state.
    var waitingOn: String {
        let (what, since) = activity.withLock { $0 }
        var parts = ["\(what) for \(Int((ContinuousClock.now - since).secondsValue)) s"]
        if let status = engine?.status {
            parts.append(
                status.liveConnected ? "on the live stream" : status.longPolling ? "long-polling" : "not following")
            if status.inFlight > 0 { parts.append("a push of \(status.inFlight) events in flight") }
            if status.pending > 0 { parts.append("\(status.pending) events pending") }
            if let error = status.lastError { parts.append("last error: \(error)") }
        } else {
            parts.append("not open")
        }
        return parts.joined(separator: "; ")
    }
    var engine: SyncEngine? { replica.withLock { $0?.engine } }
    var replicaID: ReplicaID? { client?.store.replica }

    /// Starts the engine's background sync (`run()`), if it is not running.
    func startSync() {
        replica.withLock { replica in
            guard var current = replica, current.running == nil else { return }
            let engine = current.engine
            current.running = Task { await engine.run() }
            replica = current
        }
    }

    /// Stops background sync and waits for it to end.
    func stopSync() async {
        let running = replica.withLock { replica -> Task<Void, Never>? in
            defer { replica?.running = nil }
            return replica?.running
        }
        running?.cancel()
        await running?.value
    }

    /// Goes offline: sync stops, edits go on into the outbox.
    func goOffline() async {
        transport.setOnline(false)
        if let id = replicaID { metrics.wentOffline(id) }
        await stopSync()
    }

    /// Comes back online and syncs at once.
    func goOnline() {
        transport.setOnline(true)
        if let id = replicaID { metrics.cameOnline(id) }
        startSync()
    }

    /// Deletes one confirmed row of the log, chosen at random, behind the store's back (as a restored backup,
    /// a bug or disk trouble would lose it): the engine's verification must find it by its checksums and pull
    /// it again. False when the log holds no confirmed row.
    func corrupt() async throws -> Bool {
        guard let store = client?.store else { return false }
        return try await store.database.writer.write { db in
            try db.execute(
                sql: """
                    DELETE FROM events WHERE position = (
                        SELECT position FROM events WHERE status = 'confirmed' ORDER BY random() LIMIT 1)
                    """)
            return db.changesCount > 0
        }
    }

    /// Closes the replica abruptly, as a killed app would: its sync stops wherever it is (a request in
    /// flight is abandoned; a local transaction commits or not, never half) and the store is dropped
    /// without any orderly shutdown; then it is reopened from its file.
    /// - Parameter opening: runs the reopening (by default here).
    func crashAndReopen(
        opening: (@escaping @Sendable () throws -> Void) async throws -> Void = { try $0() }
    ) async throws {
        let old = replica.withLock { replica -> Replica? in
            defer { replica = nil }
            return replica
        }
        old?.running?.cancel()
        // No second writer on the file while the old one unwinds (a killed process has none either).
        await old?.running?.value
        metrics.crashed()
        try await opening { try self.open() }
        if transport.isOnline { startSync() }
    }
}
