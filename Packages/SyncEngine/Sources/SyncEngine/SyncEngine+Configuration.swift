import CoreMetrics
import Foundation
import SyncEventStore
import SyncModels

extension SyncEngine {
    public struct Configuration: Sendable {
        /// Scopes to pull; nil pulls every scope in the token.
        public var scopes: [Scope]?
        /// Events per pulled page at the start of a cycle, and per local transaction that applies one. While
        /// pages come back full, the next page asks for twice as many, up to `maxPageSize`. A server that
        /// answers `marks` (see `markEvery`) lets the engine apply a page in several transactions, so a page
        /// then grows whatever applying it takes, and the transactions are sized instead: twice as many
        /// events while one takes less than half of `applyBudget`, half as many when one takes more, down to
        /// `minPageSize`. Without marks the page itself is sized that way.
        public var pageSize = 500
        /// The smallest page the engine shrinks to.
        public var minPageSize = 100
        /// The largest page the engine asks for (the protocol's maximum is 5,000).
        public var maxPageSize = 5_000
        /// Events between the cursors the engine asks for inside each page (`SyncRequest.markEvery`): a
        /// transaction of a long page ends at one of them and stores it as the cursor, so a crash between two
        /// resumes exactly there. Long pages cost less per event on both sides (measured: a fresh device
        /// pulling 400,000 events, 5,000-event pages against pages sized by `applyBudget`) while local writes
        /// still wait for one short transaction at most. A replica with a long cursor (many scopes) asks for
        /// marks further apart, since each mark is a cursor (`markSpacing`). 0 asks for none.
        public var markEvery = 100
        /// How long applying one page may hold the store's write lock. Local writes wait for it: it bounds
        /// the latency an edit sees while a long pull (a new device, a week offline) runs.
        public var applyBudget: Duration = .milliseconds(8)
        /// How long, during a long pull, projections that can (`BufferingProjection`) may hold pulled events
        /// in memory before their tables show them. Pages that have more after them are applied to the log
        /// and to memory only, and the buffered records are written at most this long after the first of
        /// them, and when the pull catches up: a record touched by many pages is then written once instead
        /// of once per page. The flushes run in transactions that each fit `applyBudget`. Zero writes every
        /// page's records with the page. Local commands that read a record before changing it see it current
        /// either way (`EventStore.writeBufferedProjections`); other readers of the tables see them up to this
        /// long behind while a pull runs.
        public var projectionLag: Duration = .seconds(1)
        public var batch = PushBatchPolicy()
        /// How long `run()` waits after a local write before its push when no push is in flight. Zero (the
        /// default) pushes at once: latency first. Writes made while a push is in flight go together in the
        /// next push whatever this is, and `minPushInterval` bounds how often a device pushes. A positive value
        /// (250 ms was the default before) trades latency for fewer, larger pushes; capped by `batch.maxAge`.
        public var debounce: Duration = .zero
        /// The sustained bound on pushes that local writes ask for: a device typing fast pushes at most once
        /// per interval (20 a second by default), each push carrying what was typed since the last one.
        /// Explicit requests, connectivity changes and new tokens are not bound by it.
        public var minPushInterval: Duration = .milliseconds(50)
        /// How many pushes local writes may start back to back before `minPushInterval` applies: a device that
        /// writes now and then never waits for the bound (`SyncScheduler`).
        public var pushBurst = 4
        public var backoff = BackoffPolicy()
        /// How often `run()` syncs without any other trigger; nil never.
        public var interval: Duration? = .seconds(30)
        /// Whether `run()` holds the live stream (`GET /v1/live`, `SyncTransport.live`) while in the
        /// foreground (`setLive`): once a cycle has reached the head, other replicas' events arrive as they
        /// commit and are applied at once, one short transaction per batch of frames. Without it, or when the
        /// transport or the server has no stream, the engine long-polls instead (`longPoll`).
        public var live = true
        /// The fallback of the live stream: while `run()` runs in the foreground without it (`live` off, or
        /// no stream at the server or in the transport), wait on the server for other replicas' events with
        /// long-polls of this length (`GET /v1/pull?wait=`, at most the server's longest wait, 30 s by
        /// default) and sync as soon as one arrives, so that a device sees others' edits within a round trip
        /// instead of at the next `interval`. The run loop applies the poll's pages itself when they continue
        /// the store, and runs a cycle otherwise (`applyPolledPages`). Nil: no long-poll (a transport that
        /// cannot pull also turns it off).
        public var longPoll: Duration? = .seconds(25)
        /// After a long-poll brings other replicas' events, how long the next poll waits before it is sent,
        /// so that what they push meanwhile comes in one page and one local transaction instead of one each.
        /// The first event after a quiet spell is seen at once; during a burst an event is seen up to this
        /// much later. With ten devices sharing a scope and each pushing four times a second, a device
        /// otherwise polls and applies about 36 times a second. Zero polls again at once.
        public var longPollLinger: Duration = .milliseconds(100)
        /// A bound on round trips per cycle, so a cycle always ends.
        public var maxRoundsPerCycle = 10_000
        /// How much of the sync journal the device keeps.
        public var journal = SyncJournal.Bounds()
        /// Decides, after a reset and the bootstrap that follows it, which pending events still apply and
        /// redoes the others (`EventStore.rebase(with:)`). The default pushes them all as they are; a domain
        /// whose operations refer to elements (sequences) supplies its own (the Notes app's `NotesRebaser`).
        public var rebaser: any EventRebaser = KeepPendingRebaser()
        /// The local log's size past which a successful sync prunes it at the stable points the server sent
        /// (`compact()`): confirmed events held. A prune goes in steps of whole streams (local writes wait for
        /// one step at most, see `EventStore.prune`), but each step has a fixed cost, so prunes are kept
        /// rare: after one the log holds only what the replicas have not all seen, and the next waits for
        /// this many again. Nil: only `compact()` prunes.
        public var autoCompactAfter: Int? = 50_000
        /// Whether a long pull folds on arrival (`EventStore.applySyncResponse(…foldThrough:…)`) the events
        /// that every other replica has acknowledged (the answers' `othersStable`), instead of logging them
        /// for the prune that `autoCompactAfter` would run right after: a pull is long when the server says
        /// it brings at least `autoCompactAfter` events. A new device pulling an unfolded history of a
        /// million events then writes its state, not a million log rows it deletes at once. Once such a pull
        /// reaches the head, the engine purges what it folded (`EventStore.purgeFolded()`, journaled
        /// `fold.purge`). Needs `autoCompactAfter`, and projections that all fold on arrival.
        public var foldOnArrival = true
        /// How often a sync that reached the head also verifies the device against the server
        /// (`SyncEngine.verify`: per-scope checksums, and a repair of what differs), counted from the last
        /// verification the journal holds (so across restarts; none: the first sync verifies); nil: only
        /// `verify()` does. One small request per scope when nothing is wrong.
        public var verifyInterval: Duration? = .seconds(3600)
        /// Where the engine's metrics go (`EngineMetrics`: open conflicts, conflicts opened and resolved,
        /// verifications by outcome, repairs); nil: the global `MetricsSystem` (nothing, unless the app
        /// bootstrapped one).
        public var metricsFactory: (any MetricsFactory)?
        /// Called after each round trip's answer is applied, with what it did and where its time went (for
        /// metrics, benchmarks and load generators). Runs on the engine's task: keep it short.
        public var onRound: (@Sendable (SyncRound) -> Void)?
        /// Where a new bearer token comes from when the server refuses the one the transport has (401, 403,
        /// `auth.expired`), as an app refreshes a short-lived access token: the engine asks once, gives the
        /// token to the transport (`SyncTransport.setToken`), and does again what failed: the cycle, or the
        /// live stream from its cursor. Nothing is pushed twice (pushes are idempotent by event id) and
        /// nothing is lost. When the provider throws, or the new token is refused too, `run()` backs off and
        /// tries again as after a network failure. nil: an authentication failure pauses sync until
        /// `tokenRefreshed()`.
        public var tokenProvider: (@Sendable () async throws -> String)?

        public init(scopes: [Scope]? = nil) {
            self.scopes = scopes
        }
    }
}
