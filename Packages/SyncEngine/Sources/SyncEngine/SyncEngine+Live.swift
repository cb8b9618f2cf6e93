import Foundation
import SyncEventStore
import SyncModels
import SyncProtocol

/// What the live stream's task leaves for the run loop, and the tasks `setLive(false)` ends at once.
struct LiveLinks: Sendable {
    /// Whether the app wants the stream (`SyncEngine.setLive`): true in the foreground.
    var open = true
    /// How many times `setLive(false)` was called: the run loop learns of a close even when the app opens
    /// the stream again before the loop has looked.
    var closings = 0
    /// The task reading the stream, and the number of its connection: messages of an older one are dropped.
    var reader: Task<Void, Never>?
    var generation = 0
    /// The current connection's messages not yet taken by the run loop, in order.
    var messages: [LiveEvent] = []
    /// The long-poll's task, while the engine long-polls.
    var poller: Task<Void, Never>?
}

/// A message of the live stream as the run loop takes it.
enum LiveEvent: Sendable {
    case subscribed(heartbeatSeconds: Int)
    case frame(LiveFrame)
    case ended(LiveScheduler<ContinuousClock.Instant>.End)
}

/// The run loop's side of the live stream: the state machine and its timer.
struct LiveDriver {
    var scheduler: LiveScheduler<ContinuousClock.Instant>
    /// When the state machine asked to be ticked.
    var wakeAt: ContinuousClock.Instant?
    /// The last `setLive` the state machine was told, and the closings it has seen.
    var open = false
    var closings = 0
    var longPolling = false

    init(scheduler: LiveScheduler<ContinuousClock.Instant>) {
        self.scheduler = scheduler
    }

    /// What the run loop does after a step of the stream.
    struct Step {
        /// Run a cycle for this trigger (a catch-up after a gap or `behind`, a page that needs one).
        var cycle: SyncTrigger?
        /// Pause for a new token (the stream ended with `auth.expired`).
        var pause: SyncFailure?
    }
}

extension SyncEngine {
    // MARK: - Foreground and background

    /// Opens the live stream (`true`: the app came to the foreground, the default) or closes it (`false`: it
    /// went to the background). Closing drops the connection, or the long-poll, at once; `run()` then keeps
    /// syncing on local writes, its `interval` and the other triggers. Opening syncs now and subscribes once
    /// that cycle has reached the head; it also tries the stream again after a server without it made the
    /// engine long-poll. Callable at any time, also before `run()`.
    public func setLive(_ open: Bool) {
        let tasks = links.withLock { links -> [Task<Void, Never>] in
            links.open = open
            guard !open else { return [] }
            links.closings += 1
            links.generation += 1
            links.messages.removeAll()
            defer {
                links.reader = nil
                links.poller = nil
            }
            return [links.reader, links.poller].compactMap { $0 }
        }
        for task in tasks { task.cancel() }
        post(.remoteChange)
    }

    // MARK: - The run loop's step

    /// What the run loop does with the stream before each trigger: tells the state machine about
    /// `setLive`, the time and the stream's messages, carries out its actions, applies the frames (and the
    /// long-poll's pages) that continue the store, and starts or ends the long-poll.
    func stepLive<R: RandomNumberGenerator>(_ driver: inout LiveDriver, random: inout R) async -> LiveDriver.Step {
        var step = LiveDriver.Step()
        let (open, closings) = links.withLock { ($0.open, $0.closings) }
        if closings != driver.closings {
            // Closed (and perhaps opened again) since the last look: its connection is gone.
            driver.closings = closings
            if driver.open {
                driver.open = false
                await perform(
                    driver.scheduler.setOpen(false, now: .now), &driver, &step, reason: "closed in the background")
            }
        }
        if open != driver.open {
            driver.open = open
            await perform(
                driver.scheduler.setOpen(open, now: .now), &driver, &step, reason: "closed in the background")
            // Back in the foreground: sync now, not after a backoff.
            if open, step.cycle != nil { step.cycle = .explicit }
        }
        if let wake = driver.wakeAt, wake <= .now {
            driver.wakeAt = nil
            await perform(driver.scheduler.tick(now: .now), &driver, &step)
        }
        let messages = links.withLock { links in
            defer { links.messages.removeAll() }
            return links.messages
        }
        var frames: [LiveFrame] = []
        for message in messages {
            switch message {
            case .frame(let frame):
                frames.append(frame)
                continue
            case .subscribed, .ended:
                break
            }
            // Frames before a message are applied before it. After a gap, the rest is of the stream closed.
            var applied = true
            if !frames.isEmpty { applied = await applyFrames(frames, &driver, &step, random: &random) }
            frames.removeAll()
            if !applied { break }
            if case .subscribed(let heartbeat) = message {
                await perform(driver.scheduler.subscribed(now: .now), &driver, &step)
                await updateStatus { $0.liveConnected = true }
                await journal.record("live.connect", "subscribed (heartbeat \(heartbeat) s)")
            } else if case .ended(let end) = message {
                await streamEnded(end, &driver, &step, random: &random)
            }
        }
        if !frames.isEmpty { _ = await applyFrames(frames, &driver, &step, random: &random) }
        // The long-poll's pages: a page that does not continue the store needs a cycle.
        if !(await applyPolledPages()) { step.cycle = step.cycle ?? .remoteChange }
        await reconcileLongPoll(&driver)
        return step
    }

    /// A cycle reached the head: the stream subscribes if it waited for that.
    func liveCaughtUp(_ driver: inout LiveDriver) {
        switch driver.scheduler.caughtUp(now: .now) {
        case .connect: connect()
        case .wake(let at): driver.wakeAt = at
        default: break
        }
    }

    /// `run()` ends: the stream and the long-poll with it.
    func stopLive(_ driver: inout LiveDriver) async {
        _ = driver.scheduler.setOpen(false, now: .now)
        closeStream()
        let poller = links.withLock { links in
            defer { links.poller = nil }
            return links.poller
        }
        poller?.cancel()
        await updateStatus {
            $0.liveConnected = false
            $0.longPolling = false
        }
    }

    /// Applies frames (`applyLiveFrames`); on a gap, closes the stream and catches up. Returns whether they
    /// were all applied.
    private func applyFrames<R: RandomNumberGenerator>(
        _ frames: [LiveFrame], _ driver: inout LiveDriver, _ step: inout LiveDriver.Step, random: inout R
    ) async -> Bool {
        guard let gap = await applyLiveFrames(frames) else { return true }
        closeStream()
        await streamEnded(.gap, &driver, &step, random: &random, detail: "\(gap): catching up by pulling")
        return false
    }

    /// The stream ended: status, journal, and what the state machine says.
    private func streamEnded<R: RandomNumberGenerator>(
        _ end: LiveScheduler<ContinuousClock.Instant>.End, _ driver: inout LiveDriver, _ step: inout LiveDriver.Step,
        random: inout R, detail: String? = nil
    ) async {
        let wasConnected = driver.scheduler.isConnected
        let action = driver.scheduler.ended(end, now: .now, random: &random)
        await updateStatus { $0.liveConnected = false }
        let detail =
            detail
            ?? {
                switch end {
                case .ended: "the server closed the stream"
                case .behind: "behind: catching up by pulling"
                case .gap: "a gap: catching up by pulling"
                case .failed(let failure): failure.description
                }
            }()
        if driver.scheduler.longPolls {
            await journal.record("live.unsupported", "no live stream (\(detail)): long-polling instead")
        } else if wasConnected || driver.scheduler.consecutiveFailures <= 1 {
            // A server that stays down is journaled by the cycles' retries, not by every attempt here.
            await journal.record("live.drop", detail)
        }
        await perform(action, &driver, &step)
    }

    /// Carries out one action of the state machine.
    private func perform(
        _ action: LiveScheduler<ContinuousClock.Instant>.Action, _ driver: inout LiveDriver,
        _ step: inout LiveDriver.Step, reason: String = ""
    ) async {
        switch action {
        case .connect:
            connect()
        case .disconnect:
            closeStream()
            await updateStatus { $0.liveConnected = false }
            await journal.record("live.drop", reason)
        case .catchUp:
            step.cycle = step.cycle ?? .remoteChange
        case .pause(let failure):
            step.pause = failure
        case .wake(let at):
            driver.wakeAt = at
        case .none:
            break
        }
    }

    /// Starts or ends the long-poll as the state machine says (and `Configuration.longPoll` allows).
    private func reconcileLongPoll(_ driver: inout LiveDriver) async {
        let wanted = driver.scheduler.longPolls && configuration.longPoll != nil
        guard wanted != driver.longPolling else { return }
        driver.longPolling = wanted
        if wanted, let wait = configuration.longPoll {
            links.withLock { links in
                if links.poller == nil { links.poller = Task { await self.pollForChanges(wait: wait) } }
            }
        } else {
            let poller = links.withLock { links in
                defer { links.poller = nil }
                return links.poller
            }
            poller?.cancel()
            polled.withLock { $0 = PollResults() }
        }
        await updateStatus { $0.longPolling = wanted }
    }

    // MARK: - The stream

    /// Opens a new connection: a task that subscribes from the stored cursor and leaves the stream's
    /// messages for the run loop.
    private func connect() {
        let old = links.withLock { links -> Task<Void, Never>? in
            let old = links.reader
            links.generation += 1
            links.messages.removeAll()
            let generation = links.generation
            links.reader = Task { await self.read(generation: generation) }
            return old
        }
        old?.cancel()
    }

    /// Closes the connection, if any; its messages not yet taken are dropped.
    private func closeStream() {
        let reader = links.withLock { links -> Task<Void, Never>? in
            links.generation += 1
            links.messages.removeAll()
            defer { links.reader = nil }
            return links.reader
        }
        reader?.cancel()
    }

    /// Reads one connection until it ends, then says how (unless the run loop closed it).
    private func read(generation: Int) async {
        let end = await readStream(generation: generation)
        if !Task.isCancelled { deliver(.ended(end), generation: generation) }
    }

    private func readStream(generation: Int) async -> LiveScheduler<ContinuousClock.Instant>.End {
        let cursor: ScopeCursor
        do {
            cursor = try ScopeCursor(encoded: try await store.cursor())
        } catch {
            return .failed(.retryable(reason: "store: \(error)", retryAfter: nil))
        }
        // The replica names itself, as a pull does; the frames carry its own events too (the store knows them).
        let request = PullRequest(cursor: cursor, scopes: configuration.scopes, replica: store.replica)
        do {
            for try await message in try await transport.live(request) {
                switch message {
                case .subscribed(let heartbeat):
                    deliver(.subscribed(heartbeatSeconds: heartbeat), generation: generation)
                case .frame(let frame): deliver(.frame(frame), generation: generation)
                case .heartbeat: continue
                case .behind: return .behind
                case .error(let detail): return .failed(SyncFailure.from(detail))
                }
            }
            return .ended
        } catch let failure as SyncFailure {
            return .failed(failure)
        } catch {
            return .failed(.retryable(reason: "network: \(error)", retryAfter: nil))
        }
    }

    /// Leaves a message of connection `generation` for the run loop, and wakes it when it was not already
    /// due to look.
    private func deliver(_ message: LiveEvent, generation: Int) {
        let wake = links.withLock { links -> Bool in
            guard links.generation == generation else { return false }
            links.messages.append(message)
            return links.messages.count == 1
        }
        if wake { post(.remoteChange) }
    }

    // MARK: - Frames

    /// Applies frames of the stream, in order, each scope's only where it continues the store: a frame the
    /// store has already (a cycle pulled it) is skipped, one it has in part gives only the events past it.
    /// Frames go together, in one short transaction per `pageSize` events, each storing the cursor moved to
    /// the frames' heads, with projections written at once (no `projectionLag`). Runs on the run loop, so it is
    /// never a second writer beside a cycle.
    /// - Returns: nil when every frame was applied or known; otherwise why the rest was not (a gap before a
    ///   frame, a frame that is not what the protocol says, a store failure): the caller catches up by a cycle.
    func applyLiveFrames(_ frames: [LiveFrame]) async -> String? {
        let stored: String?
        var cursor: ScopeCursor
        do {
            stored = try await store.cursor()
            cursor = try ScopeCursor(encoded: stored)
            // A store that is bootstrapping after a reset takes no frame: its cycle goes on.
            if try await store.isBootstrapping() { return "the store is bootstrapping" }
        } catch {
            return "the store: \(error)"
        }
        var follows = stored ?? ""
        var events: [Event] = []
        var moved = false
        var problem: String? = nil
        for frame in frames {
            let position = cursor[frame.scope]
            if position >= frame.head { continue }
            guard Self.isWellFormed(frame) else {
                problem = "a frame of \(frame.scope.name) that does not hold \(frame.after + 1)...\(frame.head)"
                break
            }
            guard position >= frame.after else {
                problem = "\(frame.scope.name) is at \(position), a frame starts after \(frame.after)"
                break
            }
            events += frame.events.filter { ($0.seq ?? 0) > position }
            cursor.advance(frame.scope, to: frame.head)
            moved = true
            if events.count >= max(1, configuration.pageSize) {
                guard await applyFrameEvents(events, cursor: cursor, follows: follows) else { return "not applied" }
                follows = cursor.encoded
                events.removeAll()
                moved = false
            }
        }
        if moved {
            guard await applyFrameEvents(events, cursor: cursor, follows: follows) else { return "not applied" }
        }
        return problem
    }

    /// Whether a frame holds its scope's events `after + 1 ... head`, in order.
    static func isWellFormed(_ frame: LiveFrame) -> Bool {
        guard frame.head > frame.after, frame.events.count == Int(frame.head - frame.after) else { return false }
        for (index, event) in frame.events.enumerated()
        where event.scope != frame.scope || event.seq != frame.after + 1 + Int64(index) {
            return false
        }
        return true
    }

    /// Applies frames' events and the cursor after them in one transaction, if the store still holds
    /// `follows`; reports it as a round.
    private func applyFrameEvents(_ events: [Event], cursor: ScopeCursor, follows: String) async -> Bool {
        let response = SyncResponse(results: [], events: events, cursor: cursor.encoded, hasMore: false)
        let start = ContinuousClock.now
        var budget = oneTransactionBudget()
        guard
            let outcome = try? await apply(response, pushed: [], markEvery: nil, budget: &budget, follows: follows)
                .outcome, !outcome.rewound
        else { return false }
        let applied = ContinuousClock.now - start
        let count = events.count
        await updateStatus { $0.pulledEvents += count }
        configuration.onRound?(
            SyncRound(
                pushed: 0, acknowledged: 0, rejected: 0, pulled: count, inserted: outcome.pulled.inserted,
                pageLimit: count, hasMore: false, roundTrip: .zero, waited: .zero, apply: applied, traffic: Traffic(),
                events: events))
        return true
    }
}
