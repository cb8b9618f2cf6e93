import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import SyncServerTesting
import Synchronization
import Testing

@testable import SyncServer

/// `JSONLogHandler`'s lines, the request id's rules, and the id on the responses of a real server.
@Suite struct StructuredLogTests {
    /// The lines a handler wrote, kept in memory.
    final class Captured: Sendable {
        private let writes = Mutex<[[UInt8]]>([])
        var output: JSONLogHandler.Output { .init { line in self.writes.withLock { $0.append(line) } } }
        var lines: [[UInt8]] { writes.withLock { $0 } }

        /// Each write parsed as one JSON object; fails the test for a write that is not one line of JSON.
        func objects() throws -> [[String: Any]] {
            try lines.map { line in
                #expect(line.last == UInt8(ascii: "\n"))
                #expect(line.dropLast().contains(UInt8(ascii: "\n")) == false)
                let object = try JSONSerialization.jsonObject(with: Data(line))
                return try #require(object as? [String: Any])
            }
        }
    }

    @Test func eachMessageIsOneLineOfJSONWithTheFieldsAndTheMetadata() throws {
        let captured = Captured()
        var logger = Logger(label: "sync-server") { JSONLogHandler(label: $0, output: captured.output) }
        logger.logLevel = .info
        logger[metadataKey: "hb.request.id"] = "abc"
        logger.info(
            "request",
            metadata: [
                "http.status": .stringConvertible(200), "http.duration_ms": .stringConvertible(1.5),
                "flag": .stringConvertible(true), "name": "push", "message": "collides",
                "nested": ["list": ["a", .stringConvertible(2)], "empty": [:]],
                "infinite": .stringConvertible(Double.infinity),
            ], source: "SyncServer")
        logger.debug("filtered out")
        let objects = try captured.objects()
        #expect(objects.count == 1)
        let line = try #require(objects.first)
        #expect(line["level"] as? String == "info")
        #expect(line["label"] as? String == "sync-server")
        #expect(line["message"] as? String == "request")
        #expect(line["source"] as? String == "SyncServer")
        #expect(line["hb.request.id"] as? String == "abc")
        #expect(line["http.status"] as? Int == 200)
        #expect(line["http.duration_ms"] as? Double == 1.5)
        #expect(line["flag"] as? Bool == true)
        #expect(line["name"] as? String == "push")
        #expect(line["metadata.message"] as? String == "collides")
        #expect(line["infinite"] is NSNull)
        let nested = try #require(line["nested"] as? [String: Any])
        #expect((nested["list"] as? [Any])?.count == 2)
        #expect((nested["list"] as? [Any])?.last as? Int == 2)
        #expect((nested["empty"] as? [String: Any])?.isEmpty == true)
        let time = try #require(line["time"] as? String)
        #expect(time.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/) != nil)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let date = try #require(formatter.date(from: time))
        #expect(abs(date.timeIntervalSinceNow) < 60)
    }

    @Test func stringsAreEscapedAndEveryLineStaysOneLine() throws {
        let captured = Captured()
        let logger = Logger(label: "a \"label\"") { JSONLogHandler(label: $0, output: captured.output) }
        // Bytes that are not UTF-8 become U+FFFD when a string is made of them.
        let invalid = String(decoding: [0x41, 0xFF, 0xFE, 0x42], as: UTF8.self)
        let message = "quote \" backslash \\ newline \n return \r tab \t nul \u{0} bell \u{7} del \u{7F} \u{2028}é🙂"
        logger.warning(
            "\(message)", metadata: ["key \"with\" quotes\n": "\(invalid)", "list": [.string("line\nbreak")]])
        let objects = try captured.objects()
        let line = try #require(objects.first)
        #expect(line["message"] as? String == message)
        #expect(line["label"] as? String == "a \"label\"")
        #expect(line["key \"with\" quotes\n"] as? String == "A\u{FFFD}\u{FFFD}B")
        #expect((line["list"] as? [String]) == ["line\nbreak"])
        let text = try #require(String(validating: captured.lines[0], as: UTF8.self))
        #expect(text.contains(#"nul \u0000 bell \u0007 del \u007f \u2028é🙂"#))
        #expect(text.contains(#"newline \n return \r tab \t"#))
    }

    @Test func linesOfManyThreadsNeverInterleave() async throws {
        let captured = Captured()
        let logger = Logger(label: "sync-server") { JSONLogHandler(label: $0, output: captured.output) }
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<200 {
                        logger.info("\(String(repeating: "x", count: 500))", metadata: ["task": "\(task)-\(index)"])
                    }
                }
            }
        }
        let objects = try captured.objects()
        #expect(objects.count == 1600)
        #expect(Set(objects.compactMap { $0["task"] as? String }).count == 1600)
    }

    @Test func aRequestIDIsTakenOnlyWhenItIsSane() {
        #expect(RequestIdentifier.accepted("f3a9c0de-1234") == "f3a9c0de-1234")
        #expect(RequestIdentifier.accepted(String(repeating: "a", count: 128)) != nil)
        #expect(RequestIdentifier.accepted(String(repeating: "a", count: 129)) == nil)
        #expect(RequestIdentifier.accepted("") == nil)
        #expect(RequestIdentifier.accepted(nil) == nil)
        #expect(RequestIdentifier.accepted("has space") == nil)
        #expect(RequestIdentifier.accepted("line\nbreak") == nil)
        #expect(RequestIdentifier.accepted("é") == nil)
        #expect(RequestIdentifier.accepted("tab\t") == nil)
    }

    @Test func theFormatComesFromTheEnvironmentOrTheFlag() throws {
        #expect(try ServerConfiguration(environment: [:]).logFormat == .text)
        #expect(try ServerConfiguration(environment: ["SYNC_LOG_FORMAT": "json"]).logFormat == .json)
        #expect(try ServerConfiguration(environment: ["SYNC_LOG_FORMAT": "JSON"]).logFormat == .json)
        #expect(throws: ConfigurationError.self) {
            try ServerConfiguration(environment: ["SYNC_LOG_FORMAT": "yaml"])
        }
        let flag = try CommonOptions.parse(["--log-format", "json"])
        #expect(try flag.configuration(environment: ["SYNC_LOG_FORMAT": "text"]).logFormat == .json)
        #expect(throws: (any Error).self) {
            try CommonOptions.parse(["--log-format", "xml"]).configuration(environment: [:])
        }
    }

    @Test func everyResponseCarriesTheRequestIDItWasGivenOrOneOfItsOwn() async throws {
        try await TestServer.run(domain: TestDomain()) { server in
            let given = try await server.send(.get, "/healthz", headers: [RequestIdentifier.header: "proxy-id-1"])
            #expect(given.headers[RequestIdentifier.header] == "proxy-id-1")
            // Errors too: no token, no route, a method the path does not serve.
            let refused = try await server.send(.get, "/v1/pull?scopes=a", headers: [RequestIdentifier.header: "id-2"])
            #expect(refused.status == .unauthorized)
            #expect(refused.headers[RequestIdentifier.header] == "id-2")
            let missing = try await server.send(.get, "/nowhere", headers: [RequestIdentifier.header: "id-3"])
            #expect(missing.status == .notFound)
            #expect(missing.headers[RequestIdentifier.header] == "id-3")
            let wrongMethod = try await server.send(.delete, "/v1/push", headers: [RequestIdentifier.header: "id-4"])
            #expect(wrongMethod.status == .methodNotAllowed)
            #expect(wrongMethod.headers[RequestIdentifier.header] == "id-4")
            // An unusable id is replaced; none gets one.
            let unusable = try await server.send(
                .get, "/healthz", headers: [RequestIdentifier.header: String(repeating: "x", count: 200)])
            let made = try #require(unusable.headers[RequestIdentifier.header])
            #expect(made.count < 200 && RequestIdentifier.accepted(made) == made)
            let none = try await server.send(.get, "/healthz")
            let other = try #require(none.headers[RequestIdentifier.header])
            #expect(other != made)
        }
    }

    @Test func theAccessLineHasTheRouteNotThePathAndNothingOfTheRequest() {
        let metadata = AccessLine(
            method: "PUT", route: "/v1/uploads/{id}/chunks/{index}", status: 200,
            elapsed: .microseconds(12_345), requestBytes: 4096, responseBytes: 2, replica: "r-1"
        ).metadata
        #expect(metadata["http.route"] == "/v1/uploads/{id}/chunks/{index}")
        #expect(metadata["http.method"] == "PUT")
        #expect(metadata["http.status"]?.description == "200")
        #expect(metadata["http.duration_ms"]?.description == "12.345")
        #expect(metadata["http.request.bytes"]?.description == "4096")
        #expect(metadata["http.response.bytes"]?.description == "2")
        #expect(metadata["sync.replica"] == "r-1")
        let bare = AccessLine(method: "GET", route: nil, status: 404, elapsed: .zero).metadata
        #expect(Set(bare.keys) == ["http.method", "http.status", "http.duration_ms"])
    }
}
