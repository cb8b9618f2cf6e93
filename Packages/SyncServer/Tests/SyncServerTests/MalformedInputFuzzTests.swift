import Foundation
import SyncCompression
import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Testing

@testable import SyncServer

/// Bad input never gets a 5xx: seeded random mutations of valid push, sync and pull requests (raw and
/// gzip) are answered 200 or with a protocol 4xx, always as JSON.
@Suite struct MalformedInputFuzzTests {
    @Test func mutatedRequestsNeverGet5xx() async throws {
        var seeder = SystemRandomNumberGenerator()
        let seed = UInt64.random(in: 0...UInt64.max, using: &seeder)
        print("MalformedInputFuzzTests seed \(seed)")
        try await TestServer.run { server in
            var random = SeededRandom(seed: seed)
            let headers = try await server.bearer(["f"])
            let events = (0..<3).map { _ in EventFixtures.event(scope: "f") }
            let push = try server.codec.encode(PushRequest(replica: EventFixtures.replica, events: events))
            let sync = try server.codec.encode(SyncRequest(replica: EventFixtures.replica, events: events, limit: 5))
            for round in 0..<250 {
                let (path, original) = round % 2 == 0 ? ("/v1/push", push) : ("/v1/sync", sync)
                var body = [UInt8](original)
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    let index = Int.random(in: 0..<max(1, body.count), using: &random)
                    switch Int.random(in: 0..<4, using: &random) {
                    case 0 where !body.isEmpty: body[index] = UInt8.random(in: 0...255, using: &random)
                    case 1 where !body.isEmpty: body.remove(at: index)
                    case 2:
                        body.insert(
                            Array(#"{}[]",:0-e."#.utf8).randomElement(using: &random)!, at: min(index, body.count))
                    default: body = Array(body.prefix(index))
                    }
                }
                var requestHeaders = headers
                var data = Data(body)
                if round % 3 == 0 {
                    requestHeaders[.contentEncoding] = "gzip"
                    let packed = Gzip.compress(data)
                    data = round % 6 == 0 ? packed.prefix(Int.random(in: 0...packed.count, using: &random)) : packed
                }
                let response = try await server.send(.post, path, headers: requestHeaders, body: data)
                #expect(
                    response.status.code < 500, "round \(round): \(response.status) \(String(buffer: response.body))")
                #expect(response.headers[.contentType] == "application/json", "round \(round)")
                if response.status.code != 200 {
                    #expect(
                        [ErrorCode.requestMalformed, .requestInvalid, .requestTooLarge].contains(
                            try server.error(response).code), "round \(round)")
                }
            }
            for query in [
                "cursor=%00", "limit=%20", "scopes=%F0%9F", "wait=9999999999999999999999",
                "cursor=" + String(repeating: "A", count: 70_000),
            ] {
                let response = try await server.send(.get, "/v1/pull?\(query)", headers: headers)
                #expect(response.status.code == 400, "\(query.prefix(30)): \(response.status)")
            }
        }
    }
}

/// SplitMix64 (SyncTestSupport), for reproducible rounds from a printed seed.
typealias SeededRandom = SplitMix64
