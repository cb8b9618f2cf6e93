import SyncModels
import Testing

@testable import SyncProtocol

@Suite struct PullRequestTests {
    @Test func parsesAndRendersItsQuery() throws {
        var cursor = ScopeCursor()
        cursor.advance("team-1", to: 42)
        let request = PullRequest(
            cursor: cursor, scopes: ["team-1", "team-2"], limit: 100, wait: 5, replica: ReplicaID(high: 1, low: 2))
        let parsed = try PullRequest(query: request.queryItems)
        #expect(parsed == request)
        #expect(try PullRequest(query: []) == PullRequest())
        #expect(try PullRequest(query: [("cursor", ""), ("scopes", "")]) == PullRequest())
    }

    @Test func rejectsBadParameters() {
        let bad: [[(name: String, value: String)]] = [
            [("cursor", "%%%")], [("cursor", "eyJ0ZWFtLTEiOi0xfQ")], [("limit", "0")], [("limit", "5001")],
            [("limit", "ten")], [("wait", "31")], [("wait", "-1")], [("scopes", "a,,b")], [("scopes", "a,a")],
            [("scopes", "bad scope")], [("replica", "xyz")],
        ]
        for query in bad {
            #expect(throws: SyncProtocolError.self, "\(query)") { try PullRequest(query: query) }
            do {
                _ = try PullRequest(query: query)
            } catch {
                #expect(error.code == .requestInvalid)
            }
        }
    }

    @Test func syncRequestChecksItsPullHalf() throws {
        let replica = ReplicaID(high: 1, low: 2)
        #expect(try SyncRequest(replica: replica, events: []).pullRequest() == PullRequest())
        #expect(try SyncRequest(replica: replica, events: [], excludeOwn: true).pullRequest().exclude == replica)
        #expect(try SyncRequest(replica: replica, events: [], excludeOwn: false).pullRequest().exclude == nil)
        let excluding = PullRequest(exclude: replica)
        #expect(try PullRequest(query: excluding.queryItems) == excluding)
        #expect(throws: SyncProtocolError.self) {
            try SyncRequest(replica: replica, events: [], limit: 0).pullRequest()
        }
        #expect(throws: SyncProtocolError.self) {
            try SyncRequest(replica: replica, events: [], cursor: "!!").pullRequest()
        }
        #expect(throws: SyncProtocolError.self) {
            try SyncRequest(replica: replica, events: [], scopes: ["a", "a"]).pullRequest()
        }
    }
}
