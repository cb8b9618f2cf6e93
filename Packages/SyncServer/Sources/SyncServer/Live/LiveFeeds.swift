import SyncModels

/// The state of the live stream (`GET /v1/live`): per scope, a feed of the frames its last commits made,
/// and the subscribers reading them. A pure value: `LiveHub` keeps it behind a lock, does the reads it asks
/// for and resumes the waiters it returns.
///
/// A feed holds the scope's head as this server last read it and a bounded ring of frames, each the events
/// of `(after, head]` encoded once (`Frame.bytes`, the same bytes for every subscriber). Frames are
/// contiguous: each one's `after` is the `head` of the one before, the last one's `head` the feed's. A
/// subscriber keeps, per scope, the position it has been sent up to, always a frame boundary, so its next
/// frame is the one whose `after` is its position. One that falls further behind than the ring reaches
/// (it does not read, so its writes wait) is dropped back to catch-up (`Outcome.behind`).
///
/// Heads come from signals (this server's commits, other servers' through `LISTEN`): a signal for a scope
/// with subscribers asks for one tail read of the scope (`Read`), shared by all of them; signals that arrive
/// while it runs ask for one more after it, so none is missed and reads never pile up.
struct LiveFeeds<Waiter, Bytes> {
    struct Frame {
        var after: Int64
        var head: Int64
        var bytes: Bytes
        var size: Int
    }

    struct Feed {
        /// The head the frames reach; nil until the first read of the scope's head.
        var head: Int64?
        var frames: [Frame] = []
        var start = 0
        var bytes = 0
        var subscribers: Set<Int> = []
        /// A read of the scope runs.
        var reading = false
        /// A signal came while it ran: read again after it.
        var dirty = false
        /// Tells this feed from an earlier one of the same scope (gone with its last subscriber) in an
        /// `Expectation`.
        var generation = 0
        /// Commits of this server's own in flight whose events it will be handed (`expect`, `appended`).
        var expected = 0
        /// The highest head signalled while commits were expected (`Int64.max` when a signal carried none):
        /// signals wait for the expected events rather than read, and read afterwards only past them.
        var signalledWhileExpected: Int64?
        /// Frames handed over before the ones they follow (an expected commit whose answer came first),
        /// by `after`.
        var early: [Int64: [Frame]] = [:]

        var ring: ArraySlice<Frame> { frames[start...] }

        /// The index of the ring's frame that starts at `position` (frames are sorted by `after`).
        func frame(startingAt position: Int64) -> Int? {
            var low = start
            var high = frames.count
            while low < high {
                let middle = (low + high) / 2
                if frames[middle].after < position { low = middle + 1 } else { high = middle }
            }
            return low < frames.count && frames[low].after == position ? low : nil
        }
    }

    /// How a subscriber's stream ends.
    enum Outcome: Equatable {
        /// Too far behind the ring (or asked from too far behind): it catches up by pulling.
        case behind
        /// Its token expired.
        case expired
        /// The server is shutting down, or the subscriber went away.
        case closed
    }

    struct Subscriber {
        var positions: [Scope: Int64]
        var expiresAt: ContinuousClock.Instant?
        var waiter: Waiter?
        /// Something may be ready: frames, a heartbeat or an outcome.
        var ready = false
        var heartbeat = false
        var outcome: Outcome?
    }

    /// A read the hub must make: the events of `scope` after `after` (the feed's head).
    struct Read: Equatable {
        var scope: Scope
        var after: Int64
    }

    /// What `next` gives a subscriber.
    enum Step {
        case frames([Bytes])
        case heartbeat
        case end(Outcome)
        /// Nothing yet: the waiter is parked.
        case wait
    }

    private(set) var feeds: [Scope: Feed] = [:]
    private(set) var subscribers: [Int: Subscriber] = [:]
    private var nextID = 0
    private var nextGeneration = 0
    private(set) var closed = false
    /// The ring's bounds, per scope.
    let maxFrames: Int
    let maxBytes: Int

    init(maxFrames: Int = 256, maxBytes: Int = 1 << 20) {
        self.maxFrames = maxFrames
        self.maxBytes = maxBytes
    }

    // MARK: Subscribers

    /// Adds a subscriber at `positions` (one per scope it reads). Returns its id and the scopes whose feed is
    /// new: their head must be read (`headsRead`) before the subscriber can `start`. Nil when closed.
    mutating func subscribe(_ positions: [Scope: Int64], expiresAt: ContinuousClock.Instant?) -> (
        id: Int, newFeeds: [Scope]
    )? {
        guard !closed else { return nil }
        nextID += 1
        let id = nextID
        subscribers[id] = Subscriber(positions: positions, expiresAt: expiresAt)
        var newFeeds: [Scope] = []
        for scope in positions.keys.sorted() {
            if feeds[scope] == nil {
                // Reading its head: signals meanwhile make it read again once the head is known.
                nextGeneration += 1
                feeds[scope] = Feed(reading: true, generation: nextGeneration)
                newFeeds.append(scope)
            }
            feeds[scope]?.subscribers.insert(id)
        }
        return (id, newFeeds)
    }

    /// The heads of new feeds, read from the database. Returns the reads signals asked for meanwhile.
    mutating func headsRead(_ heads: [Scope: Int64]) -> [Read] {
        var reads: [Read] = []
        for (scope, head) in heads {
            guard var feed = feeds[scope], feed.head == nil else { continue }
            feed.head = head
            feed.reading = false
            if feed.dirty {
                feed.dirty = false
                feed.reading = true
                reads.append(Read(scope: scope, after: head))
            }
            feeds[scope] = feed
        }
        return reads
    }

    /// Places a subscriber once its feeds' heads are known: where its position is a frame boundary of the
    /// ring or the head, it reads on from there; otherwise it is behind the ring, and the caller sends it
    /// `(position, head]` itself, read from the database (`Backfill`), before its frames: its position moves
    /// to the head now. A position past the head (a server whose database went back) ends it as `behind`,
    /// and so does a feed whose head is still unknown (its read failed).
    mutating func start(_ id: Int) -> [Backfill] {
        guard var subscriber = subscribers[id] else { return [] }
        var backfills: [Backfill] = []
        for (scope, position) in subscriber.positions.sorted(by: { $0.key < $1.key }) {
            guard let feed = feeds[scope], let head = feed.head, position <= head else {
                subscriber.outcome = .behind
                subscriber.ready = true
                break
            }
            if position == head || feed.frame(startingAt: position) != nil { continue }
            backfills.append(Backfill(scope: scope, after: position, through: head))
            subscriber.positions[scope] = head
        }
        subscribers[id] = subscriber
        return backfills
    }

    /// Events a subscriber is sent from the database before its frames.
    struct Backfill: Equatable {
        var scope: Scope
        var after: Int64
        var through: Int64
    }

    /// The subscriber's next step. Frames it has not had, in order per scope; a heartbeat when one is due
    /// and nothing else is to be sent; its outcome; otherwise `.wait`, and `waiter` is kept to be resumed.
    ///
    /// Called once per subscriber and frame: it changes the subscriber where it is stored (no copy of it out
    /// of the dictionary and back, no copy of its positions while they are read).
    mutating func next(_ id: Int, waiter: Waiter) -> Step {
        guard let index = subscribers.index(forKey: id) else { return .end(.closed) }
        if let outcome = subscribers.values[index].outcome { return .end(outcome) }
        var frames: [Bytes] = []
        var moved: [(scope: Scope, head: Int64)] = []
        for (scope, position) in subscribers.values[index].positions {
            guard let feed = feeds[scope], let head = feed.head, position < head else { continue }
            guard let first = feed.frame(startingAt: position) else {
                // Its frames left the ring: it was too slow (`readEnded` ends such subscribers; this is the
                // same rule, should one get here first).
                subscribers.values[index].outcome = .behind
                return .end(.behind)
            }
            for frame in feed.frames[first...] { frames.append(frame.bytes) }
            moved.append((scope, head))
        }
        for (scope, head) in moved { subscribers.values[index].positions[scope] = head }
        if !frames.isEmpty {
            subscribers.values[index].heartbeat = false
            subscribers.values[index].ready = false
            return .frames(frames)
        }
        if subscribers.values[index].heartbeat {
            subscribers.values[index].heartbeat = false
            subscribers.values[index].ready = false
            return .heartbeat
        }
        subscribers.values[index].ready = false
        subscribers.values[index].waiter = waiter
        return .wait
    }

    /// Removes a subscriber; returns its parked waiter, to resume. A feed with no subscriber left goes.
    mutating func unsubscribe(_ id: Int) -> Waiter? {
        guard let subscriber = subscribers.removeValue(forKey: id) else { return nil }
        for scope in subscriber.positions.keys {
            feeds[scope]?.subscribers.remove(id)
            if feeds[scope]?.subscribers.isEmpty == true {
                bufferedBytes -= feeds[scope]!.bytes
                feeds[scope] = nil
            }
        }
        return subscriber.waiter
    }

    /// Ends a subscriber's stream with `outcome` (e.g. `.closed` on shutdown); returns its waiter.
    mutating func end(_ id: Int, _ outcome: Outcome) -> Waiter? {
        guard subscribers[id] != nil else { return nil }
        if subscribers[id]?.outcome == nil { subscribers[id]?.outcome = outcome }
        return wake(id)
    }

    private mutating func wake(_ id: Int) -> Waiter? {
        subscribers[id]?.ready = true
        let waiter = subscribers[id]?.waiter
        subscribers[id]?.waiter = nil
        return waiter
    }

    // MARK: Signals and reads

    /// A commit in `scope` (its new head when known). Returns the read to make, if any: none when no one
    /// subscribes to the scope, when the feed already has that head, or when a read runs (it reads again
    /// after).
    mutating func signal(_ scope: Scope, head: Int64?) -> Read? {
        guard var feed = feeds[scope] else { return nil }
        if let head, let known = feed.head, head <= known { return nil }
        defer { feeds[scope] = feed }
        if feed.expected > 0 {
            feed.signalledWhileExpected = max(feed.signalledWhileExpected ?? 0, head ?? .max)
            return nil
        }
        if feed.reading || feed.head == nil {
            feed.dirty = true
            return nil
        }
        feed.reading = true
        return Read(scope: scope, after: feed.head!)
    }

    /// Every scope with subscribers may have commits this server was not told about (the `LISTEN`
    /// connection came back): reads for all of them.
    mutating func signalAll() -> [Read] {
        feeds.keys.sorted().compactMap { signal($0, head: nil) }
    }

    /// A read of `read.scope` ended with `frames` (contiguous from `read.after`; empty when it found nothing
    /// new). Appends them, trims the ring, ends subscribers left behind it (`dropped` counts them), and
    /// returns the waiters to resume and the next read when signals came meanwhile.
    mutating func readEnded(_ read: Read, frames new: [Frame]) -> (waiters: [Waiter], next: Read?, dropped: Int) {
        // Taken out while frames are appended: a copy left in `feeds` would make the first append copy the ring.
        guard var feed = feeds.removeValue(forKey: read.scope) else { return ([], nil, 0) }
        var waiters: [Waiter] = []
        var dropped = 0
        if let first = new.first, first.after == feed.head {
            append(new, to: &feed, of: read.scope, waiters: &waiters, dropped: &dropped)
        } else if let last = new.last, let head = feed.head, last.head > head {
            // Commits handed over meanwhile (`appended`) moved the head, and the read found more past it.
            feed.dirty = true
        }
        var next: Read?
        if feed.dirty {
            feed.dirty = false
            next = Read(scope: read.scope, after: feed.head ?? read.after)
        } else {
            feed.reading = false
        }
        feeds[read.scope] = feed
        return (waiters, next, dropped)
    }

    /// Appends contiguous `new` frames (the first one's `after` is the feed's head), then the early ones they
    /// reach; trims the ring, ends subscribers left behind it, and collects the waiters to resume.
    private mutating func append(
        _ new: [Frame], to feed: inout Feed, of scope: Scope, waiters: inout [Waiter], dropped: inout Int
    ) {
        let bytesBefore = feed.bytes
        defer { bufferedBytes += feed.bytes - bytesBefore }
        for frame in new {
            feed.frames.append(frame)
            feed.bytes += frame.size
        }
        feed.head = new.last!.head
        while let next = feed.early.removeValue(forKey: feed.head!) {
            for frame in next {
                feed.frames.append(frame)
                feed.bytes += frame.size
            }
            feed.head = next.last!.head
        }
        for (after, frames) in feed.early where after < feed.head! {
            // Reached by a read meanwhile; should it reach past the head, what is past it is read.
            feed.early[after] = nil
            if frames.last!.head > feed.head! {
                feed.signalledWhileExpected = max(feed.signalledWhileExpected ?? 0, frames.last!.head)
            }
        }
        // Trim to the bounds, then compact the storage now and then.
        while feed.frames.count - feed.start > maxFrames
            || (feed.bytes > maxBytes && feed.frames.count - feed.start > 1)
        {
            feed.bytes -= feed.frames[feed.start].size
            feed.start += 1
        }
        if feed.start > 64 && feed.start * 2 > feed.frames.count {
            feed.frames.removeFirst(feed.start)
            feed.start = 0
        }
        let oldest = feed.ring.first?.after ?? feed.head!
        for id in feed.subscribers {
            guard let index = subscribers.index(forKey: id),
                let position = subscribers.values[index].positions[scope]
            else { continue }
            if position < oldest, subscribers.values[index].outcome == nil {
                subscribers.values[index].outcome = .behind
                dropped += 1
            }
            subscribers.values[index].ready = true
            if let waiter = subscribers.values[index].waiter {
                subscribers.values[index].waiter = nil
                waiters.append(waiter)
            }
        }
    }

    // MARK: This server's own commits

    /// A commit of this server's own expected in a scope's current feed.
    struct Expectation: Equatable {
        var scope: Scope
        var generation: Int
    }

    /// This server is about to commit events in `scopes` and will hand them over (`appended`), so that a feed
    /// need not read them back from the database. Until it does, signals for those feeds (above all the
    /// commit's own notification, which may come back before the commit's answer) wait instead of reading.
    /// Returns an expectation per scope with a feed whose head is known; each must be ended by `appended`.
    mutating func expect(_ scopes: some Sequence<Scope>) -> [Expectation] {
        var expectations: [Expectation] = []
        for scope in scopes {
            guard let index = feeds.index(forKey: scope), feeds.values[index].head != nil else { continue }
            feeds.values[index].expected += 1
            expectations.append(Expectation(scope: scope, generation: feeds.values[index].generation))
        }
        return expectations
    }

    /// An expected commit ended: `frames` are its events in the scope (contiguous, from the head before it),
    /// or nil when it did not commit. Frames that follow the feed's head are appended at once (a read running
    /// meanwhile then ends off the head, and reads again only if it found more than they brought); frames
    /// past the head wait for the expected ones before them. Once no commit is expected, a signal that came
    /// meanwhile for a head the feed does not reach makes the read it would have made.
    mutating func appended(_ expectation: Expectation, frames new: [Frame]?) -> (
        waiters: [Waiter], read: Read?, dropped: Int
    ) {
        let scope = expectation.scope
        guard let index = feeds.index(forKey: scope), feeds.values[index].generation == expectation.generation,
            feeds.values[index].expected > 0
        else {
            return ([], nil, 0)
        }
        // Taken out while frames are appended, as in `readEnded`.
        var feed = feeds.remove(at: index).value
        feed.expected -= 1
        var waiters: [Waiter] = []
        var dropped = 0
        if let new, let first = new.first, let head = feed.head {
            if first.after == head {
                append(new, to: &feed, of: scope, waiters: &waiters, dropped: &dropped)
            } else if first.after > head {
                feed.early[first.after] = new
            }
        }
        guard feed.expected == 0 else {
            feeds[scope] = feed
            return (waiters, nil, dropped)
        }
        // Nothing expected any more: early frames not reached go, and their heads are read.
        var signalled = feed.signalledWhileExpected
        for frames in feed.early.values { signalled = max(signalled ?? 0, frames.last!.head) }
        feed.early = [:]
        feed.signalledWhileExpected = nil
        feeds[scope] = feed
        guard let signalled else { return (waiters, nil, dropped) }
        return (waiters, signal(scope, head: signalled == .max ? nil : signalled), dropped)
    }

    /// A read failed: reading again is left to the next signal (and to `tick`, which retries scopes whose
    /// last read failed).
    mutating func readFailed(_ read: Read) {
        guard var feed = feeds[read.scope] else { return }
        feed.reading = false
        feed.dirty = true
        feeds[read.scope] = feed
    }

    // MARK: Time

    /// Once a second: ends the streams of expired tokens and, when `heartbeat` is set, makes every idle
    /// subscriber write one. Returns the waiters to resume and reads to retry (failed ones).
    mutating func tick(now: ContinuousClock.Instant, heartbeat: Bool) -> (waiters: [Waiter], reads: [Read]) {
        var waiters: [Waiter] = []
        // In place, by index: iterating the dictionary's values while changing it would copy all of them.
        var index = subscribers.startIndex
        while index != subscribers.endIndex {
            let expired = subscribers.values[index].expiresAt.map { $0 <= now } ?? false
            if expired && subscribers.values[index].outcome == nil {
                subscribers.values[index].outcome = .expired
            } else if heartbeat {
                subscribers.values[index].heartbeat = true
            } else {
                subscribers.formIndex(after: &index)
                continue
            }
            subscribers.values[index].ready = true
            if let waiter = subscribers.values[index].waiter {
                subscribers.values[index].waiter = nil
                waiters.append(waiter)
            }
            subscribers.formIndex(after: &index)
        }
        var reads: [Read] = []
        for (scope, feed) in feeds where feed.dirty && !feed.reading && feed.head != nil {
            feeds[scope]?.dirty = false
            feeds[scope]?.reading = true
            reads.append(Read(scope: scope, after: feed.head!))
        }
        return (waiters, reads)
    }

    /// Ends every stream and refuses new subscribers (shutdown). Returns the waiters to resume.
    mutating func close() -> [Waiter] {
        closed = true
        return subscribers.keys.compactMap { end($0, .closed) }
    }

    /// Subscribers now (for the gauge).
    var count: Int { subscribers.count }

    /// Bytes of frames in every ring (for the gauge).
    private(set) var bufferedBytes = 0
}

extension LiveFeeds: Sendable where Waiter: Sendable, Bytes: Sendable {}
extension LiveFeeds.Frame: Sendable where Bytes: Sendable {}
extension LiveFeeds.Feed: Sendable where Bytes: Sendable {}
extension LiveFeeds.Subscriber: Sendable where Waiter: Sendable {}
extension LiveFeeds.Step: Sendable where Bytes: Sendable {}
extension LiveFeeds.Read: Sendable {}
extension LiveFeeds.Backfill: Sendable {}
extension LiveFeeds.Outcome: Sendable {}
