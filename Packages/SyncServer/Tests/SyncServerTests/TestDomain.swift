import Logging
import PostgresNIO
import SyncModels
import SyncProtocol
import SyncServer
import SyncServerTesting

/// The domain the library's own tests serve: `doc.*` events are CRDT operations (commutative), every other
/// type extends its stream by version, and one rule rejects `doc.rejected` events and counts the
/// accepted `doc.counted` ones in a table of its own (so that rules, their migrations and their effects
/// in the push transaction are all exercised without any real domain). A `file.attached` event refers to the blob
/// its payload's `blob` field holds (a `BlobReference` as JSON).
struct TestDomain: SyncDomain {
    var name: String { "test" }
    var rules: [any EventRule] { [TestRule()] }
    func isCommutative(type: String) -> Bool { type.hasPrefix("doc.") }

    func blobReferences(in event: Event) -> [BlobReference] {
        guard event.type == "file.attached", case .object(let fields) = event.payload,
            let reference = fields["blob"].flatMap(BlobReference.init(json:))
        else { return [] }
        return [reference]
    }
}

struct TestRule: EventRule {
    static let rejectedMessage = "rejected by the test rule"

    var name: String { "test-rule" }

    var migrations: [Migration] {
        [Migration(id: "test-rule-0001", statements: ["CREATE TABLE test_counts (scope text PRIMARY KEY, n bigint)"])]
    }

    func applies(to type: String) -> Bool { type == "doc.rejected" || type == "doc.counted" }

    func evaluate(_ events: [Event], connection: PostgresConnection, logger: Logger) async throws -> RuleDecision {
        var rejections: [Int: EventRejection] = [:]
        for (index, event) in events.enumerated() where event.type == "doc.rejected" {
            rejections[index] = EventRejection(.validationFailed, Self.rejectedMessage)
        }
        return RuleDecision(rejections: rejections) { accepted in
            Dictionary(grouping: accepted, by: \.scope).map { scope, events in
                let n = Int64(events.count)
                return """
                    INSERT INTO test_counts (scope, n) VALUES (\(scope.name), \(n))
                    ON CONFLICT (scope) DO UPDATE SET n = test_counts.n + EXCLUDED.n
                    """
            }
        }
    }
}

extension TestServer {
    /// A test server with `TestDomain` plugged in.
    static func run(
        live: Bool = false, acquireTimeout: Duration = .seconds(20),
        configure: @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ test: @Sendable (TestServer) async throws -> Void
    ) async throws {
        try await run(live: live, acquireTimeout: acquireTimeout, domain: TestDomain(), configure: configure, test)
    }
}
