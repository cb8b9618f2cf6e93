import Foundation
import SyncToolSupport
import Testing

/// Keeps the README example compiling and working: the body below is the README's code
/// (`ReadmeExamplesTests` in Tests/RepositoryTests holds the two equal).
@Suite struct ReadmeExampleTests {
    @Test func readmeExampleRuns() throws {
        // README begins
        var random = SplitMix64(seed: 42)  // the same seed, the same draws
        let delay = random.int(10...500)
        let reset = random.chance(0.2)
        let result = try ChildProcess.run("/bin/sh", ["-c", "echo ready"], environment: [:])
        print(delay, reset, result.status, String(decoding: result.stdout, as: UTF8.self))
        // README ends
        #expect((10...500).contains(delay) && result.status == 0)
        var replay = SplitMix64(seed: 42)
        #expect(replay.int(10...500) == delay && replay.chance(0.2) == reset)
    }
}
