import Foundation
import SyncModels
import SyncProtocol
import SyncServer
import SyncServerTesting
import SyncTestSupport
import Testing

/// The README's custom domain is this test target's `ReadmeExample.swift`, and it serves for real.
@Suite struct ReadmeExampleTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()

    /// The lines between the markers of `ReadmeExample.swift`, and the README's first Swift block after the
    /// heading "Serving your own domain".
    static func texts() throws -> (example: String, readme: String) {
        let source = try String(contentsOf: folder.appendingPathComponent("ReadmeExample.swift"), encoding: .utf8)
        let lines = source.components(separatedBy: "\n")
        let begin = try #require(lines.firstIndex(of: "// README example begins"))
        let end = try #require(lines.firstIndex(of: "// README example ends"))
        let readme = try String(
            contentsOf: folder.appendingPathComponent("../../README.md").standardizedFileURL, encoding: .utf8)
        let section = try #require(readme.range(of: "## Serving your own domain"))
        let rest = readme[section.upperBound...]
        let open = try #require(rest.range(of: "```swift\n"))
        let close = try #require(rest[open.upperBound...].range(of: "\n```"))
        return (lines[(begin + 1)..<end].joined(separator: "\n"), String(rest[open.upperBound..<close.lowerBound]))
    }

    @Test func theReadmeShowsExactlyThisExample() throws {
        let (example, readme) = try Self.texts()
        #expect(readme == example)
        #expect(example.components(separatedBy: "\n").count <= 30)
    }

    @Test func theExampleDomainServesAgainstPostgreSQL() async throws {
        try await TestServer.run(domain: TodoDomain()) { server in
            let list = EventFixtures.stream("todo")
            let added = EventFixtures.event(
                scope: "home", stream: list, type: "todo.added", payload: ["title": "Buy milk"])
            let untitled = EventFixtures.event(scope: "home", stream: list, type: "todo.added", payload: ["title": ""])
            // Two devices tick the same to-do offline, both at version 1: commutative, so both are accepted.
            let done = EventFixtures.event(scope: "home", stream: list, version: 1, type: "todo.done")
            let doneElsewhere = EventFixtures.event(scope: "home", stream: list, version: 1, type: "todo.done")
            let results = try await server.push([added, untitled, done, doneElsewhere], scopes: ["home"])
            #expect(results.map(\.status) == [.accepted, .rejected, .accepted, .accepted])
            #expect(results[1].code == .validationFailed && results[1].message == "a to-do's title is 1-100 characters")
            #expect(results.compactMap(\.seq) == [1, 2, 3])
            // Types outside the domain's commutative ones keep optimistic concurrency.
            let renamed = EventFixtures.event(scope: "home", stream: "list:1", version: 1, type: "list.renamed")
            let stale = EventFixtures.event(scope: "home", stream: "list:1", version: 1, type: "list.renamed")
            let versioned = try await server.push([renamed, stale], scopes: ["home"])
            #expect(versioned[1].code == .conflictVersion)
            let page = try await server.pull(PullRequest(), scopes: ["home"])
            #expect(page.events.map(\.id) == [added.id, done.id, doneElsewhere.id, renamed.id])
        }
    }
}
