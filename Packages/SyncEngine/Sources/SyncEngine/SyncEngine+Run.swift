import Foundation
import SyncModels

extension SyncEngine {
    /// Syncs continuously until the task is cancelled: on local writes (at once when no push is in flight,
    /// coalesced while one is, at most `pushBurst` pushes back to back and then one per `minPushInterval`), every `interval`, on connectivity
    /// changes, explicit requests and new tokens; with backoff after failures. In the foreground (`setLive`)
    /// it holds the live stream once a cycle has reached the head, and applies its frames as they come
    /// (`Configuration.live`), or long-polls when there is no stream (`Configuration.longPoll`).
    public func run() async {
        let clock = ContinuousClock()
        var scheduler = SyncScheduler<ContinuousClock.Instant>(
            debounce: min(configuration.debounce, configuration.batch.maxAge),
            minPushInterval: min(configuration.minPushInterval, configuration.batch.maxAge),
            pushBurst: configuration.pushBurst, backoff: configuration.backoff)
        var live = LiveDriver(scheduler: LiveScheduler(stream: configuration.live, backoff: configuration.backoff))
        var random = SystemRandomNumberGenerator()
        let inbox = inbox
        let changes = store.changes()
        let watcher = Task {
            for await change in changes where change.kind == .appended { await inbox.post(.localWrite) }
        }
        running.withLock { $0 = true }
        defer { running.withLock { $0 = false } }
        let uploader = blobs.map { blobs in Task { await self.uploadBlobs(blobs) } }
        var wakeAt: ContinuousClock.Instant? = nil
        var nextInterval = configuration.interval.map { clock.now.advanced(by: $0) }
        // The first cycle is also the catch-up the stream waits for.
        await inbox.post(.explicit)
        while !Task.isCancelled {
            let deadline = [wakeAt, nextInterval, live.wakeAt].compactMap { $0 }.min()
            let trigger = await inbox.next(deadline: deadline)
            if Task.isCancelled { break }
            // The stream's frames and the long-poll's pages that continue the store are applied as they are:
            // no cycle for them. A `remoteChange` that leaves nothing else to do ends here.
            var remote = await stepLive(&live, random: &random)
            if let failure = remote.pause {
                // The stream ended with an expired token: with a new one, a cycle catches up and the stream
                // comes back at the cursor.
                if case .authentication = failure, await refreshToken(after: failure) {
                    remote.cycle = .tokenRefreshed
                } else {
                    let failure = tokenFailureToRetry(failure)
                    await recordFailure(failure)
                    if case .authentication = failure {
                        scheduler.pause(failure: failure)
                    } else {
                        remote.cycle = .connectivity
                    }
                }
            }
            var action: SyncScheduler<ContinuousClock.Instant>.Action? = nil
            if let trigger, trigger != .remoteChange {
                action = scheduler.trigger(trigger, now: clock.now)
            } else if trigger == nil {
                if let interval = configuration.interval, let due = nextInterval, due <= clock.now {
                    nextInterval = clock.now.advanced(by: interval)
                    action = scheduler.trigger(.interval, now: clock.now)
                } else {
                    action = scheduler.tick(now: clock.now)
                }
            }
            if let cycle = remote.cycle, action != .startCycle {
                action = scheduler.trigger(cycle, now: clock.now)
            }
            guard var action else { continue }
            while action == .startCycle {
                var failure: SyncFailure?
                do {
                    try await syncNow()
                } catch {
                    failure = error
                }
                action = scheduler.cycleFinished(failure: failure, now: clock.now, random: &random)
                if failure == nil { liveCaughtUp(&live) }
            }
            if case .wake(let at) = action { wakeAt = at } else { wakeAt = nil }
        }
        watcher.cancel()
        uploader?.cancel()
        await stopLive(&live)
    }

    /// `run()`'s blob uploads: a pass after every local write (an attachment appends its event) and after a
    /// failed pass's backoff; each committed blob asks for a cycle, which pushes the events that waited.
    func uploadBlobs(_ blobs: BlobSync) async {
        let changes = store.changes()
        var random = SystemRandomNumberGenerator()
        var failures = 0
        var iterator = changes.makeAsyncIterator()
        while !Task.isCancelled {
            let report = await blobs.uploadPending()
            if report.committed > 0 { post(.explicit) }
            if report.waiting > 0 {
                failures += 1
                let retryAfter: Duration? =
                    if case .retryable(_, let after)? = report.lastFailure { after } else { nil }
                try? await Task.sleep(
                    for: configuration.backoff.delay(attempt: failures - 1, retryAfter: retryAfter, using: &random))
                continue
            }
            failures = 0
            // The next local write; none will come once the store's changes end.
            var wrote = false
            while let change = await iterator.next() {
                if change.kind == .appended {
                    wrote = true
                    break
                }
            }
            if !wrote { return }
        }
    }
}
