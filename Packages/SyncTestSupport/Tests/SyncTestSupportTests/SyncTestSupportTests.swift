import Foundation
import SyncModels
import SyncTestSupport
import Testing

@Suite struct SyncTestSupportTests {
    @Test func temporaryDirectoriesAreRemovedWhenReleased() throws {
        var directory: TemporaryDirectory? = try TemporaryDirectory()
        let url = directory!.url
        try Data("x".utf8).write(to: URL(fileURLWithPath: directory!.path("file")))
        #expect(FileManager.default.fileExists(atPath: url.path))
        directory = nil
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }

    @Test func fixtureEventsAreValidAndDistinct() throws {
        let first = EventFixtures.event(scope: "a")
        let second = EventFixtures.event(scope: "a")
        try first.validate()
        try second.validate()
        #expect(first.id != second.id && first.dot.counter < second.dot.counter)
    }
}
