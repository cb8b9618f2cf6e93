import Foundation
import HummingbirdTesting
import SyncCompression
import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Testing

@testable import SyncServer

/// Every request-level code of PROTOCOL.md, each produced by the input that should produce it, always
/// with a JSON error body and never a 500.
@Suite struct ErrorCodeTests {
    static let replica = "6d2c1f0e9a8b4c7d8e9f001122334455"

    func expectError(
        _ response: TestResponse, _ status: Int, _ code: ErrorCode, _ server: TestServer,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(response.status.code == status, "\(String(buffer: response.body))", sourceLocation: sourceLocation)
        #expect(response.headers[.contentType] == "application/json", sourceLocation: sourceLocation)
        let error = try server.error(response)
        #expect(error.code == code, "\(error.message)", sourceLocation: sourceLocation)
        #expect(!error.message.isEmpty, sourceLocation: sourceLocation)
    }

    @Test func malformedAndInvalidBodies() async throws {
        try await TestServer.run { server in
            let headers = try await server.bearer(["e"])
            let event = try String(decoding: server.codec.encode(EventFixtures.event(scope: "e")), as: UTF8.self)
            let cases: [(String, ErrorCode)] = [
                ("{not json", .requestMalformed),
                ("", .requestMalformed),
                ("\u{FF}\u{FE}", .requestMalformed),
                ("[]", .requestInvalid),
                (#"{"events": []}"#, .requestInvalid),
                (#"{"replica": 12, "events": []}"#, .requestInvalid),
                (#"{"replica": "\#(Self.replica)", "events": "none"}"#, .requestInvalid),
                (#"{"replica": "\#(Self.replica)", "events": [{"id": "nope"}]}"#, .requestInvalid),
                (
                    #"{"replica": "\#(Self.replica)", "events": [\#(event.replacingOccurrences(of: "\"scope\":\"e\"", with: "\"scope\":\"bad scope\""))]}"#,
                    .requestInvalid
                ),
                (
                    #"{"replica": "\#(Self.replica)", "events": [\#(event.replacingOccurrences(of: "\"streamVersion\":1", with: "\"streamVersion\":\"1\""))]}"#,
                    .requestInvalid
                ),
                (
                    #"{"replica": "\#(Self.replica)", "events": [\#(event.replacingOccurrences(of: #"-"#, with: "x"))]}"#,
                    .requestInvalid
                ),
                (#"{"replica": "\#(Self.replica)", "events": [null]}"#, .requestInvalid),
            ]
            for (body, code) in cases {
                for path in ["/v1/push", "/v1/sync"] {
                    let response = try await server.send(.post, path, headers: headers, body: Data(body.utf8))
                    try expectError(response, 400, code, server)
                }
            }
        }
    }

    @Test func badQueryParameters() async throws {
        try await TestServer.run { server in
            let headers = try await server.bearer(["e"])
            for query in [
                "cursor=%%%", "cursor=bm90IGpzb24", "limit=0", "limit=99999", "limit=x", "wait=31", "wait=-1",
                "scopes=a,,b", "replica=zz",
            ] {
                let response = try await server.send(.get, "/v1/pull?\(query)", headers: headers)
                try expectError(response, 400, .requestInvalid, server)
            }
            let body = try server.codec.encode(SyncRequest(replica: EventFixtures.replica, events: [], cursor: "!!"))
            try expectError(
                try await server.send(.post, "/v1/sync", headers: headers, body: body), 400, .requestInvalid, server)
        }
    }

    @Test func perEventRejectionCodes() async throws {
        try await TestServer.run { server in
            var invalid = EventFixtures.event(scope: "e")
            invalid.dot = Dot(replica: ReplicaID(high: 1, low: 1), counter: 1)
            var notV7 = EventFixtures.event(scope: "e")
            notV7.id = EventID(uuid: UUID())
            let nul = EventFixtures.event(scope: "e", payload: .object(["text": .string("a\u{0}b")]))
            var nulStream = EventFixtures.event(scope: "e")
            nulStream.stream = "order:\u{0}1"
            nulStream.type = "order.placed"
            var hugeSchema = EventFixtures.event(scope: "e")
            hugeSchema.schemaVersion = Int(Int32.max) + 1
            let forbidden = EventFixtures.event(scope: "other")
            let ruled = EventFixtures.event(scope: "e", type: "doc.rejected")
            let ok = EventFixtures.event(scope: "e")
            let results = try await server.push(
                [invalid, notV7, nul, nulStream, hugeSchema, forbidden, ruled, ok], scopes: ["e"])
            #expect(
                results.map(\.code) == [
                    .eventInvalid, .eventInvalid, .eventInvalid, .eventInvalid, .eventInvalid, .scopeForbidden,
                    .validationFailed, nil,
                ])
            #expect(results.last == .accepted(ok.id, seq: 1))
            #expect(results.allSatisfy { $0.status == .accepted || ($0.message?.isEmpty == false) })
        }
    }

    @Test func limitsAnswer413() async throws {
        try await TestServer.run(configure: { configuration in
            configuration.limits.maxEventsPerPush = 3
            configuration.limits.maxPayloadBytes = 1024
            configuration.limits.maxDecompressedBodyBytes = 64 * 1024
            configuration.limits.maxCompressedBodyBytes = 16 * 1024
        }) { server in
            let headers = try await server.bearer(["e"])
            let tooMany = try server.codec.encode(
                PushRequest(
                    replica: EventFixtures.replica, events: (0..<4).map { _ in EventFixtures.event(scope: "e") }))
            try expectError(
                try await server.send(.post, "/v1/push", headers: headers, body: tooMany), 413, .requestTooLarge, server
            )
            let big = EventFixtures.event(scope: "e", payload: .string(String(repeating: "x", count: 2000)))
            let bigPayload = try server.codec.encode(PushRequest(replica: EventFixtures.replica, events: [big]))
            try expectError(
                try await server.send(.post, "/v1/push", headers: headers, body: bigPayload), 413, .requestTooLarge,
                server)
            let huge = Data(repeating: 0x20, count: 70 * 1024)
            try expectError(
                try await server.send(.post, "/v1/push", headers: headers, body: huge), 413, .requestTooLarge, server)
            var gzipHeaders = headers
            gzipHeaders[.contentEncoding] = "gzip"
            let bomb = Gzip.compress(Data(repeating: 0x20, count: 8 << 20), level: 9)
            #expect(bomb.count < 16 * 1024)
            try expectError(
                try await server.send(.post, "/v1/push", headers: gzipHeaders, body: bomb), 413, .requestTooLarge,
                server)
            let wireTooBig = Data(repeating: 1, count: 17 * 1024)
            try expectError(
                try await server.send(.post, "/v1/push", headers: gzipHeaders, body: wireTooBig), 413, .requestTooLarge,
                server)
            let stored = try await server.database.integers("SELECT count(*) FROM events")
            #expect(stored == [0])
        }
    }

    @Test func encodings() async throws {
        try await TestServer.run { server in
            var headers = try await server.bearer(["e"])
            let body = try server.codec.encode(
                PushRequest(replica: EventFixtures.replica, events: [EventFixtures.event(scope: "e")]))
            for encoding in ["br", "deflate", "gzip, br"] {
                headers[.contentEncoding] = encoding
                try expectError(
                    try await server.send(.post, "/v1/push", headers: headers, body: body), 415,
                    .requestUnsupportedEncoding, server)
            }
            headers[.contentEncoding] = "gzip"
            let gzip = Gzip.compress(body)
            try expectError(
                try await server.send(.post, "/v1/push", headers: headers, body: gzip.prefix(gzip.count - 9)), 400,
                .requestMalformed, server)
            try expectError(
                try await server.send(.post, "/v1/push", headers: headers, body: body), 400, .requestMalformed, server)
        }
    }

    @Test func authCodes() async throws {
        try await TestServer.run { server in
            let body = try server.codec.encode(PushRequest(replica: EventFixtures.replica, events: []))
            try expectError(try await server.send(.post, "/v1/push", body: body), 401, .authMissing, server)
            try expectError(
                try await server.send(.get, "/v1/pull", headers: [.authorization: "Basic abc"]), 401, .authMissing,
                server)
            try expectError(
                try await server.send(.get, "/v1/pull", headers: [.authorization: "Bearer garbage"]), 401, .authInvalid,
                server)
            let foreign = try await TokenVerifier(secret: String(repeating: "z", count: 40)).mint(
                subject: "eve", scopes: ["e"], ttl: 60)
            try expectError(
                try await server.send(.get, "/v1/pull", headers: [.authorization: "Bearer \(foreign)"]), 401,
                .authInvalid, server)
            let good = try await server.token(["e"])
            var parts = good.split(separator: ".").map(String.init)
            parts[1] = Data(#"{"sub":"alice","scopes":["e","f"],"exp":9999999999}"#.utf8).base64EncodedString()
                .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(
                    of: "/", with: "_")
            let tampered = parts.joined(separator: ".")
            try expectError(
                try await server.send(.get, "/v1/pull", headers: [.authorization: "Bearer \(tampered)"]), 401,
                .authInvalid, server)
            let expired = try await server.tokens.mint(subject: "alice", scopes: ["e"], ttl: -10)
            try expectError(
                try await server.send(.get, "/v1/pull", headers: [.authorization: "Bearer \(expired)"]), 401,
                .authExpired, server)
            // Another scope: 403 for a pull, a per-event rejection for a push, and a 403 for a sync's pull half.
            let other = try await server.bearer(["e"])
            try expectError(
                try await server.send(.get, "/v1/pull?scopes=f", headers: other), 403, .scopeForbidden, server)
            let results = try await server.push([EventFixtures.event(scope: "f")], scopes: ["e"])
            #expect(results[0].code == .scopeForbidden)
            let sync = try server.codec.encode(
                SyncRequest(replica: EventFixtures.replica, events: [EventFixtures.event(scope: "e")], scopes: ["f"]))
            try expectError(
                try await server.send(.post, "/v1/sync", headers: other, body: sync), 403, .scopeForbidden, server)
            let stored = try await server.database.integers("SELECT count(*) FROM events")
            #expect(stored == [0], "a forbidden sync must not push")
            // Nothing was served to the wrong bearer, and /healthz needs no token.
            #expect(try await server.send(.get, "/healthz").status == .ok)
        }
    }

    @Test func rateLimitedPastTheConcurrencyCap() async throws {
        try await TestServer.run(configure: { $0.maxConcurrentRequestsPerToken = 1 }) { server in
            let headers = try await server.bearer(["w"])
            let bob = try await server.bearer(["w"], subject: "bob")
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    // Holds alice's only slot until bob's push below wakes it (refused while a probe below held
                    // the slot for that instant: again).
                    while true {
                        let response = try await server.send(.get, "/v1/pull?wait=30", headers: headers)
                        if response.status == .tooManyRequests {
                            try await Task.sleep(for: .milliseconds(50))
                            continue
                        }
                        #expect(response.status == .ok)
                        return
                    }
                }
                // Probes until one is refused: the long-poll holds the slot from then on (on a loaded machine it
                // may be admitted seconds after it was sent).
                var refused: TestResponse?
                for _ in 0..<600 where refused == nil {
                    let response = try await server.send(.get, "/v1/pull", headers: headers)
                    if response.status == .tooManyRequests {
                        refused = response
                    } else {
                        #expect(response.status == .ok)
                        try await Task.sleep(for: .milliseconds(100))
                    }
                }
                let answer = try #require(refused, "no request was refused while the long-poll held the slot")
                try expectError(answer, 429, .rateLimited, server)
                #expect(answer.headers[.init("Retry-After")!] == "1")
                // Another subject is not affected; its push ends the long-poll.
                #expect(try await server.send(.get, "/v1/pull", headers: bob).status == .ok)
                let push = try server.codec.encode(
                    PushRequest(replica: EventFixtures.replica, events: [EventFixtures.event(scope: "w")]))
                #expect(try await server.send(.post, "/v1/push", headers: bob, body: push).status == .ok)
                try await group.waitForAll()
            }
            #expect(try await server.send(.get, "/v1/pull", headers: headers).status == .ok)
        }
    }

    @Test func databaseDownAnswers503() async throws {
        try await TestServer.run(acquireTimeout: .seconds(2)) { server in
            let headers = try await server.bearer(["d"])
            // Up before the database goes away (a 503 of a loaded machine is sent again).
            _ = try await server.pull(PullRequest(), scopes: ["d"])
            let name = server.database.name
            try await server.database.adminOnEveryNode("ALTER DATABASE \(name) ALLOW_CONNECTIONS false")
            try await server.database.adminOnEveryNode(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(name)' AND pid <> pg_backend_pid()"
            )
            let push = try server.codec.encode(
                PushRequest(replica: EventFixtures.replica, events: [EventFixtures.event(scope: "d")]))
            try expectError(
                try await server.send(.post, "/v1/push", headers: headers, body: push), 503, .serverUnavailable, server)
            // Another request than the first: an identical one may be answered by the read it just made.
            let refused = try await server.send(.get, "/v1/pull?limit=7", headers: headers)
            try expectError(refused, 503, .serverUnavailable, server)
            // Retries spread over 1–3 s.
            #expect((1...3).contains(Int(refused.headers[.init("Retry-After")!] ?? "") ?? 0))
            try expectError(try await server.send(.get, "/readyz"), 503, .serverUnavailable, server)
            try await server.database.adminOnEveryNode("ALTER DATABASE \(name) ALLOW_CONNECTIONS true")
            // Recovers once the database is back.
            var recovered = false
            for _ in 0..<20 where !recovered {
                recovered = try await server.send(.get, "/v1/pull", headers: headers).status == .ok
                if !recovered { try await Task.sleep(for: .milliseconds(500)) }
            }
            #expect(recovered)
        }
    }
}
