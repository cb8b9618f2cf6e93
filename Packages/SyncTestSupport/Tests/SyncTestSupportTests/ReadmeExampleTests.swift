import SyncModels
import SyncTestSupport
import Testing

/// Keeps the README example compiling and working: the body below is the README's code
/// (`ReadmeExamplesTests` in Tests/RepositoryTests holds the two equal).
@Suite struct ReadmeExampleTests {
    @Test func readmeExampleRuns() throws {
        // README begins
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SplitMix64(seed: seed)  // print `seed` when the test fails: the same seed replays the run
        let directory = try TemporaryDirectory()  // deleted with its contents when released
        let path = directory.path("replica.sqlite")
        let event = EventFixtures.event(scope: "team-1", stream: EventFixtures.stream("doc"))
        try event.validate()  // a UUIDv7 id, a dot, an HLC of the dot's replica
        print(path, event.id, random.int(1...6))
        // README ends
        #expect(path.hasSuffix("replica.sqlite"))
    }
}
