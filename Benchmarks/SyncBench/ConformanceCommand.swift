import ArgumentParser
import EditingTraces
import Foundation
import SyncCRDT
import SyncTestSupport

/// `sync-bench conformance FILE`: the 1,000 Eg-walker conformance histories. Each case's operations are made
/// by replicas at their transactions' parent versions, then delivered to fresh replicas in `--orders` random
/// orders (with duplicates); a case converges when every order gives the same state as causal delivery, and is
/// exact when that text is the case's `endContent` (FugueMax with ties broken by agent). Exits nonzero unless
/// every case converges.
struct ConformanceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conformance",
        abstract: "Check convergence and exact FugueMax ordering on the Eg-walker conformance histories.")

    @Argument(help: "The conformance file, e.g. Packages/SyncCRDT/Data/editing-traces/conformance/conformance.json.gz.")
    var file: String

    @Option(help: "Random delivery orders tried per case.")
    var orders: Int = 3

    @Option(help: "Seed of the delivery orders.")
    var seed: UInt64 = 1

    struct Result: Codable {
        var cases: Int
        var converged: Int
        var exact: Int
        var orders_per_case: Int
        var seed: UInt64
        var milliseconds: Double
    }

    func run() async throws {
        let start = ContinuousClock.now
        let cases = try EditingTraces.conformance(at: URL(fileURLWithPath: file))
        var random = SplitMix64(seed: seed)
        var converged = 0
        var exact = 0
        var firstFailure: Int?
        for (index, history) in cases.enumerated() {
            let operations = history.generateOperations()
            let reference = history.mergeAll(operations)
            var agrees = reference.pendingCount == 0
            for _ in 0..<orders {
                var delivery = operations.flatMap { $0 }
                delivery += delivery.filter { _ in random.next() % 10 == 0 }
                delivery.shuffle(using: &random)
                var replica = FugueText()
                for operation in delivery { replica.apply(operation) }
                agrees = agrees && replica.pendingCount == 0 && replica == reference
            }
            if agrees { converged += 1 } else if firstFailure == nil { firstFailure = index }
            if reference.text == history.endContent { exact += 1 }
        }
        let result = Result(
            cases: cases.count, converged: converged, exact: exact, orders_per_case: orders, seed: seed,
            milliseconds: milliseconds(ContinuousClock.now - start))
        print(
            "conformance: \(result.cases) cases, \(converged) converged under \(orders) random delivery orders each, "
                + "\(exact) exactly reproduce endContent (\(String(format: "%.0f", result.milliseconds)) ms)")
        if let firstFailure { print("  first case that did not converge: \(firstFailure)") }
        print(String(decoding: try JSONEncoder.sortedKeys.encode(result), as: UTF8.self))
        guard converged == cases.count else { throw ExitCode(1) }
    }
}
