import Foundation
import SyncModels
import Testing

@testable import SyncServer

/// The live stream's state machine, without I/O: waiters are plain numbers, frames strings.
@Suite struct LiveFeedsTests {
    typealias Feeds = LiveFeeds<Int, String>

    static func frame(_ after: Int64, _ head: Int64) -> Feeds.Frame {
        Feeds.Frame(after: after, head: head, bytes: "\(after)-\(head)", size: 10)
    }

    /// A feed for "a" at head `head` with one subscriber at `position`.
    static func subscribed(at position: Int64, head: Int64, feeds: inout Feeds) -> Int {
        let (id, newFeeds) = feeds.subscribe(["a": position], expiresAt: nil)!
        #expect(newFeeds == ["a"])
        #expect(feeds.headsRead(["a": head]).isEmpty)
        return id
    }

    @Test func aCommitIsReadOnceAndGoesToEverySubscriberAsTheSameFrame() {
        var feeds = Feeds()
        let first = Self.subscribed(at: 5, head: 5, feeds: &feeds)
        let (second, newFeeds) = feeds.subscribe(["a": 5], expiresAt: nil)!
        #expect(newFeeds.isEmpty)
        #expect(feeds.start(first).isEmpty && feeds.start(second).isEmpty)
        guard case .wait = feeds.next(first, waiter: 1), case .wait = feeds.next(second, waiter: 2) else {
            Issue.record("nothing should be ready")
            return
        }
        // Two signals: one read; the second arrives while it runs and asks for one more after it.
        #expect(feeds.signal("a", head: 6) == Feeds.Read(scope: "a", after: 5))
        #expect(feeds.signal("a", head: 7) == nil)
        let (waiters, next, dropped) = feeds.readEnded(.init(scope: "a", after: 5), frames: [Self.frame(5, 6)])
        #expect(Set(waiters) == [1, 2] && dropped == 0)
        #expect(next == Feeds.Read(scope: "a", after: 6))
        _ = feeds.readEnded(.init(scope: "a", after: 6), frames: [Self.frame(6, 7)])
        for id in [first, second] {
            guard case .frames(let frames) = feeds.next(id, waiter: 9) else {
                Issue.record("frames expected")
                return
            }
            #expect(frames == ["5-6", "6-7"])
        }
        // A signal for a head the feed has is no read.
        #expect(feeds.signal("a", head: 7) == nil)
        #expect(feeds.signal("b", head: 1) == nil, "no subscriber to b: no read")
    }

    @Test func aSubscriberBehindTheRingIsSentTheGapFromTheDatabaseFirst() {
        var feeds = Feeds()
        let early = Self.subscribed(at: 10, head: 10, feeds: &feeds)
        _ = feeds.start(early)
        _ = feeds.signal("a", head: 12)
        _ = feeds.readEnded(.init(scope: "a", after: 10), frames: [Self.frame(10, 12)])
        // At 10, where the ring starts: no backfill. At 3: (3, 12] from the database, and its position moves
        // to the head.
        let (onRing, _) = feeds.subscribe(["a": 10], expiresAt: nil)!
        #expect(feeds.start(onRing).isEmpty)
        let (late, _) = feeds.subscribe(["a": 3], expiresAt: nil)!
        #expect(feeds.start(late) == [Feeds.Backfill(scope: "a", after: 3, through: 12)])
        guard case .frames(let frames) = feeds.next(onRing, waiter: 1), case .wait = feeds.next(late, waiter: 2)
        else {
            Issue.record("the one on the ring gets its frame; the late one waits for the next")
            return
        }
        #expect(frames == ["10-12"])
        // A position past the head: the server's history went back; the subscriber catches up by pulling.
        let (ahead, _) = feeds.subscribe(["a": 99], expiresAt: nil)!
        _ = feeds.start(ahead)
        guard case .end(.behind) = feeds.next(ahead, waiter: 3) else {
            Issue.record("ahead of the head: behind")
            return
        }
    }

    @Test func aSubscriberThatDoesNotReadIsDroppedWhenItsFramesLeaveTheRing() {
        var feeds = Feeds(maxFrames: 3, maxBytes: 1 << 20)
        let slow = Self.subscribed(at: 0, head: 0, feeds: &feeds)
        let fast = feeds.subscribe(["a": 0], expiresAt: nil)!.id
        _ = feeds.start(slow)
        _ = feeds.start(fast)
        var droppedInAll = 0
        for head in Int64(1)...5 {
            _ = feeds.signal("a", head: head)
            let (_, _, dropped) = feeds.readEnded(
                .init(scope: "a", after: head - 1), frames: [Self.frame(head - 1, head)])
            droppedInAll += dropped
            // The fast one reads every frame as it comes.
            guard case .frames(let frames) = feeds.next(fast, waiter: 1) else {
                Issue.record("the fast subscriber gets each frame")
                return
            }
            #expect(frames == ["\(head - 1)-\(head)"])
        }
        #expect(droppedInAll == 1, "the slow one is dropped once, when frame 0-1 leaves the ring")
        guard case .end(.behind) = feeds.next(slow, waiter: 2) else {
            Issue.record("the slow one is behind")
            return
        }
        #expect(feeds.feeds["a"]!.ring.count == 3)
    }

    /// Each ring keeps its byte bound, and the total over the rings (`bufferedBytes`, kept as frames come and go,
    /// for the gauge) is the sum of theirs, through reads, handovers and a feed that goes.
    @Test func theRingKeepsItsByteBound() {
        var feeds = Feeds(maxFrames: 100, maxBytes: 25)
        let id = Self.subscribed(at: 0, head: 0, feeds: &feeds)
        _ = feeds.start(id)
        let (other, _) = feeds.subscribe(["b": 0], expiresAt: nil)!
        _ = feeds.headsRead(["b": 0])
        _ = feeds.start(other)
        func total() -> Int { feeds.feeds.values.reduce(0) { $0 + $1.bytes } }
        for head in Int64(1)...10 {
            _ = feeds.signal("a", head: head)
            _ = feeds.readEnded(.init(scope: "a", after: head - 1), frames: [Self.frame(head - 1, head)])
            #expect(feeds.feeds["a"]!.bytes <= 25)
            let expected = feeds.expect(["b"])[0]
            _ = feeds.appended(expected, frames: [Self.frame(head - 1, head)])
            #expect(feeds.bufferedBytes == total())
        }
        #expect(feeds.bufferedBytes == 40)
        _ = feeds.unsubscribe(other)
        #expect(feeds.bufferedBytes == total() && feeds.bufferedBytes == 20)
    }

    @Test func heartbeatsExpiryAndShutdown() {
        var feeds = Feeds()
        let now = ContinuousClock.now
        let (expiring, _) = feeds.subscribe(["a": 0], expiresAt: now + .seconds(5))!
        _ = feeds.headsRead(["a": 0])
        let (other, _) = feeds.subscribe(["a": 0], expiresAt: nil)!
        _ = feeds.start(expiring)
        _ = feeds.start(other)
        _ = feeds.next(expiring, waiter: 1)
        _ = feeds.next(other, waiter: 2)
        let (waiters, _) = feeds.tick(now: now + .seconds(1), heartbeat: true)
        #expect(Set(waiters) == [1, 2])
        guard case .heartbeat = feeds.next(other, waiter: 2), case .heartbeat = feeds.next(expiring, waiter: 1) else {
            Issue.record("a heartbeat for each")
            return
        }
        guard case .wait = feeds.next(other, waiter: 2), case .wait = feeds.next(expiring, waiter: 1) else {
            Issue.record("nothing more: both wait")
            return
        }
        let (expired, _) = feeds.tick(now: now + .seconds(6), heartbeat: false)
        #expect(expired == [1])
        guard case .end(.expired) = feeds.next(expiring, waiter: 1) else {
            Issue.record("its token expired")
            return
        }
        #expect(feeds.close() == [2])
        guard case .end(.closed) = feeds.next(other, waiter: 2) else {
            Issue.record("closed on shutdown")
            return
        }
        #expect(feeds.subscribe(["a": 0], expiresAt: nil) == nil)
    }

    @Test func signalsWhileTheFirstHeadIsReadAreNotLost() {
        var feeds = Feeds()
        let (id, newFeeds) = feeds.subscribe(["a": 4], expiresAt: nil)!
        #expect(newFeeds == ["a"])
        // A commit lands between the head's read and its answer: it asks for a read once the head is known.
        #expect(feeds.signal("a", head: 5) == nil)
        #expect(feeds.headsRead(["a": 4]) == [Feeds.Read(scope: "a", after: 4)])
        #expect(feeds.start(id).isEmpty)
        let (waiters, next, _) = feeds.readEnded(.init(scope: "a", after: 4), frames: [Self.frame(4, 5)])
        #expect(waiters.isEmpty && next == nil)
        guard case .frames(let frames) = feeds.next(id, waiter: 1) else {
            Issue.record("the commit's frame")
            return
        }
        #expect(frames == ["4-5"])
        // A failed read is retried by the next tick.
        _ = feeds.signal("a", head: 6)
        feeds.readFailed(.init(scope: "a", after: 5))
        #expect(feeds.tick(now: .now, heartbeat: false).reads == [Feeds.Read(scope: "a", after: 5)])
        // The last subscriber gone, the feed goes.
        _ = feeds.unsubscribe(id)
        #expect(feeds.feeds["a"] == nil)
    }

    /// A commit of this server's own, handed over: its frames go to the subscribers with no read, and its
    /// notification, coming back before its answer, waits for it instead of reading.
    @Test func anExpectedCommitIsHandedOverWithoutARead() {
        var feeds = Feeds()
        let id = Self.subscribed(at: 5, head: 5, feeds: &feeds)
        _ = feeds.start(id)
        guard case .wait = feeds.next(id, waiter: 1) else {
            Issue.record("nothing should be ready")
            return
        }
        let expected = feeds.expect(["a", "b"])
        #expect(expected.map(\.scope) == ["a"], "no feed of b: nothing to expect")
        #expect(feeds.signal("a", head: 6) == nil, "the commit's own notification waits")
        let (waiters, read, dropped) = feeds.appended(expected[0], frames: [Self.frame(5, 6)])
        #expect(waiters == [1] && read == nil && dropped == 0)
        guard case .frames(let frames) = feeds.next(id, waiter: 2) else {
            Issue.record("the commit's frame")
            return
        }
        #expect(frames == ["5-6"])
        #expect(feeds.signal("a", head: 6) == nil, "a notification after the answer: the feed has that head")
        #expect(feeds.signal("a", head: 7) == Feeds.Read(scope: "a", after: 6), "nothing expected: signals read")
    }

    /// Two commits whose answers come in the other order: the later one's frame waits for the earlier one's,
    /// and both go out in order, with no read.
    @Test func answersInTheOtherOrderAreAppendedInOrder() {
        var feeds = Feeds()
        let id = Self.subscribed(at: 5, head: 5, feeds: &feeds)
        _ = feeds.start(id)
        let first = feeds.expect(["a"])[0]
        let second = feeds.expect(["a"])[0]
        #expect(feeds.signal("a", head: 7) == nil)
        let early = feeds.appended(second, frames: [Self.frame(6, 7)])
        #expect(early.waiters.isEmpty && early.read == nil)
        #expect(feeds.feeds["a"]?.head == 5)
        let (_, read, _) = feeds.appended(first, frames: [Self.frame(5, 6)])
        #expect(read == nil)
        guard case .frames(let frames) = feeds.next(id, waiter: 1) else {
            Issue.record("both frames")
            return
        }
        #expect(frames == ["5-6", "6-7"])
        #expect(feeds.feeds["a"]?.early.isEmpty == true)
    }

    /// What the commits did not hand over is read: another server's commit signalled meanwhile, a frame
    /// whose predecessor never came, a commit that failed.
    @Test func whatWasNotHandedOverIsRead() {
        var feeds = Feeds()
        let id = Self.subscribed(at: 5, head: 5, feeds: &feeds)
        _ = feeds.start(id)
        // Another server's commit (head 9) while this one's (5, 6] runs: read after 6 once it is in.
        var expected = feeds.expect(["a"])[0]
        #expect(feeds.signal("a", head: 9) == nil)
        #expect(feeds.appended(expected, frames: [Self.frame(5, 6)]).read == Feeds.Read(scope: "a", after: 6))
        _ = feeds.readEnded(.init(scope: "a", after: 6), frames: [Self.frame(6, 9)])
        // A frame past the head whose predecessor was not this server's (no expectation of it): read.
        expected = feeds.expect(["a"])[0]
        #expect(feeds.appended(expected, frames: [Self.frame(10, 11)]).read == Feeds.Read(scope: "a", after: 9))
        _ = feeds.readEnded(.init(scope: "a", after: 9), frames: [Self.frame(9, 11)])
        // A commit that failed, with a signal meanwhile (its own would not come; another's did).
        expected = feeds.expect(["a"])[0]
        #expect(feeds.signal("a", head: 12) == nil)
        #expect(feeds.appended(expected, frames: nil).read == Feeds.Read(scope: "a", after: 11))
        _ = feeds.readEnded(.init(scope: "a", after: 11), frames: [Self.frame(11, 12)])
        // A failed commit with no signal meanwhile: nothing to read.
        expected = feeds.expect(["a"])[0]
        #expect(feeds.appended(expected, frames: nil).read == nil)
        guard case .frames(let frames) = feeds.next(id, waiter: 1) else {
            Issue.record("frames")
            return
        }
        #expect(frames == ["5-6", "6-9", "9-11", "11-12"])
    }

    /// A commit handed over while a read runs: its frames go out at once, and the read's, no longer on the
    /// head, are dropped; when they reached past what was handed over, a read after it finds the rest.
    @Test func aCommitHandedOverWhileAReadRuns() {
        var feeds = Feeds()
        let id = Self.subscribed(at: 5, head: 5, feeds: &feeds)
        _ = feeds.start(id)
        #expect(feeds.signal("a", head: 8) == Feeds.Read(scope: "a", after: 5))
        var expected = feeds.expect(["a"])[0]
        #expect(feeds.appended(expected, frames: [Self.frame(5, 6)]).read == nil)
        var (_, next, _) = feeds.readEnded(.init(scope: "a", after: 5), frames: [Self.frame(5, 8)])
        #expect(next == Feeds.Read(scope: "a", after: 6))
        _ = feeds.readEnded(.init(scope: "a", after: 6), frames: [Self.frame(6, 8)])
        // A read that found no more than what was handed over meanwhile ends there.
        #expect(feeds.signal("a", head: 9) == Feeds.Read(scope: "a", after: 8))
        expected = feeds.expect(["a"])[0]
        #expect(feeds.appended(expected, frames: [Self.frame(8, 9)]).read == nil)
        (_, next, _) = feeds.readEnded(.init(scope: "a", after: 8), frames: [Self.frame(8, 9)])
        #expect(next == nil)
        #expect(feeds.feeds["a"]?.reading == false)
        guard case .frames(let frames) = feeds.next(id, waiter: 1) else {
            Issue.record("frames")
            return
        }
        #expect(frames == ["5-6", "6-8", "8-9"])
    }

    /// An expectation outlives its feed (the last subscriber left, another came): it ends nothing of the new
    /// feed, whose signals read at once.
    @Test func anExpectationOfAFeedThatWentEndsNothing() {
        var feeds = Feeds()
        let first = Self.subscribed(at: 5, head: 5, feeds: &feeds)
        let expected = feeds.expect(["a"])[0]
        _ = feeds.unsubscribe(first)
        let second = Self.subscribed(at: 5, head: 5, feeds: &feeds)
        _ = feeds.start(second)
        #expect(feeds.appended(expected, frames: [Self.frame(5, 6)]) == ([], nil, 0))
        #expect(feeds.feeds["a"]?.head == 5)
        #expect(feeds.signal("a", head: 6) == Feeds.Read(scope: "a", after: 5))
    }

    /// One read of many commits is cut into frames of at most the byte bound (and at least one event each),
    /// in order, without gaps: a ring then never holds more than its bound plus one such frame.
    @Test func aLargeReadIsCutIntoFramesOfBoundedSize() {
        func event(_ seq: Int64, payload: Int) -> StoredEvent {
            StoredEvent(
                scope: "a", seq: seq, id: UUID(), stream: "doc:1", streamVersion: seq, type: "doc.edited",
                schemaVersion: 1, hlc: "", dotReplica: "", dotCounter: seq,
                payloadJSON: String(repeating: "x", count: payload), receivedAt: Date())
        }
        let events = (1...40).map { event($0, payload: $0 == 20 ? 100_000 : 4_000) }
        let chunks = LiveHub.chunks(events, maxBytes: 16_384)
        #expect(chunks.flatMap { $0.map(\.seq) } == Array(1...40))
        for chunk in chunks {
            let bytes = chunk.reduce(0) { $0 + 320 + $1.payloadJSON.utf8.count }
            // Over the bound only as one event larger than it.
            #expect(bytes <= 16_384 || chunk.count == 1, "\(chunk.count) events, \(bytes) bytes")
        }
        #expect(chunks.contains { $0.count == 1 && $0.first?.seq == 20 })
        #expect(chunks.count > 10)
        #expect(LiveHub.chunks([], maxBytes: 16_384).isEmpty)
        #expect(LiveHub.chunks(Array(events.prefix(3)), maxBytes: 1 << 20).map(\.count) == [3])
    }
}
