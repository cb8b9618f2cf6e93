import NIOCore
import NIOPosix

/// One of NIO's event loops as a thin device's executor and clock: the device's tasks prefer it
/// (`Task(executorPreference:)`), so they run, and resume after each `await`, on the thread that also serves
/// the device's connections; and they sleep on the loop's timers.
///
/// On Swift's pool instead, a resumption after a socket's answer is a hop to a pool thread (a futex wake), and a
/// `Task.sleep` a Dispatch timer that Dispatch's manager thread wakes for. In a sweep of thousands of thin
/// devices on a small machine, this process, not the server, is what fills the machine first.
final class DeviceLoop: TaskExecutor, @unchecked Sendable {
    // @unchecked: `loop` is immutable and an event loop is thread-safe.
    let loop: any EventLoop

    init(_ loop: any EventLoop) {
        self.loop = loop
    }

    /// The loops of the group the HTTP clients and the live streams use, one `DeviceLoop` each.
    static let all: [DeviceLoop] = MultiThreadedEventLoopGroup.singleton.makeIterator().map(DeviceLoop.init)

    /// The loop of device number `index`.
    static func of(_ index: Int) -> DeviceLoop { all[index % all.count] }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// Sleeps for `duration` on the loop's timer; throws `CancellationError` when the task is cancelled.
    func sleep(for duration: Duration) async throws {
        try Task.checkCancellation()
        guard duration > .zero else { return }
        let (seconds, attoseconds) = duration.components
        let timer = loop.scheduleTask(in: .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)) {}
        do {
            try await withTaskCancellationHandler {
                try await timer.futureResult.get()
            } onCancel: {
                timer.cancel()
            }
        } catch {
            throw CancellationError()
        }
    }

    /// Sleeps until `instant`.
    func sleep(until instant: ContinuousClock.Instant) async throws {
        try await sleep(for: instant - .now)
    }
}
