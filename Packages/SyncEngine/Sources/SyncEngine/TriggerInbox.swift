/// Where triggers wait for the engine's run loop, which takes them one at a time or gives up at a
/// deadline.
actor TriggerInbox {
    private var queue: [SyncTrigger] = []
    private var waiter: (id: Int, continuation: CheckedContinuation<SyncTrigger?, Never>)?
    /// The task that ends the current wait at its deadline; cancelled as soon as the wait ends otherwise, so
    /// a busy run loop does not leave one sleeping task behind per wait.
    private var timer: Task<Void, Never>?
    private var nextWaiterID = 0

    func post(_ trigger: SyncTrigger) {
        if let waiter {
            self.waiter = nil
            timer?.cancel()
            timer = nil
            waiter.continuation.resume(returning: trigger)
        } else {
            queue.append(trigger)
        }
    }

    /// The next trigger, or nil when `deadline` passes (or the task is cancelled) first.
    func next(deadline: ContinuousClock.Instant?) async -> SyncTrigger? {
        if !queue.isEmpty { return queue.removeFirst() }
        if Task.isCancelled { return nil }
        nextWaiterID += 1
        let id = nextWaiterID
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiter = (id, continuation)
                if let deadline {
                    timer = Task { [weak self] in
                        try? await Task.sleep(until: deadline, clock: .continuous)
                        if Task.isCancelled { return }
                        await self?.expire(id)
                    }
                }
            }
        } onCancel: {
            Task { [weak self] in await self?.expire(id) }
        }
    }

    private func expire(_ id: Int) {
        guard let waiter, waiter.id == id else { return }
        self.waiter = nil
        timer?.cancel()
        timer = nil
        waiter.continuation.resume(returning: nil)
    }
}
