import Foundation
import SyncTestSupport
import Testing

/// Every package README's example is code a test runs: the README's Swift block (less its imports) is the
/// body between `// README begins` and `// README ends` (or `// README example begins` / `ends`) of a test in the package's `Tests/` folder, the same
/// but for white space and line breaks.
@Suite(.onOwnThreads) struct ReadmeExamplesTests {
    static let root = RepositoryLayoutTests.root

    /// The code between the markers (or the README's first Swift block), without imports and white space.
    static func normalized(_ lines: some Sequence<Substring>) -> String {
        lines.filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("import ") }
            .joined().filter { !$0.isWhitespace }
    }

    static func readmeExample(_ text: String) -> String? {
        guard let start = text.range(of: "```swift\n"),
            let end = text.range(of: "```", range: start.upperBound..<text.endIndex)
        else { return nil }
        return normalized(text[start.upperBound..<end.lowerBound].split(separator: "\n"))
    }

    static func testedExamples(in folder: URL) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: folder.path) else { return [] }
        var examples: [String] = []
        for case let path as String in walker where path.hasSuffix(".swift") {
            guard let text = try? String(contentsOf: folder.appendingPathComponent(path), encoding: .utf8) else {
                continue
            }
            // A whole file's example (a type and functions) is marked `// README example begins`.
            for marker in ["README", "README example"] {
                guard let start = text.range(of: "// \(marker) begins\n"),
                    let end = text.range(of: "// \(marker) ends", range: start.upperBound..<text.endIndex)
                else { continue }
                examples.append(normalized(text[start.upperBound..<end.lowerBound].split(separator: "\n")))
            }
        }
        return examples
    }

    @Test func everyPackageReadmeExampleIsRunByATest() throws {
        let packages = try FileManager.default.contentsOfDirectory(
            atPath: Self.root.appendingPathComponent("Packages").path
        ).filter { !$0.hasPrefix(".") }
        #expect(packages.count >= 10)
        for package in packages.sorted() {
            let readme = try String(
                contentsOf: Self.root.appendingPathComponent("Packages/\(package)/README.md"), encoding: .utf8)
            guard let example = Self.readmeExample(readme) else {
                Issue.record("Packages/\(package)/README.md has no Swift example")
                continue
            }
            let tested = Self.testedExamples(in: Self.root.appendingPathComponent("Packages/\(package)/Tests"))
            #expect(
                tested.contains(example),
                "Packages/\(package)/README.md: its example is not the body of a test between README markers")
        }
    }

    @Test func theComparisonIgnoresLayoutButNotCode() {
        let readme = "x\n```swift\nimport A\nlet a = f(1,\n  2)\n```\n"
        #expect(Self.readmeExample(readme) == Self.normalized(["let a = f(1, 2)"]))
        #expect(Self.readmeExample(readme) != Self.normalized(["let a = f(1, 3)"]))
    }
}
