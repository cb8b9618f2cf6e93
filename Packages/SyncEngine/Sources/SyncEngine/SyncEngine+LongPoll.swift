import Foundation
import SyncEventStore
import SyncModels
import SyncProtocol

/// The long-poll (`Configuration.longPoll`): the fallback of the live stream, for transports and servers
/// without one.
extension SyncEngine {
    /// A long-poll's answer with other replicas' events, and where the poll chain that led to it started.
    struct PolledPage: Sendable {
        /// Where the chain of polls began: the stored cursor at the first poll, then the end of the last
        /// page handed over. Every event after it up to `from` is this replica's own, or was in the store
        /// when a poll started after it.
        var base: ScopeCursor
        /// The cursor the poll asked from.
        var from: ScopeCursor
        var page: PullResponse
        var roundTrip: Duration
    }

    /// Long-polls while `run()` runs (`Configuration.longPoll`): waits on the server from the further of the
    /// stored cursor and the last poll's, and when another replica's events arrive, leaves the page for the
    /// run loop (`applyPolledPages`) and posts `remoteChange`. The server leaves the replica's own events out
    /// (`PullRequest.exclude`: they are in the store already, and their push's answer gave them their `seq`),
    /// so its own pushes do not wake it; a server that ignores `exclude` returns them, and they are applied
    /// like any page. Failures back off as the engine does.
    func pollForChanges(wait: Duration) async {
        let seconds = max(1, Int(wait.components.seconds))
        var polled = ScopeCursor()
        var base: ScopeCursor? = nil
        var failures = 0
        var random = SystemRandomNumberGenerator()
        while !Task.isCancelled {
            let stored = (try? ScopeCursor(encoded: try await store.cursor())) ?? ScopeCursor()
            var cursor = stored
            for (scope, seq) in polled.positions { cursor.advance(scope, to: seq) }
            // Everything after `base` up to `cursor` is this replica's own or already in the store (polls
            // step only over own events; a cursor that jumps ahead follows the store).
            if base == nil { base = stored }
            do {
                let start = ContinuousClock.now
                // The server leaves this replica's own events out (they are in the store; a bootstrapping
                // store takes no polled page) and is not woken by them.
                let page = try await transport.pull(
                    PullRequest(
                        cursor: cursor, scopes: configuration.scopes, limit: 500, wait: seconds, exclude: store.replica)
                )
                failures = 0
                polled = (try? ScopeCursor(encoded: page.cursor)) ?? polled
                if page.hasMore || !page.events.isEmpty {
                    let polledPage = PolledPage(
                        base: base ?? stored, from: cursor, page: page, roundTrip: ContinuousClock.now - start)
                    // A page with more after it is left to a cycle, and so are those before it.
                    self.polled.withLock { results in
                        if page.hasMore { results.needsCycle = true } else { results.pages.append(polledPage) }
                    }
                    // The next chain starts after this page: applying a later page needs this one applied.
                    base = polled
                    post(.remoteChange)
                    if configuration.longPollLinger > .zero {
                        try? await Task.sleep(for: configuration.longPollLinger)
                    }
                }
            } catch {
                if case .permanent(let code, _) = error, code == SyncFailure.transportUnsupported { return }
                // The server purged what this replica has not seen: a sync resets and bootstraps.
                if case .resetRequired = error {
                    self.polled.withLock { $0.needsCycle = true }
                    post(.remoteChange)
                }
                var retryAfter: Duration? = nil
                if case .retryable(_, let after) = error { retryAfter = after }
                try? await Task.sleep(
                    for: configuration.backoff.delay(attempt: failures, retryAfter: retryAfter, using: &random))
                failures += 1
            }
        }
    }

    /// What long-poll pages come to on top of the store's cursor: a pure decision, which
    /// `applyPolledPages` carries out.
    enum PolledMerge: Sendable, Hashable {
        /// A page does not fit: a cycle syncs as usual.
        case cycle
        /// Cycles already pulled all of it.
        case known
        /// Apply these events (in order, one transaction) and store this cursor.
        case apply(events: [Event], cursor: ScopeCursor)
    }

    /// Merges `pages` (oldest first) onto the store's cursor `stored`. A page fits when in each scope either
    /// the store (as the pages before it leave it) is at or past where the page starts (a cycle pulled part
    /// or all of it meanwhile: only the events past the store are kept), or it is behind the page's start
    /// but at or past where the page's chain of polls began (what lies between is this replica's own
    /// events); the cursor then moves to the further of the two.
    static func merge(_ pages: [PolledPage], onto stored: ScopeCursor) -> PolledMerge {
        var next = stored
        var events: [Event] = []
        for polled in pages {
            guard let end = try? ScopeCursor(encoded: polled.page.cursor) else { return .cycle }
            let scopes = Set(next.positions.keys).union(polled.from.positions.keys)
            for scope in scopes where next[scope] < polled.from[scope] && polled.base[scope] > next[scope] {
                return .cycle
            }
            events += polled.page.events.filter { ($0.seq ?? 0) > next[$0.scope] }
            for (scope, seq) in end.positions { next.advance(scope, to: seq) }
        }
        return events.isEmpty && next == stored ? .known : .apply(events: events, cursor: next)
    }

    /// Applies the long-poll pages waiting for the run loop as `merge` decides, in one transaction. When a
    /// page does not fit, or the store is bootstrapping, returns false and a cycle syncs as usual. Runs on
    /// the run loop, so it is never a second writer beside a cycle.
    func applyPolledPages() async -> Bool {
        let results = polled.withLock { results in
            defer { results = PollResults() }; return results
        }
        if results.needsCycle { return false }
        // An earlier trigger applied them.
        guard let last = results.pages.last else { return true }
        guard let stored = try? ScopeCursor(encoded: try await store.cursor()),
            (try? await store.isBootstrapping()) == false
        else { return false }
        let events: [Event]
        let cursor: ScopeCursor
        switch Self.merge(results.pages, onto: stored) {
        case .cycle: return false
        case .known: return true
        case .apply(let merged, let next): (events, cursor) = (merged, next)
        }
        let page = last.page
        let response = SyncResponse(
            results: [], events: events, cursor: cursor.encoded, hasMore: false, remaining: page.remaining,
            stable: page.stable)
        let start = ContinuousClock.now
        var budget = oneTransactionBudget()
        do {
            let outcome = try await apply(response, pushed: [], markEvery: nil, budget: &budget).outcome
            let applied = ContinuousClock.now - start
            let count = events.count
            await updateStatus {
                $0.remainingToPull = page.remaining
                $0.pulledEvents += count
                if let stable = page.stable { $0.stablePoints.merge(stable) { $1 } }
            }
            configuration.onRound?(
                SyncRound(
                    pushed: 0, acknowledged: 0, rejected: 0, pulled: events.count,
                    inserted: outcome.pulled.inserted, pageLimit: 500, hasMore: false, roundTrip: last.roundTrip,
                    waited: last.roundTrip, apply: applied, traffic: Traffic(), remaining: page.remaining,
                    events: events))
            return true
        } catch {
            return false
        }
    }
}
