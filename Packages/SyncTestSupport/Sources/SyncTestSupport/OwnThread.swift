import Foundation
import Testing

/// Runs `body` with its jobs on a thread of its own instead of the concurrency pool, and returns what it returns.
///
/// For a test whose work is long and synchronous (scanning the repository's files, a property checked over
/// thousands of cases, a tight loop): the pool has as many threads as the machine has cores, and such work
/// holds one of them for its whole length, so that every other test's tasks (a server answering, an engine
/// connecting its stream, a timer firing) wait behind it. Swift Testing runs many tests at once (24 under
/// `make test`): on two cores, a few such tests held both threads for minutes, and tests that wait for
/// something to happen within their bound saw nothing happen. On a thread of its own the kernel shares the cores
/// between the work and the pool instead.
///
/// It is the same task (a task executor preference, not a new task): `#expect` and `#require` inside
/// `body` are the test's own, and its task-locals are there. What `body` awaits on an actor runs there, and
/// comes back to this thread.
public func onOwnThread<Result, Failure: Error>(
    _ body: () async throws(Failure) -> Result
) async throws(Failure) -> Result {
    let executor = OwnThreadExecutor()
    defer { executor.stop() }
    return try await withTaskExecutorPreference(executor, operation: body)
}

/// A task executor that runs its jobs one after another on a thread it starts, until `stop()`.
final class OwnThreadExecutor: TaskExecutor, @unchecked Sendable {
    /// Set on the executors' threads only (`isCurrent`).
    private static let marker: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Whether the caller runs on the thread of an `OwnThreadExecutor`.
    static var isCurrent: Bool { pthread_getspecific(marker) != nil }
    // @unchecked: `jobs` and `stopped` are read and written only with `condition` locked.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false
    /// The thread has returned: a job enqueued now (a late resumption) goes to the global executor.
    private var exited = false

    init() {
        Thread { [self] in loop() }.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        if exited {
            condition.unlock()
            globalConcurrentExecutor.enqueue(ExecutorJob(job))
            return
        }
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Ends the thread once the jobs enqueued so far have run.
    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    private func loop() {
        // Named from inside: on Linux a name given before `start()` is not the thread's.
        Thread.current.name = "own-thread"
        pthread_setspecific(Self.marker, UnsafeRawPointer(bitPattern: 1))
        while true {
            condition.lock()
            while jobs.isEmpty && !stopped { condition.wait() }
            if jobs.isEmpty {
                exited = true
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

/// Runs each test of a suite (each case of a parameterized one) on a thread of its own (`onOwnThread`):
/// for suites whose tests are long synchronous work, `@Suite(.onOwnThreads)`.
public struct OwnThreadsTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await onOwnThread { try await function() }
    }
}

extension Trait where Self == OwnThreadsTrait {
    /// Each test on a thread of its own, off the concurrency pool (`onOwnThread`).
    public static var onOwnThreads: Self { OwnThreadsTrait() }
}
