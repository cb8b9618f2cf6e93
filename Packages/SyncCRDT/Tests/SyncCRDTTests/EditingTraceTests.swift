import EditingTraces
import Foundation
import SyncCRDT
import SyncModels
import Testing

/// Real editing histories (josephg/editing-traces, CC BY 4.0; Eg-walker conformance data) as oracles.
@Suite struct EditingTraceTests {
    @Test(arguments: EditingTraces.sequentialFiles.map(\.lastPathComponent))
    func sequentialTraceReplaysToItsEndContent(name: String) throws {
        let trace = try EditingTraces.sequential(
            at: EditingTraces.directory.appendingPathComponent("sequential").appendingPathComponent(name))
        let text = trace.replay()
        #expect(text.count == trace.endContent.unicodeScalars.count)
        #expect(text.text == trace.endContent, "\(name) replays to something else")
    }

    @Test func concurrentClownschoolMergesToItsEndContent() throws {
        let history = try EditingTraces.concurrent(
            at: EditingTraces.directory.appendingPathComponent("concurrent/clownschool.json.gz"))
        let operations = history.generateOperations()
        let merged = history.mergeAll(operations)
        #expect(merged.pendingCount == 0)
        #expect(merged.text == history.endContent)
    }

    @Test func everyConformanceCaseConvergesAndReproducesItsEndContent() throws {
        let cases = try EditingTraces.conformance(
            at: EditingTraces.directory.appendingPathComponent("conformance/conformance.json.gz"))
        #expect(cases.count == 1000)
        var exact = 0
        var converged = 0
        var firstMismatch: Int?
        for (index, history) in cases.enumerated() {
            let operations = history.generateOperations()
            let merged = history.mergeAll(operations)
            if merged.text == history.endContent {
                exact += 1
            } else if firstMismatch == nil {
                firstMismatch = index
            }
            converged += 1
        }
        print(
            "conformance: \(converged) converged, \(exact) exact of \(cases.count); first mismatch \(String(describing: firstMismatch))"
        )
        #expect(exact == cases.count)
    }
}
