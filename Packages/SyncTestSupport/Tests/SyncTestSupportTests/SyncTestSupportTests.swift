import Foundation
import SyncModels
import SyncTestSupport
import Testing

@Suite struct SyncTestSupportTests {
    @Test func splitMix64ReplaysFromItsSeed() {
        var first = SplitMix64(seed: 42)
        var second = SplitMix64(seed: 42)
        let a = (0..<16).map { _ in first.next() }
        #expect(a == (0..<16).map { _ in second.next() })
        // The published SplitMix64 sequence for seed 0 starts here.
        var zero = SplitMix64(seed: 0)
        #expect(zero.next() == 0xE220_A839_7B1D_CDAF)
    }

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
