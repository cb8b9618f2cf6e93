import Foundation
import NotesDomain
import SyncEngine
import SyncModels
import SyncProtocol
import SyncStorage
import SyncToolSupport
import Synchronization

/// A device that speaks the protocol without a replica: it makes note events with the same generator, HLC
/// and dots as a real one, keeps them in an outbox until the server acknowledges them (`POST /v1/push`,
/// retried with the same ids), and follows its scope on the live stream (or long-polls where there is
/// none), checking what arrives in a `DeliveryLog` instead of applying it. Thousands share the HTTP client's
/// event loops; each costs a connection, a few tasks and a few kilobytes.
///
/// It keeps the state of the notes it made itself (at most `ownNotes`), so that its edits are valid CRDT
/// operations, and the status of each event it made (by dot counter, a byte each) for the verdict.
final class ThinDevice: Sendable {
    /// What became of an event this device made.
    enum Status: UInt8, Sendable {
        case pending, acknowledged, rejected
    }

    /// A checker self-test (`--delivery-faults`): what this device does to one batch it receives.
    enum DeliveryFault: String, CaseIterable, Codable, Sendable {
        case skip, duplicate, alter
    }

    struct Options: Sendable {
        var live: Bool
        var longPoll: Int
        var minPushInterval: Duration
        /// Pushes in flight at once across the thin devices: one per connection of the shared pool, so that
        /// the others wait as tasks (not as requests timing out in the client's queue, each holding its body).
        var pushGate: AsyncGate
        var deliveryFaults: [DeliveryFault] = []
    }

    static let ownNotes = 4
    static let maxPushEvents = 200

    let plan: Device.Plan
    let scope: Scope
    let replica: ReplicaID
    let transport: FaultyTransport
    /// The event loop the device's tasks run and sleep on.
    let loop: DeviceLoop
    /// The server, and the live stream's host, port and token.
    private let baseURL: URL
    private let target: ThinStream.Target
    private let clock: HybridLogicalClock
    private let metrics: LoadMetrics
    private let options: Options
    /// A new token when the server refuses the device's (nil: none; the failure is then retried as it is).
    private let renewToken: (@Sendable () async throws -> String)?

    private struct OwnNote {
        var id: NoteID
        var state = NoteState()
        var version: Int64 = 0
    }
    private struct State {
        var counter: UInt64 = 0
        var ids = EventIDGenerator()
        var statuses: [Status] = []
        /// Rejections by code, and the first message of each.
        var rejections: [String: (count: Int, message: String)] = [:]
        var outbox: [Event] = []
        var notes: [OwnNote] = []
        var log = DeliveryLog()
        var random: SplitMix64
        var pushWaiter: CheckedContinuation<Void, Never>?
        var deliveryFaults: [DeliveryFault]
        /// What the device does now, and since when (for the watchdog).
        var receiving = "starting"
        var receivingSince = ContinuousClock.now
        var pushing: ContinuousClock.Instant?
        /// What the live stream's handler asks of the receive loop (a catch-up, a new subscription), and the
        /// loop waiting for it.
        var signal: Signal?
        var signalWaiter: CheckedContinuation<Signal, Never>?
        /// The token of the device's next live stream (its requests' is the transport's), and when it was
        /// last renewed.
        var token: String
        var renewedAt: ContinuousClock.Instant?
    }

    /// What ends a wait of the receive loop while it holds the stream.
    enum Signal: Sendable {
        /// A frame did not continue the position: pull from it.
        case gap
        /// The server dropped the subscription for being behind: pull, then subscribe again.
        case behind
        /// The stream ended (why, if it failed).
        case ended(SyncFailure?)
    }
    private let state: Mutex<State>

    /// - Parameters:
    ///   - baseURL, token: the server, and this device's token for its live stream (`ThinStream`).
    ///   - renewToken: a new token when the server refuses this one (the device's requests and its next
    ///     stream use it).
    init(
        plan: Device.Plan, transport: FaultyTransport, baseURL: URL, token: String,
        renewToken: (@Sendable () async throws -> String)? = nil, metrics: LoadMetrics, options: Options,
        seed: UInt64
    ) throws {
        guard let host = baseURL.host, baseURL.scheme == "http" else {
            throw LoadError(
                "--server: thin devices hold their streams on plain connections and need an http:// URL with a host "
                    + "(\(baseURL)); run replicas only (--devices 0) through TLS")
        }
        self.baseURL = baseURL
        self.target = ThinStream.Target(host: host, port: baseURL.port ?? 80, path: "", token: token)
        self.renewToken = renewToken
        self.plan = plan
        self.scope = try Scope(plan.scope)
        var random = SplitMix64.stream(seed ^ 0x7417, plan.index)
        self.replica = ReplicaID.random(using: &random)
        self.transport = transport
        self.loop = DeviceLoop.of(plan.index)
        self.metrics = metrics
        self.options = options
        let skew = plan.clockSkewMilliseconds ?? 0
        self.clock = HybridLogicalClock(
            replica: replica,
            wallClock: { UInt64(max(0, Int64(HybridLogicalClock.systemMilliseconds()) + skew)) })
        self.state = Mutex(State(random: random, deliveryFaults: options.deliveryFaults, token: token))
    }

    // MARK: Making events

    /// One action of `action`'s kind on a note this device made (a creation when it has none), as a person
    /// would; a body edit types a word a few keystrokes apart, each its own event. Returns the events made.
    @discardableResult
    func act(_ action: WorkloadWeights.Action, pause: (Duration) async throws -> Void) async throws -> Int {
        let edits: [NoteEdit]
        switch action {
        case .create: edits = [.create]
        case .title: edits = [.title]
        case .body:
            let keystrokes = state.withLock { $0.random.int(1...5) }
            edits = Array(repeating: .typing, count: keystrokes)
        case .tag: edits = [.tagAdd]
        case .untag: edits = [.tagRemove]
        case .checklist: edits = [state.withLock { $0.random.chance(0.3) } ? .itemRemove : .itemAdd]
        case .check: edits = [.itemDone]
        case .view: edits = [.view]
        case .pin: edits = [.pin]
        case .delete: edits = [.delete]
        // A thin device has no blob queue: it edits a title where a full device attaches a file.
        case .attach: edits = [.title]
        }
        var made = 0
        for (index, edit) in edits.enumerated() {
            if index > 0 { try await pause(.milliseconds(state.withLock { $0.random.int(80...200) })) }
            if make(edit) {
                made += 1
                metrics.edited()
            }
        }
        return made
    }

    /// Makes one event of `edit` into the outbox; false when the edit does not apply.
    private func make(_ edit: NoteEdit) -> Bool {
        let made = state.withLock { state -> Bool in
            var edit = edit
            if state.notes.isEmpty { edit = .create }
            if edit == .create && state.notes.count >= Self.ownNotes { edit = .title }
            let index: Int
            if edit == .create {
                state.notes.append(OwnNote(id: NoteID(uuid: UUID(uuid: NoteEditor.randomUUID(&state.random)))))
                index = state.notes.count - 1
            } else {
                index = state.random.int(below: state.notes.count)
            }
            guard
                let payload = NoteEditor.payload(
                    edit, state: &state.notes[index].state, replica: replica, using: &state.random)
            else { return false }
            state.counter += 1
            state.notes[index].version += 1
            let note = state.notes[index]
            let dot = Dot(replica: replica, counter: state.counter)
            let hlc = clock.now()
            state.notes[index].state.apply(payload, hlc: hlc, dot: dot)
            let event = Event(
                id: state.ids.next(wall: hlc.physical, using: &state.random), scope: scope,
                stream: note.id.stream, streamVersion: note.version, type: payload.type.rawValue, hlc: hlc, dot: dot,
                payload: payload.json)
            state.outbox.append(event)
            state.statuses.append(.pending)
            // A deleted note, or one edited long enough (its body's history grows), makes way for a new one.
            if edit == .delete || note.version > 200 { state.notes.remove(at: index) }
            return true
        }
        if made { wakePusher() }
        return made
    }

    private func wakePusher() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            defer { state.pushWaiter = nil }
            return state.pushWaiter
        }
        waiter?.resume()
    }

    // MARK: Pushing

    /// Pushes the outbox while there is something in it, at most one push per `minPushInterval`, retrying
    /// failures with the same events (so with the same ids) after a growing pause; until cancelled.
    func pushLoop() async {
        var failures = 0
        var lastPush = ContinuousClock.now - options.minPushInterval
        while !Task.isCancelled {
            if state.withLock({ $0.outbox.isEmpty }) {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let resumeNow = state.withLock { state -> Bool in
                            if !state.outbox.isEmpty || Task.isCancelled { return true }
                            state.pushWaiter = continuation
                            return false
                        }
                        if resumeNow { continuation.resume() }
                    }
                } onCancel: {
                    wakePusher()
                }
                continue
            }
            let next = lastPush + options.minPushInterval
            if next > ContinuousClock.now { try? await loop.sleep(until: next) }
            guard transport.isOnline else {
                try? await loop.sleep(for: .milliseconds(100))
                continue
            }
            lastPush = .now
            do {
                // A push waits here for one of the shared connections, holding nothing but its outbox; the
                // batch is taken once it has one, so it carries what was made meanwhile.
                try await options.pushGate.run {
                    let batch = state.withLock { Array($0.outbox.prefix(Self.maxPushEvents)) }
                    guard !batch.isEmpty else { return }
                    let started = ContinuousClock.now
                    state.withLock { $0.pushing = started }
                    defer { state.withLock { $0.pushing = nil } }
                    let (results, _) = try await transport.push(PushRequest(replica: replica, events: batch))
                    settle(batch, results, roundTrip: ContinuousClock.now - started)
                }
                failures = 0
            } catch {
                if await renew(after: error) { continue }
                failures += 1
                let pause = min(5000, 200 << min(failures - 1, 5))
                try? await loop.sleep(for: .milliseconds(Int.random(in: pause / 2...pause)))
            }
        }
    }

    /// After an authentication failure, a new token from `renewToken` for the device's requests and its
    /// next stream: true when there is one to retry with at once. At most one a second (the push and the
    /// receive loops may both be refused by the same expiry; the second retries after its pause).
    private func renew(after error: any Error) async -> Bool {
        guard let renewToken, case .authentication? = error as? SyncFailure else { return false }
        let now = ContinuousClock.now
        guard state.withLock({ $0.renewedAt.map { now - $0 >= .seconds(1) } ?? true }) else { return false }
        guard let token = try? await renewToken() else { return false }
        state.withLock {
            $0.token = token
            $0.renewedAt = now
        }
        transport.setToken(token)
        return true
    }

    /// Takes the answered events out of the outbox with their outcome.
    private func settle(_ batch: [Event], _ results: [PushResult], roundTrip: Duration) {
        var acknowledged = 0
        var rejected = 0
        state.withLock { state in
            var outcome: [EventID: PushResult] = [:]
            for result in results { outcome[result.id] = result }
            state.outbox.removeAll { event in
                guard let result = outcome[event.id] else { return false }
                let index = Int(event.dot.counter) - 1
                if result.status == .rejected {
                    let code = result.code?.rawValue ?? "?"
                    state.rejections[code, default: (0, result.message ?? "")].count += 1
                    state.statuses[index] = .rejected
                    rejected += 1
                } else {
                    state.statuses[index] = .acknowledged
                    acknowledged += 1
                }
                return true
            }
        }
        metrics.pushed(batch.count, acknowledged: acknowledged, rejected: rejected, roundTrip: roundTrip)
    }

    // MARK: Receiving

    /// Follows the scope from the device's position: on the live stream, or by long-polling when the
    /// server has none (or `live` is off); catches up by pulling after a gap or `behind`; reconnects after
    /// a pause when the connection breaks; until cancelled.
    func receiveLoop() async {
        var live = options.live
        var failures = 0
        while !Task.isCancelled {
            guard transport.isOnline else {
                doing("offline")
                try? await loop.sleep(for: .milliseconds(100))
                continue
            }
            do {
                if live {
                    doing("subscribing to the live stream")
                    try await follow()
                } else {
                    doing("long-polling")
                    try await poll(wait: options.longPoll)
                }
                failures = 0
            } catch SyncFailure.permanent(let code, _) where code == SyncFailure.transportUnsupported && live {
                live = false
            } catch {
                if Task.isCancelled { return }
                if await renew(after: error) { continue }
                failures += 1
                doing("waiting to reconnect after: \(error)")
                let pause = min(5000, 200 << min(failures - 1, 5))
                try? await loop.sleep(for: .milliseconds(Int.random(in: pause / 2...pause)))
            }
        }
    }

    /// Holds one subscription (a `ThinStream`, its messages handled on the event loop by `handle`) until it
    /// ends, catching up by pulling when a frame leaves a gap.
    private func follow() async throws {
        let (fault, delay) = try await transport.liveFault()
        let position = state.withLock { $0.log.position }
        let request = PullRequest(cursor: ScopeCursor([scope: position]), scopes: [scope])
        let url = HTTPTransport.liveURL(base: baseURL, request)
        var liveTarget = target
        liveTarget.token = state.withLock { $0.token }
        liveTarget.path = url.path + (url.query.map { "?" + $0 } ?? "")
        if fault == .duplicate {
            // A second subscription, dropped at once.
            (try? await ThinStream.open(liveTarget, on: loop.loop, onMessage: { _ in }, onBytes: { _ in }))?.close()
        }
        state.withLock { $0.signal = nil }
        let metrics = metrics
        let stream = try await ThinStream.open(
            liveTarget, on: loop.loop, onMessage: { [weak self] in self?.handle($0) },
            onBytes: { metrics.moved(Traffic(receivedRaw: $0, receivedWire: $0)) })
        guard let id = transport.register(breaker: { stream.close() }) else {
            stream.close()
            throw SyncFailure.retryable(reason: "network: offline", retryAfter: nil)
        }
        defer {
            transport.unregister(id)
            stream.close()
        }
        stream.closed.whenSuccess { [weak self] failure in self?.raise(.ended(failure)) }
        let breaker =
            fault == .lostResponse || fault == .reorder
            ? Task {
                try? await Task.sleep(for: delay)
                if !Task.isCancelled { stream.close() }
            } : nil
        defer { breaker?.cancel() }
        while !Task.isCancelled {
            switch await nextSignal() {
            case .gap: try await catchUp()
            case .behind:
                try await catchUp()
                return
            case .ended(let failure):
                if let failure, case .permanent = failure { throw failure }
                return
            }
        }
    }

    /// A message of the live stream, on the event loop.
    private func handle(_ message: LiveMessage) {
        switch message {
        case .subscribed: doing("on the live stream")
        case .heartbeat: break
        case .frame(let frame) where frame.scope == scope:
            if !take(frame.events, through: frame.head, from: frame.after),
                frame.placement(at: state.withLock { $0.log.position }) == .gap
            {
                raise(.gap)
            }
        case .frame: break
        case .behind: raise(.behind)
        case .error: break
        }
    }

    private func raise(_ signal: Signal) {
        let waiter = state.withLock { state -> CheckedContinuation<Signal, Never>? in
            if let waiter = state.signalWaiter {
                state.signalWaiter = nil
                return waiter
            }
            // An end outranks a gap or `behind` not yet taken.
            if case .ended = state.signal {} else { state.signal = signal }
            return nil
        }
        waiter?.resume(returning: signal)
    }

    private func nextSignal() async -> Signal {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Signal, Never>) in
                let ready = state.withLock { state -> Signal? in
                    if let signal = state.signal {
                        state.signal = nil
                        return signal
                    }
                    if Task.isCancelled { return .ended(nil) }
                    state.signalWaiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            raise(.ended(nil))
        }
    }

    /// Pulls from the position to the head.
    func catchUp() async throws {
        doing("catching up")
        try await poll(wait: 0)
        doing("on the live stream")
    }

    /// Pulls pages from the position until the last; with `wait`, the first waits that long for news.
    private func poll(wait: Int) async throws {
        var wait = wait
        while true {
            let position = state.withLock { $0.log.position }
            let page = try await transport.pull(
                PullRequest(cursor: ScopeCursor([scope: position]), scopes: [scope], limit: 500, wait: wait))
            let head = try ScopeCursor(encoded: page.cursor)[scope]
            // A frame may have moved the position meanwhile: then pull again from there.
            guard take(page.events, through: max(head, position), from: position) else { continue }
            wait = 0
            if !page.hasMore { return }
        }
    }

    /// Checks and records a batch that continues the position `from` (after any delivery fault of the
    /// self-test); false, and nothing recorded, when the position is not `from` any more (or not yet).
    @discardableResult
    private func take(_ events: [Event], through head: Int64, from: Int64) -> Bool {
        var events = events
        let taken = state.withLock { state -> Int? in
            guard state.log.position == from else { return nil }
            if !events.isEmpty, !state.deliveryFaults.isEmpty {
                switch state.deliveryFaults.removeFirst() {
                case .skip: events.removeFirst()
                case .duplicate: events.append(events[events.count - 1])
                case .alter:
                    let event = events[0]
                    events[0] = Event(
                        id: event.id, scope: event.scope, stream: event.stream, streamVersion: event.streamVersion,
                        type: event.type, schemaVersion: event.schemaVersion, hlc: event.hlc, dot: event.dot,
                        payload: .object(["altered": .bool(true)]), seq: event.seq, receivedAt: event.receivedAt)
                }
            }
            state.log.receive(events, through: head)
            return Int(state.log.position - from)
        }
        guard let taken else { return false }
        metrics.received(events, new: taken, by: replica, page: true)
        return true
    }

    private func doing(_ what: String) {
        state.withLock {
            $0.receiving = what
            $0.receivingSince = .now
        }
    }

    // MARK: For the verdict and the watchdog

    var position: Int64 { state.withLock { $0.log.position } }
    var log: DeliveryLog { state.withLock { $0.log } }
    var pending: Int { state.withLock { $0.outbox.count } }
    var statuses: [Status] { state.withLock { $0.statuses } }
    var rejections: [String: (count: Int, message: String)] { state.withLock { $0.rejections } }

    /// What the device waits on, for a stalled run's diagnosis.
    var waitingOn: String {
        state.withLock { state in
            let now = ContinuousClock.now
            var parts = ["\(state.receiving) for \(Int((now - state.receivingSince).secondsValue)) s"]
            if let pushing = state.pushing {
                parts.append(
                    "a push of \(state.outbox.count) events in flight for \(Int((now - pushing).secondsValue)) s")
            } else if !state.outbox.isEmpty {
                parts.append("\(state.outbox.count) events waiting to be pushed")
            }
            return parts.joined(separator: "; ")
        }
    }
}
