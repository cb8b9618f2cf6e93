import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import ServiceLifecycle

/// A task executor that runs its jobs on one NIO event loop: a task that prefers it (`withTaskExecutorPreference`)
/// runs its work, and is resumed after each `await`, on the loop, so that a request whose socket and database
/// connection are served by the same loop never wakes another thread.
final class EventLoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `loop` is immutable and an event loop is thread-safe.
    let loop: any EventLoop

    init(_ loop: any EventLoop) {
        self.loop = loop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// The loops of an event loop group, each with the task executor that runs jobs on it.
struct LoopExecutors: Sendable {
    /// The executors of `MultiThreadedEventLoopGroup.singleton`, the group the HTTP server and the PostgreSQL pools
    /// use.
    static let singleton = LoopExecutors(group: MultiThreadedEventLoopGroup.singleton)

    let loops: [any EventLoop]
    private let executors: [ObjectIdentifier: EventLoopTaskExecutor]

    init(group: any EventLoopGroup) {
        var loops: [any EventLoop] = []
        var executors: [ObjectIdentifier: EventLoopTaskExecutor] = [:]
        for loop in group.makeIterator() {
            loops.append(loop)
            executors[ObjectIdentifier(loop)] = EventLoopTaskExecutor(loop)
        }
        self.loops = loops
        self.executors = executors
    }

    /// The executor of `loop`, if it is one of the group's.
    func executor(for loop: any EventLoop) -> EventLoopTaskExecutor? {
        executors[ObjectIdentifier(loop)]
    }

    /// The executor of the loop the caller runs on, if it runs on one of the group's.
    var current: EventLoopTaskExecutor? {
        MultiThreadedEventLoopGroup.currentEventLoop.flatMap { executor(for: $0) }
    }
}

/// Hummingbird's HTTP/1 channel whose connections are each served on their own event loop: the task that reads
/// a connection's requests and runs their handlers prefers the loop's executor, instead of running on the
/// concurrency pool and hopping to the loop and back for every read and write.
struct LoopBoundHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value
    let inner: HTTP1Channel
    let executors: LoopExecutors

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        inner.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        guard let executor = executors.executor(for: value.channel.eventLoop) else {
            await inner.handle(value: value, logger: logger)
            return
        }
        await withTaskExecutorPreference(executor) {
            await inner.handle(value: value, logger: logger)
        }
    }
}

/// Runs a pool bound to one event loop with its tasks (its connections' set-up, its timers) on that loop.
struct LoopClientService: Service {
    let client: PostgresClient
    let executor: EventLoopTaskExecutor

    func run() async throws {
        await withTaskExecutorPreference(executor) {
            await client.run()
        }
    }
}
