import Foundation
import Testing

@testable import SyncProtocol

@Suite struct ServerSentEventParserTests {
    static let stream = Array(
        ": hi\r\nevent: live\r\ndata: {\"a\":1}\r\n\r\nevent: events\ndata: one\ndata: two\n\n:beat\r\r\ndata:x\r\n\r\n"
            .utf8)

    static let expected: [ServerSentEventParser.Item] = [
        .comment,
        .event(.init(name: "live", data: Data(#"{"a":1}"#.utf8))),
        .event(.init(name: "events", data: Data("one\ntwo".utf8))),
        .comment,
        .event(.init(name: "message", data: Data("x".utf8))),
    ]

    /// Every way of cutting the stream in two or three chunks (CR and LF apart included) gives the same
    /// items as feeding it whole, through the contiguous path and the generic one.
    @Test func chunkBoundariesDoNotChangeTheItems() throws {
        var whole = ServerSentEventParser()
        #expect(try whole.feed(Self.stream) == Self.expected)
        for first in 0...Self.stream.count {
            for second in first...Self.stream.count where second == first || (second - first) % 7 == 0 {
                var parser = ServerSentEventParser()
                var items: [ServerSentEventParser.Item] = []
                items += try parser.feed(Self.stream[..<first])
                items += try parser.feed(AnySequence(Self.stream[first..<second]))
                items += try Self.stream[second...].withUnsafeBytes { try parser.feed($0) }
                #expect(items == Self.expected, "cut at \(first) and \(second)")
            }
        }
    }

    @Test func aLineLongerThanTheLimitIsRefusedAcrossChunks() throws {
        var parser = ServerSentEventParser(maxLineBytes: 8)
        _ = try parser.feed(Array("data: ab".utf8))
        #expect(throws: ServerSentEventParser.LineTooLong.self) { try parser.feed(Array("c".utf8)) }
        var exact = ServerSentEventParser(maxLineBytes: 8)
        #expect(try exact.feed(Array("data: ab\n\n".utf8)) == [.event(.init(name: "message", data: Data("ab".utf8)))])
    }
}
