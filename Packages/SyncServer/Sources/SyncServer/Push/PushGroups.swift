import Synchronization

/// Group commit's queues (docs/ARCHITECTURE.md, "Group commit"): which pushes share a transaction.
///
/// Pushes are spread over lanes by scope (all pushes of a scope take the same lane, so the transactions of two
/// lanes seldom wait for each other's head-row locks; on Citus, a lane per worker node, `PushService.route(of:)`).
/// A lane is any number, busy while a push runs or waits in it. A lane runs one transaction at a time. A push that
/// finds its lane idle runs at once, alone: with few pushes in flight, nothing waits. A push that finds it busy queues;
/// when the running transaction ends, its leader hands the lane to the first push in the queue, which leads the
/// next transaction with the pushes behind it (leader and followers), up to `maxEvents` events in all, in queue
/// order. The followers wait for their results; the leader runs the group and hands each its own.
final class PushGroups<Push: Sendable, Answer: Sendable>: Sendable {
    /// A queued push and how its task is resumed: to lead a group, or with its answer.
    private struct Waiter: Sendable {
        var push: Push
        var events: Int
        var continuation: CheckedContinuation<Turn, Never>
    }

    private enum Turn: Sendable {
        case lead(followers: [Waiter])
        case done(Answer)
    }

    /// A busy lane: the pushes waiting for its transaction to end.
    private struct Lane: Sendable {
        var queue: [Waiter] = []
        var head = 0
    }

    let maxEvents: Int
    private let lanes = Mutex<[Int: Lane]>([:])

    /// - Parameter maxEvents: the most events a group takes from its queue (a group always takes at least one
    ///   push).
    init(maxEvents: Int) {
        self.maxEvents = max(1, maxEvents)
    }

    /// Runs `push` (of `events` events) in a transaction of lane `lane`: alone if the lane is idle, otherwise in
    /// the next group. `run` runs one group and must answer each of its pushes, in order; it runs in the task
    /// of the group's leader.
    func submit(
        _ push: Push, events: Int, lane: Int, run: @Sendable ([Push]) async -> [Answer]
    ) async -> Answer {
        let turn = await withCheckedContinuation { (continuation: CheckedContinuation<Turn, Never>) in
            let idle = lanes.withLock { lanes in
                guard lanes[lane] != nil else {
                    lanes[lane] = Lane()
                    return true
                }
                lanes[lane]!.queue.append(Waiter(push: push, events: events, continuation: continuation))
                return false
            }
            if idle { continuation.resume(returning: .lead(followers: [])) }
        }
        switch turn {
        case .done(let answer):
            return answer
        case .lead(let followers):
            let answers = await run([push] + followers.map(\.push))
            precondition(answers.count == followers.count + 1, "a group answers each of its pushes")
            handOver(lane)
            for (follower, answer) in zip(followers, answers.dropFirst()) {
                follower.continuation.resume(returning: .done(answer))
            }
            return answers[0]
        }
    }

    /// Gives the lane to the first queued push with the pushes behind it (up to `maxEvents` events), or frees it.
    private func handOver(_ lane: Int) {
        let next = lanes.withLock { lanes -> (Waiter, [Waiter])? in
            guard var state = lanes[lane], state.head < state.queue.count else {
                lanes[lane] = nil
                return nil
            }
            lanes[lane] = nil  // the queue is changed in place, not copied
            var taken: [Waiter] = []
            var events = 0
            while state.head < state.queue.count {
                let waiter = state.queue[state.head]
                guard taken.isEmpty || events + waiter.events <= maxEvents else { break }
                taken.append(waiter)
                events += waiter.events
                state.head += 1
            }
            if state.head == state.queue.count {
                state.queue.removeAll(keepingCapacity: true)
                state.head = 0
            } else if state.head >= 1024 {
                state.queue.removeFirst(state.head)
                state.head = 0
            }
            lanes[lane] = state
            return (taken[0], Array(taken.dropFirst()))
        }
        if let (leader, followers) = next { leader.continuation.resume(returning: .lead(followers: followers)) }
    }
}
