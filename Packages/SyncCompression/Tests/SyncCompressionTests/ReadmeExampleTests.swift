import Foundation
import SyncCompression
import Testing

/// Keeps the README example compiling and working: the body below is the README's code
/// (`ReadmeExamplesTests` in Tests/RepositoryTests holds the two equal).
@Suite struct ReadmeExampleTests {
    @Test func readmeExampleRuns() throws {
        // README begins
        let packed = Gzip.compress(Data("hello".utf8))
        let unpacked = try Gzip.decompress(packed, maxOutputBytes: 64 << 20)
        // README ends
        #expect(unpacked == Data("hello".utf8))
    }
}
