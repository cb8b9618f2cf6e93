import EditingTraces
import Foundation
import SyncCRDT
import SyncModels
import SyncTestSupport
import Testing

/// Real editing histories (josephg/editing-traces, CC BY 4.0; Eg-walker conformance data) as oracles.
@Suite(.onOwnThreads) struct EditingTraceTests {
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

    /// Every case, delivered to fresh replicas in causal order and in two random orders with duplicates:
    /// all converge, and the text is the case's `endContent` (FugueMax with ties broken by agent).
    @Test func everyConformanceCaseConvergesAndReproducesItsEndContent() throws {
        let cases = try EditingTraces.conformance(
            at: EditingTraces.directory.appendingPathComponent("conformance/conformance.json.gz"))
        #expect(cases.count == 1000)
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededRandom(seed: seed)
        var exact = 0
        var converged = 0
        for (index, history) in cases.enumerated() {
            let operations = history.generateOperations()
            let reference = history.mergeAll(operations)
            var agrees = reference.pendingCount == 0
            for _ in 0..<2 {
                var delivery = operations.flatMap { $0 }
                delivery += delivery.filter { _ in random.chance(0.1) }
                delivery.shuffle(using: &random)
                var replica = FugueText()
                for operation in delivery { replica.apply(operation) }
                agrees = agrees && replica.pendingCount == 0 && replica == reference
            }
            if agrees { converged += 1 }
            if reference.text == history.endContent { exact += 1 }
            #expect(agrees, "case \(index) did not converge (seed \(seed))")
        }
        print("conformance: \(converged) of \(cases.count) converged, \(exact) reproduce endContent exactly")
        #expect(converged == cases.count)
        #expect(exact == cases.count)
    }
}
