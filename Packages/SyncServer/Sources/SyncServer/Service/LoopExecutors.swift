import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import ServiceLifecycle

/// A task executor that runs its jobs on one NIO event loop: a task that prefers it (`withTaskExecutorPreference`)
/// runs its work, and is resumed after each `await`, on the loop, so that a request whose socket and database
/// connection are served by the same loop never wakes another thread.
package final class EventLoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `loop` is immutable and an event loop is thread-safe.
    package let loop: any EventLoop

    package init(_ loop: any EventLoop) {
        self.loop = loop
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// The loops of an event loop group, each with the task executor that runs jobs on it.
package struct LoopExecutors: Sendable {
    /// The executors of `MultiThreadedEventLoopGroup.singleton`, the group the HTTP server and the PostgreSQL pools
    /// use.
    package static let singleton = LoopExecutors(group: MultiThreadedEventLoopGroup.singleton)

    package let loops: [any EventLoop]
    private let executors: [ObjectIdentifier: EventLoopTaskExecutor]

    package init(group: any EventLoopGroup) {
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
    package func executor(for loop: any EventLoop) -> EventLoopTaskExecutor? {
        executors[ObjectIdentifier(loop)]
    }

    /// The executor of the loop the caller runs on, if it runs on one of the group's.
    package var current: EventLoopTaskExecutor? {
        MultiThreadedEventLoopGroup.currentEventLoop.flatMap { executor(for: $0) }
    }
}

/// Hummingbird's HTTP/1 channel whose connections are each served on their own event loop: the task that reads
/// a connection's requests and runs their handlers prefers the loop's executor, instead of running on the
/// concurrency pool and hopping to the loop and back for every read and write.
package struct LoopBoundHTTP1Channel: ServerChildChannel {
    package typealias Value = HTTP1Channel.Value
    let inner: HTTP1Channel
    let executors: LoopExecutors

    package init(inner: HTTP1Channel, executors: LoopExecutors) {
        self.inner = inner
        self.executors = executors
    }

    package func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        inner.setup(channel: channel, logger: logger)
    }

    package func handle(value: Value, logger: Logger) async {
        guard let executor = executors.executor(for: value.channel.eventLoop) else {
            await inner.handle(value: value, logger: logger)
            return
        }
        await withTaskExecutorPreference(executor) {
            await inner.handle(value: value, logger: logger)
        }
    }
}

/// Runs a loop's pool (`LoopPool`) with its tasks (its connections' set-up, its keep-alive) on that loop.
package struct LoopPoolService: Service {
    let pool: LoopPool
    let executor: EventLoopTaskExecutor
    let logger: Logger

    package init(pool: LoopPool, executor: EventLoopTaskExecutor, logger: Logger) {
        self.pool = pool
        self.executor = executor
        self.logger = logger
    }

    package func run() async throws {
        await withTaskExecutorPreference(executor) {
            await pool.run(logger: logger)
        }
    }
}
