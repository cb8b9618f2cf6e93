import Foundation
import SyncCompression
import Testing

@Suite struct GzipTests {
    @Test(arguments: [0, 1, 1000, 300_000])
    func roundTrips(size: Int) throws {
        var random = SystemRandomNumberGenerator()
        let data = Data((0..<size).map { _ in UInt8.random(in: 0...20, using: &random) })
        let compressed = Gzip.compress(data)
        #expect(Gzip.isGzip(compressed))
        #expect(try Gzip.decompress(compressed) == data)
    }

    @Test func readsConcatenatedMembers() throws {
        let joined = Gzip.compress(Data("hello ".utf8)) + Gzip.compress(Data("world".utf8))
        #expect(try Gzip.decompress(joined) == Data("hello world".utf8))
    }

    @Test func aBombStopsAtTheCap() throws {
        let bomb = Gzip.compress(Data(count: 50_000_000))
        #expect(bomb.count < 100_000)
        #expect(throws: Gzip.Failure(kind: .tooLarge)) { try Gzip.decompress(bomb, maxOutputBytes: 1_000_000) }
    }

    @Test func truncatedAndCorruptStreamsAreErrors() throws {
        let compressed = Gzip.compress(Data(repeating: 65, count: 10_000))
        #expect(throws: Gzip.Failure(kind: .truncated)) { try Gzip.decompress(compressed.prefix(compressed.count / 2)) }
        #expect(throws: Gzip.Failure(kind: .truncated)) { try Gzip.decompress(Data()) }
        #expect(throws: Gzip.Failure(kind: .corrupt)) { try Gzip.decompress(Data("not gzip at all".utf8)) }
    }
}
