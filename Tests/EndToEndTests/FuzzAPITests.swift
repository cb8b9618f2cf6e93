import Foundation
import SyncProtocol
import SyncTestSupport
import Testing

/// The HTTP API held to its own OpenAPI document (issue 48): scripts/fuzz-api.sh runs schemathesis, seeded and
/// with every check on, against this build's sync-server on a database of its own. Requests the document
/// allows must be accepted and requests it forbids refused, with the protocol's error body; every answer must
/// match its documented status, headers and schema, the live stream's events included; no 5xx.
@Suite struct FuzzAPITests {
    /// Whether schemathesis can be imported; scripts/bootstrap.sh installs it with pip.
    static let schemathesisInstalled: Bool = {
        let result = try? ChildProcess.run(
            "/usr/bin/env", ["python3", "-c", "import schemathesis"], environment: ProcessInfo.processInfo.environment)
        return result?.status == 0
    }()

    @Test(
        .enabled(
            if: schemathesisInstalled,
            "schemathesis is not installed: scripts/bootstrap.sh installs it (python3 -m pip install schemathesis)"))
    func theServerAnswersAsItsOpenAPIDocumentSays() async throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-\(UUID())")
        defer { try? FileManager.default.removeItem(at: out) }
        let result = try await Stack.runCapturing(
            "/usr/bin/env", ["bash", Stack.repositoryRoot.appendingPathComponent("scripts/fuzz-api.sh").path],
            environment: ["FUZZ_BIN": Stack.productsDirectory.path, "FUZZ_OUT": out.path])
        #expect(result.status == 0, "\(result.stdout.suffix(8000))\n\(result.stderr.suffix(2000))")

        // It fuzzed the whole document: every operation (but the document itself) has its test case in the
        // report, and none failed or errored.
        let report = try String(contentsOf: out.appendingPathComponent("junit.xml"), encoding: .utf8)
        let tested = Set(
            report.components(separatedBy: "<testcase ").dropFirst().compactMap { element -> String? in
                guard let start = element.range(of: "name=\"") else { return nil }
                return String(element[start.upperBound...].prefix { $0 != "\"" })
            })
        let expected = Set(OpenAPIDocument.operations).subtracting(["GET /openapi.json"])
        // The stateful phase's scenarios are one test case of their own when the document has links.
        #expect(
            tested.subtracting(["Stateful tests"]) == expected,
            "tested \(tested.sorted()); the document has \(expected.sorted())")
        #expect(!report.contains("<failure") && !report.contains("<error"), "\(report.prefix(4000))")
        // Seeded, so that a failure can be run again (the script prints how).
        #expect(result.stdout.contains("Seed: "), "\(result.stdout.suffix(2000))")
    }
}
