import SyncModels
import SyncProtocol
import Testing

@Suite struct ReadmeExampleTests {
    /// The example of README.md, verbatim.
    @Test func readmeExample() throws {
        // README begins
        let codec = WireCodec()
        let replica = ReplicaID.random()
        let body = try codec.encode(PushRequest(replica: replica, events: []))
        let (wire, coding) = codec.compressIfWorthIt(body, acceptEncoding: "gzip")
        let decoded = try codec.decode(PushRequest.self, body: wire, coding: coding)
        assert(decoded.replica == replica)
        let pull = PullRequest(scopes: ["team-1"], limit: 500, wait: 30)
        print(pull.queryItems.map { "\($0.name)=\($0.value)" }.joined(separator: "&"))
        // README ends
        #expect(decoded.replica == replica)
    }
}
