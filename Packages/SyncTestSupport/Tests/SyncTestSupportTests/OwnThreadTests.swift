import Foundation
import Testing

@testable import SyncTestSupport

/// `.onOwnThreads` moves a test off the concurrency pool and keeps it the test it was.
@Suite(.onOwnThreads) struct OwnThreadTests {
    /// Whether the caller runs on the thread of the executor of `onOwnThread` (a synchronous function: a
    /// thread is a property of synchronous code).
    static func onOwnThreadNow() -> Bool { OwnThreadExecutor.isCurrent }

    @Test func theTestRunsOnAThreadOfItsOwn() async throws {
        #expect(Self.onOwnThreadNow())
        // And comes back to it after awaiting elsewhere.
        try await Task.sleep(for: .milliseconds(10))
        await Task.detached { #expect(!Self.onOwnThreadNow()) }.value
        #expect(Self.onOwnThreadNow())
    }

    /// An expectation that fails there is recorded against the test (a known issue is matched only when it is).
    @Test func anExpectationThereIsTheTestsOwn() {
        withKnownIssue { #expect(Bool(false), "recorded against this test") }
    }

    @Test(arguments: [1, 2, 3]) func everyCaseOfAParameterizedTestToo(value: Int) {
        #expect(Self.onOwnThreadNow())
        withKnownIssue { #expect(value == 0) }
    }

    @Test func onOwnThreadReturnsAndThrowsWhatItsBodyDoes() async throws {
        #expect(await onOwnThread { 42 } == 42)
        #expect(await onOwnThread { Self.onOwnThreadNow() })
        #expect(
            await onOwnThread { () async -> Bool in
                await Task.yield()
                return Self.onOwnThreadNow()
            })
        struct Failure: Error {}
        await #expect(throws: Failure.self) { try await onOwnThread { throw Failure() } }
    }
}
