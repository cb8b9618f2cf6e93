import Foundation
import SyncTestSupport
import Testing

/// A figure quoted from a benchmark run points at the run's report, and the report is in the repository:
/// every path into `Benchmarks/results/` that a Markdown document names, written out or as a relative
/// link, exists. The run reports themselves are not read (they quote the runs they compare with).
@Suite(.onOwnThreads) struct BenchmarkResultsReferenceTests {
    static let root = RepositoryLayoutTests.root
    static let results = "Benchmarks/results/"

    /// The Markdown files git tracks or would track, less the run reports.
    static func documents() async throws -> [String] {
        let (_, data) = try await RepositoryLayoutTests.output([
            "git", "-C", root.path, "ls-files", "--cached", "--others", "--exclude-standard", "*.md",
        ])
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
            .filter { !$0.hasPrefix(results) }
    }

    /// The paths into `Benchmarks/results/` that the document at `path` names, relative to the repository,
    /// with their lines:
    /// - `Benchmarks/results/<name>…` written out, in any document;
    /// - `results/<name>…` written out in a document of `Benchmarks/`, which names its own folder so;
    /// - a relative link whose target, read from the document's folder, is in `Benchmarks/results/`.
    ///
    /// A name is letters, digits, `_ . -`; placeholders (`<date>-<commit>`) are not names.
    static func citedResults(in text: String, at path: String) -> [(line: Int, path: String)] {
        let folder = (path as NSString).deletingLastPathComponent
        var cited: [(line: Int, path: String)] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            for match in line.matches(of: /[A-Za-z0-9_.\/-]*results\/[A-Za-z0-9_.\/-]*[A-Za-z0-9_-]/) {
                let written = String(match.output)
                if let start = written.range(of: results) {
                    cited.append((number + 1, String(written[start.lowerBound...])))
                } else if written.hasPrefix("results/") && folder == "Benchmarks" {
                    cited.append((number + 1, "Benchmarks/" + written))
                }
            }
            for match in line.matches(of: /\]\(([^)\s#]+)/) {
                let target = String(match.output.1)
                guard !target.contains("://"), !target.hasPrefix("mailto:") else { continue }
                let resolved = URL(fileURLWithPath: "/" + folder).appendingPathComponent(target).standardized.path
                let relative = resolved.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
                if relative.hasPrefix(results) { cited.append((number + 1, relative)) }
            }
        }
        return cited
    }

    /// What the document at `path` names in `Benchmarks/results/` that `exists` does not find, as
    /// `path:line: cited`.
    static func missing(in text: String, at path: String, exists: (String) -> Bool) -> [String] {
        citedResults(in: text, at: path).filter { !exists($0.path) }.map { "\(path):\($0.line): \($0.path)" }
    }

    static func exists(_ path: String) -> Bool {
        FileManager.default.fileExists(atPath: root.appendingPathComponent(path).path)
    }

    @Test func everyCitedResultExists() async throws {
        let documents = try await Self.documents()
        #expect(documents.contains("README.md") && documents.contains("Benchmarks/HISTORY.md"))
        var cited = 0
        var missing: [String] = []
        for path in documents {
            guard let text = try? String(contentsOf: Self.root.appendingPathComponent(path), encoding: .utf8)
            else { continue }
            cited += Self.citedResults(in: text, at: path).count
            missing += Self.missing(in: text, at: path, exists: Self.exists)
        }
        // Guards against a check that finds nothing to check: README.md alone cites four results.
        #expect(cited >= 20, "only \(cited) citations of Benchmarks/results/ found")
        #expect(missing.isEmpty, "cited results that are not in the repository:\n\(missing.joined(separator: "\n"))")
    }

    /// The check finds each way a document names a result, and reports the ones missing.
    @Test func theCheckCatchesWhatItClaims() {
        let planted = [
            ("README.md", "[full report](Benchmarks/results/2026-01-01-0000000000/report.md)"),
            ("README.md", "![chart](Benchmarks/results/2026-01-01-0000000000/latency.svg)"),
            ("Packages/SyncServer/README.md", "([report](../../Benchmarks/results/2026-01-01-0000000000/report.md))"),
            ("docs/SCALING.md", "the run in `Benchmarks/results/2026-01-01-0000000000-citus`."),
            ("Benchmarks/HISTORY.md", "one run (`results/2026-01-01-0000000000-storage`)"),
            ("Benchmarks/HISTORY.md", "[report](results/2026-01-01-0000000000/report.md)"),
        ]
        for (path, line) in planted {
            let missing = Self.missing(in: "text\n" + line + "\n", at: path, exists: Self.exists)
            #expect(
                missing.count >= 1 && missing.allSatisfy { $0.hasPrefix("\(path):2: Benchmarks/results/2026-01-01-") },
                "`\(line)` in \(path): \(missing)")
        }
        // Placeholders, the folder itself and results of other folders are not citations of a run.
        for line in [
            "It writes `Benchmarks/results/<date>-<commit>/report.md` into `Benchmarks/results/`.",
            "`cp Benchmarks/results/<run>/results.json Benchmarks/results/baseline.json`",
            "the load's own `results/summary.json`",
        ] {
            #expect(Self.missing(in: line, at: "README.md", exists: Self.exists).isEmpty, "`\(line)` was reported")
        }
        let copy = "`cp Benchmarks/results/<run>/results.json Benchmarks/results/baseline.json`"
        #expect(Self.citedResults(in: copy, at: "README.md").map(\.path) == ["Benchmarks/results/baseline.json"])
    }
}
