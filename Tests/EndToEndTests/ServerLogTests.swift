import Foundation
import Testing

/// `sync-server` with `SYNC_LOG_FORMAT=json`: a real server, devices and curl on loopback, behind nginx too.
/// Its log is read back whole: every line must be JSON, each request must have its access line under the id
/// its response carried, and nothing a device or a client sent (titles, payloads, the token) may be in it.
@Suite(.serialized) struct ServerLogTests {
    static let title = "Planted title 5c1e-kumquat"
    static let body = "planted body text 9d2f-persimmon"
    static let payloadText = "planted payload 47ab-tamarind"

    @Test func aJSONLogHasAnAccessLinePerRequestUnderItsIDAndNothingTheDevicesSent() async throws {
        let stack = try await Stack(serverEnvironment: ["SYNC_LOG_FORMAT": "json", "SYNC_LOG_LEVEL": "info"])
        let token = try await stack.token(scopes: ["team-1"])
        let a = stack.agent("a", token: token)
        let b = stack.agent("b", token: token)
        let note = try await a("note", "create", "--scope", "team-1", "--title", Self.title, "--body", Self.body)
        try await a("sync")
        try await b("sync")
        #expect(try await b.state()[note]?.title == Self.title)

        // A push of our own, without an id: the server makes one and answers with it.
        let replica = "6d2c1f0e9a8b4c7d8e9f001122334455"
        let push = """
            {"replica":"\(replica)","events":[{"id":"018f4e3a-5b7c-7d8e-9f00-112233445566","scope":"team-1",\
            "stream":"probe:1","streamVersion":1,"type":"probe.text","schemaVersion":1,\
            "hlc":"0000018f4e3a5b7c:0003:6d2c1f0e9a8b4c7d","dot":{"replica":"\(replica)","counter":1},\
            "payload":{"text":"\(Self.payloadText)"}}]}
            """
        let pushed = try await curl(
            stack.serverURL + "/v1/push", ["-X", "POST", "-H", "Content-Type: application/json", "--data", push],
            token: token)
        #expect(pushed.status == 200)
        #expect(pushed.body.contains(#""status":"accepted""#))
        let pushID = try #require(pushed.headers["x-request-id"])

        // A pull that names its id, as a proxy would: the same id comes back.
        let pulled = try await curl(
            stack.serverURL + "/v1/pull?scopes=team-1&replica=\(replica)", ["-H", "X-Request-Id: e2e-pull-1"],
            token: token)
        #expect(pulled.status == 200)
        #expect(pulled.body.contains(Self.payloadText))
        #expect(pulled.headers["x-request-id"] == "e2e-pull-1")

        // Errors carry it too; an unusable id is replaced.
        let refused = try await curl(
            stack.serverURL + "/v1/pull?scopes=team-1", ["-H", "X-Request-Id: e2e-401"], token: nil)
        #expect(refused.status == 401)
        #expect(refused.headers["x-request-id"] == "e2e-401")
        let unusable = String(repeating: "z", count: 300)
        let replaced = try await curl(stack.serverURL + "/healthz", ["-H", "X-Request-Id: \(unusable)"], token: nil)
        let madeID = try #require(replaced.headers["x-request-id"])
        #expect(madeID != unusable && !madeID.isEmpty)

        // Through nginx (deploy/nginx/sync.conf): the client's id is kept; without one, nginx gives its own,
        // and the server's log has it too.
        let nginx = try await Nginx(upstreams: [stack.port], directory: stack.directory)
        let proxied = try await curl(nginx.url + "/healthz", ["-H", "X-Request-Id: e2e-nginx-1"], token: nil)
        #expect(proxied.headers["x-request-id"] == "e2e-nginx-1")
        let proxiedWithout = try await curl(nginx.url + "/readyz", [], token: nil)
        let nginxID = try #require(proxiedWithout.headers["x-request-id"])

        // The live stream, answered below the router, has its id and access line too. curl stops reading it
        // after a few seconds, longer when a loaded machine has not answered by then.
        var stream = try await curl(
            stack.serverURL + "/v1/live?scopes=team-1", ["-N", "-m", "2", "-H", "X-Request-Id: e2e-live-1"],
            token: token)
        for seconds in [4, 8, 16, 32] where stream.headers["x-request-id"] == nil {
            stream = try await curl(
                stack.serverURL + "/v1/live?scopes=team-1",
                ["-N", "-m", String(seconds), "-H", "X-Request-Id: e2e-live-1"], token: token)
        }
        #expect(stream.headers["x-request-id"] == "e2e-live-1")

        // The log, once the requests' lines are in.
        var lines: [[String: Any]] = []
        var text = ""
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            text = try String(contentsOf: stack.directory.appendingPathComponent("server.log"), encoding: .utf8)
            lines = try Self.parse(text)
            if Self.access(lines, id: "e2e-live-1") != nil && Self.access(lines, id: nginxID) != nil { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(lines.count > 10)
        for line in lines {
            #expect(line["time"] is String && line["level"] is String && line["message"] is String)
            #expect(line["label"] is String && line["source"] is String)
        }

        let pushLine = try #require(Self.access(lines, id: pushID))
        #expect(pushLine["level"] as? String == "info")
        #expect(pushLine["http.method"] as? String == "POST")
        #expect(pushLine["http.route"] as? String == "/v1/push")
        #expect(pushLine["http.status"] as? Int == 200)
        #expect(pushLine["http.duration_ms"] is Double || pushLine["http.duration_ms"] is Int)
        #expect(pushLine["http.request.bytes"] as? Int == push.utf8.count)
        #expect((pushLine["http.response.bytes"] as? Int ?? 0) > 0)
        #expect(pushLine["sync.replica"] as? String == replica)

        let pullLine = try #require(Self.access(lines, id: "e2e-pull-1"))
        #expect(pullLine["http.route"] as? String == "/v1/pull")
        #expect(pullLine["sync.replica"] as? String == replica)
        #expect(Self.access(lines, id: "e2e-401")?["http.status"] as? Int == 401)
        #expect(Self.access(lines, id: madeID)?["http.route"] as? String == "/healthz")
        #expect(Self.access(lines, id: "e2e-nginx-1")?["http.route"] as? String == "/healthz")
        #expect(Self.access(lines, id: nginxID)?["http.route"] as? String == "/readyz")
        #expect(Self.access(lines, id: "e2e-live-1")?["http.route"] as? String == "/v1/live")
        // One access line per request.
        #expect(
            lines.filter { $0["hb.request.id"] as? String == pushID && $0["message"] as? String == "request" }.count
                == 1)
        // The devices' syncs were logged with their routes.
        let routes = Set(lines.compactMap { $0["http.route"] as? String })
        #expect(routes.contains("/v1/sync") || routes.contains("/v1/push"))
        // A device's journal names each push and pull by its request's id: one line on the device leads to
        // the server's line.
        let journal = try await a("log", "--kind", "push", "--kind", "pull")
        let ids = journal.matches(of: /\(request ([0-9a-f]{32})\)/).map { String($0.output.1) }
        #expect(!ids.isEmpty, "\(journal)")
        for id in ids {
            let line = Self.access(lines, id: id)
            #expect(line?["http.route"] as? String == "/v1/sync" && line?["http.status"] as? Int == 200, "\(id)")
        }

        for secret in [Self.title, Self.body, Self.payloadText, token, unusable] {
            #expect(!text.contains(secret), "the log holds \(secret.prefix(20))…")
        }
        #expect(!text.contains("Bearer"))
    }

    /// Each line of `text` as a JSON object; a line that is not one fails the test.
    static func parse(_ text: String) throws -> [[String: Any]] {
        try text.split(separator: "\n", omittingEmptySubsequences: true).map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
            return try #require(object as? [String: Any], "not a JSON object: \(line)")
        }
    }

    /// The access line of the request with `id`.
    static func access(_ lines: [[String: Any]], id: String) -> [String: Any]? {
        lines.first { $0["hb.request.id"] as? String == id && $0["message"] as? String == "request" }
    }

    /// curl's answer: status, headers (names lowercased) and body. A stream cut by `-m` counts as answered.
    func curl(_ url: String, _ arguments: [String], token: String?) async throws -> (
        status: Int, headers: [String: String], body: String
    ) {
        let headersFile = FileManager.default.temporaryDirectory.appendingPathComponent("curl-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: headersFile) }
        var all = ["-s", "-D", headersFile.path] + arguments + [url]
        if let token { all += ["-H", "Authorization: Bearer \(token)"] }
        let result = try await Stack.runCapturing("/usr/bin/env", ["curl"] + all)
        let head = (try? String(contentsOf: headersFile, encoding: .utf8)) ?? ""
        var status = 0
        var headers: [String: String] = [:]
        for line in head.split(separator: "\r\n") {
            if line.hasPrefix("HTTP/") {
                status = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
            } else if let colon = line.firstIndex(of: ":") {
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...]
                    .trimmingCharacters(in: .whitespaces)
            }
        }
        return (status, headers, result.stdout)
    }
}
