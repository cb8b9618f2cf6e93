import Foundation
import GRDB
import SyncTestSupport
import Testing

@testable import SyncStorage

@Suite struct AsyncGateTests {
    /// More concurrent reads than readers on each of 320 databases, each read holding its reader a moment.
    /// Through GRDB's `read` alone this stops: every one of Dispatch's threads waits for a reader of its
    /// pool, and the reads holding the readers have no thread to finish on (how `sync-load` hung with 1,000
    /// devices). Through `SyncDatabase.read` they all finish.
    @Test(.timeLimit(.minutes(2))) func readsBeyondThePoolOnHundredsOfDatabasesAllFinish() async throws {
        let directory = try TemporaryDirectory()
        var configuration = StorageConfiguration()
        configuration.maximumReaderCount = 1
        configuration.backgroundCheckpointPages = 0
        configuration.cacheSizeKiB = 64
        // Made side by side: one after the other, each of the 640 awaits waits its turn for a thread behind the
        // rest of the suite, and in a full run that took most of the time limit.
        let configured = configuration
        let databases = try await withThrowingTaskGroup(of: SyncDatabase.self) { group in
            for index in 0..<320 {
                group.addTask {
                    let database = try SyncDatabase(
                        path: directory.path("\(index).sqlite"), configuration: configured)
                    try await database.writer.write { db in try db.execute(sql: "CREATE TABLE t (x INTEGER)") }
                    return database
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(databases.count == 320)
        let finished = await withTaskGroup(of: Int.self) { group in
            for database in databases {
                for _ in 0..<4 {
                    group.addTask {
                        let count = try? await database.read { db in
                            usleep(2000)
                            return try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
                        }
                        return count == 0 ? 1 : 0
                    }
                }
            }
            return await group.reduce(0, +)
        }
        #expect(finished == 320 * 4)
    }

    @Test func aCancelledWaiterLeavesAndThePermitStaysUsable() async throws {
        let gate = AsyncGate(permits: 1)
        let (holding, held) = AsyncStream.makeStream(of: Void.self)
        let (releasing, release) = AsyncStream.makeStream(of: Void.self)
        let holder = Task {
            try await gate.run {
                held.yield()
                for await _ in releasing { break }
            }
        }
        for await _ in holding { break }
        let waiter = Task { try await gate.run { 1 } }
        try await Task.sleep(for: .milliseconds(50))
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        release.yield()
        try await holder.value
        #expect(try await gate.run { 2 } == 2)
    }
}
