import Metrics
import SyncProtocol
import Synchronization

/// Every metric of `/metrics`, made from one injected `MetricsFactory` (so a process — or a test run — can
/// hold several servers, and no global bootstrap is needed).
final class ServerMetrics: Sendable {
    let factory: any MetricsFactory
    private let accepted: Counter
    private let duplicate: Counter
    private let rejected: Counter
    private let batchSize: Recorder
    private let groupSize: Recorder
    private let groupsCommitted: Counter
    private let groupsSplit: Counter
    private let oneStatementAppended: Counter
    private let oneStatementRefused: Counter
    /// Calls of a shard group's append function on its worker (`CitusShardAppend`):
    /// `sync_push_on_shards_total`.
    let pushesOnShards: Counter
    /// Pushes answered below the router (`PushChannelHandler`), errors included.
    let pushesBelowRouter: Counter
    private let pulled: Counter
    private let requestRaw: Counter
    private let requestWire: Counter
    private let responseRaw: Counter
    private let responseWire: Counter
    /// Connections leased from the pool right now.
    let connectionsInUse: LevelGauge
    /// Database operations admitted (waiting for or holding a connection).
    let operationsAdmitted: LevelGauge
    /// Long-polls waiting right now.
    let longPolls: LevelGauge
    /// Long-polls suspended in the hub right now (past their first read or idle answer, waiting for a signal).
    let parkedLongPolls: LevelGauge
    /// Live-stream subscribers now (`GET /v1/live`).
    let liveSubscribers: LevelGauge
    /// Live frames encoded (each once, whatever the number of subscribers it goes to).
    let liveFrames: Counter
    /// Tail reads of the live stream's feeds: a scope's new events read from the database after a signal (a
    /// commit of another server, or one whose events this server did not hand over itself).
    let liveReads: Counter
    /// Subscribers dropped back to catch-up (too slow, or subscribed from too far behind).
    let liveDropped: Counter
    /// Bytes of recent frames the live stream keeps, over every scope (each bounded by
    /// `ServerConfiguration.liveBufferBytes`).
    let liveBuffered: Gauge
    /// 1 while the long-poll hub's LISTEN connection is up (commits of other servers wake waiters), else 0.
    let listening: Gauge
    /// Times the hub's LISTEN began, the first time included: each makes every waiter read again, since
    /// commits may have gone unsignalled before it.
    let listenStarts: Counter
    /// Rows compaction removed (events and older snapshots folded into new snapshots).
    let compactedEvents: Counter
    /// Snapshot events compaction wrote.
    let compactionSnapshots: Counter
    /// Pull reads of the database, and pulls that joined an identical read instead (`ReadCollapser`).
    private let pullReadsRun: Counter
    private let pullReadsJoined: Counter
    /// Long-polls that began waiting without a read (their cursor at the heads the hub knew).
    private let waitsWithoutRead: Counter
    /// Pages read ahead for a replica catching up (`ReadAhead`), and those its next request was answered with.
    private let readAheadStarted: Counter
    private let readAheadUsed: Counter
    /// Blob bytes received in chunks and sent in downloads.
    private let blobBytesIn: Counter
    private let blobBytesOut: Counter
    /// Upload sessions by outcome (`UploadOutcome`).
    private let uploads: [UploadOutcome: Counter]
    private let commitHashesChained: Counter
    private let commitHashesReadBack: Counter
    private let routes = Mutex([RouteKey: (Counter, Timer)]())
    /// What the admin API's status reads (`GET /v1/admin/status`).
    let admin = AdminStats()

    struct RouteKey: Hashable {
        var route: String
        var method: String
        var status: Int
    }

    init(factory: any MetricsFactory) {
        self.factory = factory
        accepted = Counter(label: "sync_events_total", dimensions: [("status", "accepted")], factory: factory)
        duplicate = Counter(label: "sync_events_total", dimensions: [("status", "duplicate")], factory: factory)
        rejected = Counter(label: "sync_events_total", dimensions: [("status", "rejected")], factory: factory)
        batchSize = Recorder(label: "sync_push_batch_size", dimensions: [], aggregate: true, factory: factory)
        groupSize = Recorder(label: "sync_push_group_size", dimensions: [], aggregate: true, factory: factory)
        groupsCommitted = Counter(
            label: "sync_push_groups_total", dimensions: [("outcome", "committed")], factory: factory)
        groupsSplit = Counter(label: "sync_push_groups_total", dimensions: [("outcome", "split")], factory: factory)
        oneStatementAppended = Counter(
            label: "sync_push_one_statement_total", dimensions: [("outcome", "appended")], factory: factory)
        oneStatementRefused = Counter(
            label: "sync_push_one_statement_total", dimensions: [("outcome", "refused")], factory: factory)
        pushesOnShards = Counter(label: "sync_push_on_shards_total", factory: factory)
        pushesBelowRouter = Counter(label: "sync_push_below_router_total", factory: factory)
        pulled = Counter(label: "sync_events_pulled_total", factory: factory)
        requestRaw = Counter(
            label: "sync_body_bytes_total", dimensions: [("direction", "in"), ("form", "raw")], factory: factory)
        requestWire = Counter(
            label: "sync_body_bytes_total", dimensions: [("direction", "in"), ("form", "wire")], factory: factory)
        responseRaw = Counter(
            label: "sync_body_bytes_total", dimensions: [("direction", "out"), ("form", "raw")], factory: factory)
        responseWire = Counter(
            label: "sync_body_bytes_total", dimensions: [("direction", "out"), ("form", "wire")], factory: factory)
        connectionsInUse = LevelGauge(label: "sync_db_connections_in_use", factory: factory)
        operationsAdmitted = LevelGauge(label: "sync_db_operations_admitted", factory: factory)
        longPolls = LevelGauge(label: "sync_longpolls_active", factory: factory)
        parkedLongPolls = LevelGauge(label: "sync_longpolls_parked", factory: factory)
        liveSubscribers = LevelGauge(label: "sync_live_subscribers", factory: factory)
        liveFrames = Counter(label: "sync_live_frames_total", factory: factory)
        liveReads = Counter(label: "sync_live_reads_total", factory: factory)
        liveDropped = Counter(label: "sync_live_dropped_total", factory: factory)
        liveBuffered = Gauge(label: "sync_live_buffered_bytes", factory: factory)
        listening = Gauge(label: "sync_longpoll_listening", factory: factory)
        listenStarts = Counter(label: "sync_longpoll_listen_starts_total", factory: factory)
        compactedEvents = Counter(label: "sync_compaction_folded_events_total", factory: factory)
        compactionSnapshots = Counter(label: "sync_compaction_snapshots_total", factory: factory)
        pullReadsRun = Counter(label: "sync_pull_reads_total", dimensions: [("kind", "database")], factory: factory)
        pullReadsJoined = Counter(label: "sync_pull_reads_total", dimensions: [("kind", "joined")], factory: factory)
        waitsWithoutRead = Counter(label: "sync_longpoll_waits_without_read_total", factory: factory)
        readAheadStarted = Counter(
            label: "sync_pull_read_ahead_total", dimensions: [("outcome", "started")], factory: factory)
        readAheadUsed = Counter(
            label: "sync_pull_read_ahead_total", dimensions: [("outcome", "used")], factory: factory)
        blobBytesIn = Counter(label: "sync_blob_bytes_total", dimensions: [("direction", "in")], factory: factory)
        blobBytesOut = Counter(label: "sync_blob_bytes_total", dimensions: [("direction", "out")], factory: factory)
        uploads = Dictionary(
            uniqueKeysWithValues: UploadOutcome.allCases.map { outcome in
                (
                    outcome,
                    Counter(
                        label: "sync_blob_uploads_total", dimensions: [("outcome", outcome.rawValue)], factory: factory)
                )
            })
        commitHashesChained = Counter(
            label: "sync_blob_commit_hashes_total", dimensions: [("source", "running")], factory: factory)
        commitHashesReadBack = Counter(
            label: "sync_blob_commit_hashes_total", dimensions: [("source", "read_back")], factory: factory)
    }

    /// What became of an upload session, or of a request for one.
    enum UploadOutcome: String, CaseIterable, Sendable {
        /// A new session.
        case opened
        /// The open session of the same blob, asked for again.
        case resumed
        /// No session: the scope held the blob already.
        case deduplicated
        /// The blob became readable.
        case committed
        /// The bytes did not match the hash: the session was deleted.
        case discarded
        /// The session expired uncommitted and was swept with its chunks.
        case expired
    }

    func recordUpload(_ outcome: UploadOutcome) { uploads[outcome]?.increment() }

    /// How a commit learnt the whole blob's hash: from the running hash of its chunks (`UploadDigests`), or by
    /// reading its parts back from the store.
    func recordCommitHash(chained: Bool) { (chained ? commitHashesChained : commitHashesReadBack).increment() }

    /// Blob bytes stored from a chunk, or sent from a blob.
    func recordBlobBytes(received: Int = 0, sent: Int = 0) {
        if received > 0 { blobBytesIn.increment(by: received) }
        if sent > 0 { blobBytesOut.increment(by: sent) }
    }

    /// A push, or a group, tried in one statement (`OneStatementAppend`): appended, or `refused` (a stale version,
    /// a stored id, a replica behind a purge: decided again by a transaction of steps).
    func recordOneStatement(refused: Bool) {
        (refused ? oneStatementRefused : oneStatementAppended).increment()
    }

    /// A transaction that ran several pushes together (group commit): committed, or `split` (it failed, and its
    /// pushes ran one by one).
    func recordPushGroup(pushes: Int, split: Bool) {
        groupSize.record(pushes)
        (split ? groupsSplit : groupsCommitted).increment()
    }

    /// A pull's read: run against the database, or `shared` with an identical one.
    func recordPullRead(shared: Bool) {
        (shared ? pullReadsJoined : pullReadsRun).increment()
    }

    /// A page read ahead: started, or `used` for the request it was read for.
    func recordReadAhead(used: Bool) {
        (used ? readAheadUsed : readAheadStarted).increment()
    }

    func recordLiveFrames(_ count: Int) {
        if count > 0 { liveFrames.increment(by: count) }
    }

    func recordLiveDropped() { liveDropped.increment() }

    /// A long-poll that began waiting without reading.
    func recordWaitWithoutRead() { waitsWithoutRead.increment() }

    /// One answered request, by route template (`/v1/pull`, not the query), method and status.
    func recordRequest(
        route: String, method: String, status: Int, nanoseconds: Int64, kind: AdminStats.LatencyKind = .other
    ) {
        let key = RouteKey(route: route, method: method, status: status)
        let (counter, timer) = routes.withLock { routes in
            if let metrics = routes[key] { return metrics }
            let dimensions = [("route", route), ("method", method), ("status", String(status))]
            let metrics = (
                Counter(label: "sync_http_requests_total", dimensions: dimensions, factory: factory),
                Timer(label: "sync_http_request_duration_seconds", dimensions: dimensions, factory: factory)
            )
            routes[key] = metrics
            return metrics
        }
        counter.increment()
        timer.recordNanoseconds(nanoseconds)
        admin.recordRequest(method: method, route: route, status: status, nanoseconds: nanoseconds, kind: kind)
    }

    /// A request answered with an error, by its code (for the admin API; `/metrics` counts statuses).
    func recordError(code: String, status: Int) {
        admin.recordError(code: code, status: status)
    }

    func recordPush(_ results: [PushResult]) {
        batchSize.record(results.count)
        var counts = (0, 0, 0)
        for result in results {
            switch result.status {
            case .accepted: counts.0 += 1
            case .duplicate: counts.1 += 1
            case .rejected: counts.2 += 1
            }
        }
        if counts.0 > 0 { accepted.increment(by: counts.0) }
        if counts.1 > 0 { duplicate.increment(by: counts.1) }
        if counts.2 > 0 { rejected.increment(by: counts.2) }
        admin.recordEvents(accepted: counts.0, duplicate: counts.1, rejected: counts.2)
    }

    func recordPulled(_ count: Int) {
        guard count > 0 else { return }
        pulled.increment(by: count)
        admin.recordPulled(count)
    }

    /// A request body: bytes as received and after decompression.
    func recordRequestBody(wire: Int, raw: Int) {
        requestWire.increment(by: wire)
        requestRaw.increment(by: raw)
    }

    /// A response body: bytes before and after compression.
    func recordResponseBody(raw: Int, wire: Int) {
        responseRaw.increment(by: raw)
        responseWire.increment(by: wire)
    }
}
