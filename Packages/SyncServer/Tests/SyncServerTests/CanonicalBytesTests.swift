import Foundation
import GRDB
import SyncEventStore
import SyncModels
import SyncProtocol
import SyncServer
import SyncServerTesting
import SyncStorage
import SyncTestSupport
import Testing

/// One JSON path: the payload of an event is the same canonical bytes where the client stores it, where the
/// server stores it and where the server serves it, whatever it holds.
@Suite struct CanonicalBytesTests {
    /// A random JSON value: nested containers, strings with escapes, controls, non-ASCII and astral
    /// characters, integers to the 64-bit bounds, integral and fractional doubles. No U+0000 (the server
    /// refuses it: PostgreSQL cannot store it).
    static func value(_ random: inout SplitMix64, depth: Int = 0) -> JSONValue {
        let pieces = [
            "a", "é", "\u{1F600}", "\"", "\\", "/", "\n", "\t", "\u{08}", "\u{0C}", "\u{1F}", " ", "ß", "\u{7F}",
        ]
        func text(_ random: inout SplitMix64) -> String {
            (0..<random.int(0...6)).map { _ in random.pick(pieces) }.joined()
        }
        switch random.int(below: depth > 3 ? 6 : 8) {
        case 0: return .null
        case 1: return .bool(random.chance(0.5))
        case 2: return .int(random.pick([0, 1, -1, Int64.max, Int64.min, Int64(random.int(-1000...1000))]))
        case 3: return .double(random.pick([2.0, -0.5, 1.5e-7, 123456.789, 1e300, Double(random.int(-99...99)) / 8]))
        case 4, 5: return .string(text(&random))
        case 6: return .array((0..<random.int(0...4)).map { _ in value(&random, depth: depth + 1) })
        default:
            var object: [String: JSONValue] = [:]
            for _ in 0..<random.int(0...4) { object[text(&random)] = value(&random, depth: depth + 1) }
            return .object(object)
        }
    }

    @Test func anEventHasTheSameBytesOnTheClientInTheDatabaseAndOnTheWire() async throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SplitMix64(seed: seed)
        let directory = try TemporaryDirectory()
        let database = try SyncDatabase(path: directory.path("client.sqlite"))
        let store = try EventStore(database: database)
        let payloads: [JSONValue] = (0..<40).map { round in ["round": .int(Int64(round)), "value": Self.value(&random)]
        }
        try await TestServer.run { server in
            for (round, payload) in payloads.enumerated() {
                let stored = try await store.append([
                    EventDraft(scope: "c", stream: EventFixtures.stream(), type: "doc.edited", payload: payload)
                ])[0]
                let canonical = payload.canonicalData()
                let onClient = try await database.writer.read { db in
                    try Data.fetchOne(
                        db, sql: "SELECT payload FROM events WHERE event_id = ?",
                        arguments: [stored.event.id.description])
                }
                #expect(onClient == canonical, "seed \(seed), round \(round): the client stored other bytes")

                let results = try await server.push([stored.event], scopes: ["c"])
                #expect(results.map(\.status) == [.accepted], "seed \(seed), round \(round)")
                let inDatabase = try await server.database.connection { connection in
                    var texts: [String] = []
                    let rows = try await connection.query(
                        "SELECT payload::text FROM events WHERE event_id = \(stored.event.id.uuid)",
                        logger: TestDatabase.logger)
                    for try await text in rows.decode(String.self) { texts.append(text) }
                    return texts
                }
                #expect(inDatabase == [String(decoding: canonical, as: UTF8.self)], "seed \(seed), round \(round)")

                var cursor = ScopeCursor()
                cursor.advance("c", to: Int64(round))
                let response = try await server.send(
                    .get, TestServer.uri(PullRequest(cursor: cursor, limit: 1)), headers: try await server.bearer(["c"])
                )
                let served = Data(buffer: response.body)
                let expected = Data("\"payload\":".utf8) + canonical + Data(",\"receivedAt\"".utf8)
                #expect(served.range(of: expected) != nil, "seed \(seed), round \(round): served other bytes")
                // And the served event reads back to the same canonical bytes.
                let page = try server.codec.decode(PullResponse.self, from: served)
                #expect(page.events.map { $0.payload.canonicalData() } == [canonical], "seed \(seed), round \(round)")
            }
        }
    }
}
