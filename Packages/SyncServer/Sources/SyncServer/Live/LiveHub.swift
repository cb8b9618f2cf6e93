import Foundation
import Logging
import Metrics
import NIOCore
import PostgresNIO
import ServiceLifecycle
import SyncModels
import SyncProtocol
import Synchronization

/// Serves the live stream (`GET /v1/live`): the frames of every scope with subscribers, each read from the
/// database once per commit and encoded once, the same bytes written to every subscriber of the scope.
///
/// Commits are signalled by `LongPollHub` (this server's pushes directly, other servers' through `LISTEN`),
/// and each turns into at most one tail read per scope running at a time (`LiveFeeds`). A subscriber holds
/// no database connection while it waits, only a parked `LiveWaiter`: its connection, pumped on its event
/// loop (`LiveChannelHandler`, how streams are served), or a continuation (a stream served through the
/// router, `SyncAPI.handleLive`). It is woken when its scopes have frames, when a heartbeat is due (one
/// timer for all, `run`), when its token expires, or on shutdown.
final class LiveHub: Service, Sendable {
    typealias Feeds = LiveFeeds<LiveWaiter, ByteBuffer>

    private let state: Mutex<Feeds>
    /// How many feeds there are, as last recorded (`recordSubscribers`): `expect`'s check without the lock.
    private let feedCount = Atomic<Int>(0)
    private let database: Database
    /// On a Citus cluster, where each scope lives: a feed's tail is read on its scope's node (`routeReads`).
    private let citus = Mutex<CitusRouting?>(nil)
    /// Its statements prepared on one PostgreSQL, unnamed on a Citus cluster (`EventRepository.prepares`).
    private var repository: EventRepository { EventRepository(prepares: citus.withLock { $0 } == nil) }
    private let logger: Logger
    private let metrics: ServerMetrics
    /// Seconds between heartbeats on an idle stream (a comment line), well under proxies' read timeouts.
    let heartbeatSeconds: Int
    /// The most events a subscriber may be sent from the database when it subscribes behind the ring; past
    /// it, it is told to catch up by pulling.
    let maxBackfillEvents: Int
    /// The most events one read takes from the database.
    let frameEvents: Int
    /// The most payload bytes one frame carries (and at least one event): a ring holds at most its bound plus
    /// one such frame.
    let frameBytes: Int

    init(
        database: Database, logger: Logger, metrics: ServerMetrics, heartbeatSeconds: Int = 15,
        ringFrames: Int = 256, ringBytes: Int = 1 << 20, maxBackfillEvents: Int = 1_000, frameEvents: Int = 1_000,
        frameBytes: Int = 64 << 10
    ) {
        self.state = Mutex(Feeds(maxFrames: ringFrames, maxBytes: ringBytes))
        self.database = database
        self.logger = logger
        self.metrics = metrics
        self.heartbeatSeconds = heartbeatSeconds
        self.maxBackfillEvents = maxBackfillEvents
        self.frameEvents = frameEvents
        self.frameBytes = frameBytes
    }

    // MARK: Subscribers

    /// A subscription in place: its id, and the events it must first be sent from the database.
    struct Subscription: Sendable {
        var id: Int
        var backfills: [Feeds.Backfill]
    }

    /// Subscribes at `positions`, reading the heads of scopes no one subscribed to yet.
    /// - Throws: `SyncProtocolError` `server.unavailable` when the server shuts down or the database cannot
    ///   serve.
    func subscribe(_ positions: [Scope: Int64], expiresAt: ContinuousClock.Instant?) async throws -> Subscription {
        guard let (id, _) = state.withLock({ $0.subscribe(positions, expiresAt: expiresAt) }) else {
            throw SyncProtocolError(.serverUnavailable, "the server is shutting down")
        }
        recordSubscribers()
        let unknown = state.withLock { state in positions.keys.filter { state.feeds[$0]?.head == nil } }
        if !unknown.isEmpty {
            do {
                let heads = try await database.withConnection(lane: .waiting) { [repository, logger] connection in
                    try await repository.selectHeads(unknown.map(\.name), on: connection, logger: logger)
                }
                let known = Dictionary(uniqueKeysWithValues: unknown.map { ($0, heads[$0]?.head ?? 0) })
                let reads = state.withLock { $0.headsRead(known) }
                for read in reads { perform(read) }
            } catch {
                unsubscribe(id)
                throw error
            }
        }
        let backfills = state.withLock { $0.start(id) }
        return Subscription(id: id, backfills: backfills)
    }

    func unsubscribe(_ id: Int) {
        if let waiter = state.withLock({ $0.unsubscribe(id) }) { Self.resume([waiter]) }
        recordSubscribers()
    }

    /// Ends a subscriber's stream (its connection's graceful shutdown).
    func end(_ id: Int, _ outcome: Feeds.Outcome = .closed) {
        if outcome == .behind { metrics.recordLiveDropped() }
        if let waiter = state.withLock({ $0.end(id, outcome) }) { Self.resume([waiter]) }
    }

    /// What the subscriber writes next; waits until there is something.
    func next(_ id: Int) async -> Feeds.Step {
        while true {
            var step = Feeds.Step.wait
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    step = state.withLock { $0.next(id, waiter: .task(continuation)) }
                    if case .wait = step { return }
                    continuation.resume()
                }
            } onCancel: {
                self.end(id)
            }
            if case .wait = step { continue }
            return step
        }
    }

    /// What the subscriber of a connection taken over on its event loop writes next (`LiveConnection`);
    /// `.wait` parks `connection`, which is pumped again when there is something.
    func next(_ id: Int, connection: LiveConnection) -> Feeds.Step {
        state.withLock { $0.next(id, waiter: .connection(connection)) }
    }

    /// Resumes parked subscribers: a task at once; connections grouped by event loop, each loop pumping all of
    /// its own in one go (one hop per loop and batch of frames, not one per subscriber).
    static func resume(_ waiters: [LiveWaiter]) {
        var connections: [ObjectIdentifier: (loop: any EventLoop, connections: [LiveConnection])] = [:]
        for waiter in waiters {
            switch waiter {
            case .task(let continuation):
                continuation.resume()
            case .connection(let connection):
                connections[ObjectIdentifier(connection.eventLoop), default: (connection.eventLoop, [])]
                    .connections.append(connection)
            }
        }
        for (loop, group) in connections.values {
            loop.execute { for connection in group { connection.pump() } }
        }
    }

    /// The frames of `(backfill.after, backfill.through]`, read for one subscriber; nil when that is more
    /// than `maxBackfillEvents` (it should pull).
    func frames(for backfill: Feeds.Backfill) async throws -> [ByteBuffer]? {
        guard backfill.through - backfill.after <= Int64(maxBackfillEvents) else { return nil }
        var frames: [ByteBuffer] = []
        var after = backfill.after
        while after < backfill.through {
            let read = try await self.read(backfill.scope, after: after, through: backfill.through)
            guard let frame = read.last else { break }
            frames += read.map(\.bytes)
            after = frame.head
        }
        return frames
    }

    // MARK: Commits

    /// Events committed by this server: their scopes and new heads.
    func committed(heads: [Scope: Int64]) {
        let reads = state.withLock { state in heads.compactMap { state.signal($0.key, head: $0.value) } }
        for read in reads { perform(read) }
    }

    /// A commit's notification (another server's, or this one's coming back through `LISTEN`).
    func committed(_ scope: Scope, head: Int64?) {
        if let read = state.withLock({ $0.signal(scope, head: head) }) { perform(read) }
    }

    /// Commits may have been missed (the `LISTEN` connection came back): every feed reads its tail.
    func committedAnywhere() {
        for read in state.withLock({ $0.signalAll() }) { perform(read) }
    }

    // MARK: This server's own commits

    /// The events a commit of this server's own appended to a scope: those of `(after, events.last.seq]`, in
    /// order, as a read would find them.
    struct Appended: Sendable {
        var after: Int64
        var events: [StoredEvent]
    }

    /// This server is about to commit events in `scopes` and will hand them over (`appended`): feeds of those
    /// scopes then get them without reading them back, and signals for them wait until then (the commit's own
    /// notification may come back first). Every expectation returned must be ended by `appended`.
    func expect(_ scopes: some Sequence<Scope>) -> [Feeds.Expectation] {
        // No feed, nothing to expect, and no lock taken: a feed made meanwhile reads the commit as on a signal.
        guard feedCount.load(ordering: .relaxed) > 0 else { return [] }
        let scopes = Set(scopes)
        return state.withLock { $0.expect(scopes) }
    }

    /// Ends `expectations`: `events` are what the commit appended, per scope, or nil when it did not commit.
    /// Feeds on the head get frames encoded from them; any other (a commit before these is not in the feed
    /// yet, or the scope got none) reads as on a signal.
    func appended(_ expectations: [Feeds.Expectation], events: [Scope: Appended]?) {
        guard !expectations.isEmpty else { return }
        var frames: [Scope: [Feeds.Frame]] = [:]
        for expectation in expectations {
            guard let run = events?[expectation.scope], let last = run.events.last else { continue }
            frames[expectation.scope] = Self.frames(
                of: expectation.scope, after: run.after, head: last.seq, events: run.events, maxBytes: frameBytes)
        }
        let (waiters, reads, dropped, buffered) = state.withLock { state in
            var waiters: [LiveWaiter] = []
            var reads: [Feeds.Read] = []
            var dropped = 0
            for expectation in expectations {
                let ended = state.appended(expectation, frames: frames[expectation.scope])
                waiters += ended.waiters
                if let read = ended.read { reads.append(read) }
                dropped += ended.dropped
            }
            return (waiters, reads, dropped, state.bufferedBytes)
        }
        metrics.recordLiveFrames(frames.values.reduce(0) { $0 + $1.count })
        metrics.liveBuffered.record(buffered)
        for _ in 0..<dropped { metrics.recordLiveDropped() }
        Self.resume(waiters)
        for read in reads { perform(read) }
    }

    /// Runs a tail read, then the next one signals asked for meanwhile, until none is asked for.
    private func perform(_ read: Feeds.Read) {
        Task {
            var read: Feeds.Read? = read
            while let current = read {
                metrics.liveReads.increment()
                do {
                    let frames = try await self.read(current.scope, after: current.after, through: nil)
                    metrics.recordLiveFrames(frames.count)
                    let (waiters, next, dropped, buffered) = state.withLock {
                        let (waiters, next, dropped) = $0.readEnded(current, frames: frames)
                        return (waiters, next, dropped, $0.bufferedBytes)
                    }
                    metrics.liveBuffered.record(buffered)
                    for _ in 0..<dropped { metrics.recordLiveDropped() }
                    Self.resume(waiters)
                    read = next
                } catch {
                    logger.warning(
                        "live: reading a scope's new events failed; retrying on the next signal or tick",
                        metadata: ["sync.scope": "\(current.scope)", "error.type": "\(type(of: error))"])
                    state.withLock { $0.readFailed(current) }
                    read = nil
                }
            }
        }
    }

    /// Reads feeds' tails on the node of their scope, on a Citus cluster (docs/SCALING.md, "A push on its
    /// worker"), rather than through the coordinator.
    func routeReads(_ routing: CitusRouting) {
        citus.withLock { $0 = routing }
    }

    /// The events of `scope` after `after` (through `through`, or up to the head), as frames of at most
    /// `frameEvents` events each.
    private func read(_ scope: Scope, after: Int64, through: Int64?) async throws -> [Feeds.Frame] {
        let limit = frameEvents
        let routing = citus.withLock { $0 }
        let database = await routing?.node(of: [scope])?.database ?? database
        let (events, head) = try await database.withConnection(lane: .waiting) { [repository, logger] connection in
            let heads = try await repository.selectHeads([scope.name], on: connection, logger: logger)
            let head = min(heads[scope]?.head ?? 0, through ?? .max)
            guard head > after else { return ([StoredEvent](), head) }
            let events = try await repository.events(
                in: scope, after: after, limit: Int(min(Int64(limit), head - after)),
                foldedThrough: heads[scope]?.compactedThrough ?? 0, on: connection, logger: logger)
            return (events.filter { $0.seq <= head }, head)
        }
        guard head > after else { return [] }
        // Rows up to the head were all read when the batch is short of the limit (seqs commit in order; a
        // purge may have dropped the last ones): the last frame then reaches the head itself.
        let reachesHead = events.count < limit
        let readHead = reachesHead ? head : events.last!.seq
        let frames = Self.frames(of: scope, after: after, head: readHead, events: events, maxBytes: frameBytes)
        return frames + (reachesHead ? [] : try await self.read(scope, after: readHead, through: through))
    }

    /// The frames of `events`, the events of `(after, head]` in order: runs of at most `maxBytes` of payload,
    /// the last one reaching `head`; one without events when there are none (every row was purged).
    static func frames(of scope: Scope, after: Int64, head: Int64, events: [StoredEvent], maxBytes: Int)
        -> [Feeds.Frame]
    {
        var frames: [Feeds.Frame] = []
        var frameAfter = after
        for chunk in chunks(events, maxBytes: maxBytes) {
            let frameHead = chunk.endIndex == events.endIndex ? head : chunk.last!.seq
            let bytes = encode(scope: scope, after: frameAfter, head: frameHead, events: Array(chunk))
            frames.append(Feeds.Frame(after: frameAfter, head: frameHead, bytes: bytes, size: bytes.readableBytes))
            frameAfter = frameHead
        }
        if frames.isEmpty {
            let bytes = encode(scope: scope, after: after, head: head, events: [])
            frames.append(Feeds.Frame(after: after, head: head, bytes: bytes, size: bytes.readableBytes))
        }
        return frames
    }

    /// `events` cut into runs of at most `maxBytes` of payload (and at least one event each), so that one
    /// read of many commits (the database was slow, or a subscriber subscribed far behind) does not make a
    /// frame larger than the ring is meant to hold.
    static func chunks(_ events: [StoredEvent], maxBytes: Int) -> [ArraySlice<StoredEvent>] {
        var chunks: [ArraySlice<StoredEvent>] = []
        var start = events.startIndex
        var bytes = 0
        for index in events.indices {
            let size = 320 + events[index].payloadJSON.utf8.count
            if index > start && bytes + size > maxBytes {
                chunks.append(events[start..<index])
                start = index
                bytes = 0
            }
            bytes += size
        }
        if start < events.endIndex { chunks.append(events[start...]) }
        return chunks
    }

    // MARK: Encoding

    /// An `events` message: `event: events`, the frame's JSON on one `data:` line, a blank line.
    static func encode(scope: Scope, after: Int64, head: Int64, events: [StoredEvent]) -> ByteBuffer {
        let json = EventJSONWriter.liveFrame(scope: scope, after: after, head: head, events: events)
        var buffer = ByteBuffer()
        buffer.reserveCapacity(json.count + 32)
        buffer.writeString("event: \(LiveMessage.frameEvent)\ndata: ")
        buffer.writeBytes(json)
        buffer.writeString("\n\n")
        return buffer
    }

    /// A message of `event` with `data` (JSON without line breaks).
    static func message(_ event: String, _ data: String) -> ByteBuffer {
        ByteBuffer(string: "event: \(event)\ndata: \(data)\n\n")
    }

    static let heartbeat = ByteBuffer(string: ":\n\n")

    /// The stream's first message: the subscription is in place, and how often heartbeats come.
    var subscribedMessage: ByteBuffer {
        Self.message(LiveMessage.subscribedEvent, #"{"heartbeatSeconds":\#(heartbeatSeconds)}"#)
    }

    // MARK: Service

    /// The heartbeat and token-expiry timer of every subscriber; on graceful shutdown ends every stream.
    func run() async throws {
        await withGracefulShutdownHandler {
            await cancelWhenGracefulShutdown {
                await self.tickEverySecond()
            }
        } onGracefulShutdown: {
            self.close()
        }
        close()
    }

    private func tickEverySecond() async {
        var ticks = 0
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            ticks += 1
            let (waiters, reads) = state.withLock {
                $0.tick(now: .now, heartbeat: ticks % max(1, heartbeatSeconds) == 0)
            }
            Self.resume(waiters)
            for read in reads { perform(read) }
        }
    }

    func close() {
        Self.resume(state.withLock { $0.close() })
    }

    private func recordSubscribers() {
        let (subscribers, feeds) = state.withLock { ($0.count, $0.feeds.count) }
        feedCount.store(feeds, ordering: .relaxed)
        metrics.liveSubscribers.record(subscribers)
    }
}
