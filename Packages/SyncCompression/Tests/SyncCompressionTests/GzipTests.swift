import Foundation
import SyncCompression
import SyncTestSupport
import Testing

@Suite(.onOwnThreads) struct GzipTests {
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

    @Test(arguments: [(0, 0), (0, 5000), (17, 0), (40, 300_000), (100_000, 70_000)])
    func aHeadJoinsASegmentDeflatedBefore(head headSize: Int, tail tailSize: Int) throws {
        var random = SystemRandomNumberGenerator()
        let head = (0..<headSize).map { _ in UInt8.random(in: 97...105, using: &random) }
        let tail = (0..<tailSize).map { _ in UInt8.random(in: 97...122, using: &random) }
        let segment = Gzip.segment(tail, level: 5)
        #expect(segment.count == tail.count)
        let joined = Gzip.compress(head: head, then: segment, level: 5)
        #expect(Gzip.isGzip(joined))
        #expect(try Gzip.decompress(joined) == Data(head + tail))
        // One member, with the CRC and size of the whole: what `gzip` itself checks and inflates.
        #expect(try Self.gunzip(joined) == Data(head + tail))
    }

    /// `gzip -dc` of `data`, run as a process.
    static func gunzip(_ data: Data) throws -> Data {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("join-\(UUID().uuidString).gz")
        try data.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try ChildProcess.run(
            "/usr/bin/env", ["gzip", "-dc", file.path], environment: ProcessInfo.processInfo.environment)
        #expect(result.status == 0, "gzip -dc: \(String(decoding: result.stderr, as: UTF8.self))")
        return result.stdout
    }
}

@Suite(.onOwnThreads) struct DeflateTests {
    @Test(arguments: [0, 1, 560, 300_000])
    func roundTrips(size: Int) throws {
        var random = SystemRandomNumberGenerator()
        let bytes = (0..<size).map { _ in UInt8.random(in: 0...20, using: &random) }
        let compressed = Deflate.compress(bytes)
        #expect(try Deflate.decompress(compressed) == bytes)
        if size > 100 { #expect(compressed.count < size) }
    }

    @Test func badInputIsAnErrorAndABombStopsAtTheCap() throws {
        let compressed = Deflate.compress([UInt8](repeating: 65, count: 10_000))
        #expect(throws: Gzip.Failure(kind: .truncated)) {
            try Deflate.decompress(compressed.prefix(compressed.count / 2))
        }
        #expect(throws: Gzip.Failure(kind: .truncated)) { try Deflate.decompress([UInt8]()) }
        #expect(throws: Gzip.Failure.self) { try Deflate.decompress(Array("not deflate at all, really".utf8)) }
        let bomb = Deflate.compress([UInt8](repeating: 0, count: 5_000_000))
        #expect(throws: Gzip.Failure(kind: .tooLarge)) { try Deflate.decompress(bomb, maxOutputBytes: 100_000) }
    }
}
