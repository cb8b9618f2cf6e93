import Foundation
import SyncTestSupport
import Testing

/// The repository stands alone: `git clone` and `make test` need nothing beside the clone. No source,
/// script, test, manifest or document reads or cites a path outside the repository (the editing traces the
/// tests replay are in `Packages/SyncCRDT/Data/editing-traces`).
@Suite(.onOwnThreads) struct SelfContainedTests {
    static let root = RepositoryLayoutTests.root

    /// Files the check reads: what git tracks or would track, less archived benchmark reports (they quote
    /// the runs they record) and data files.
    static func files() async throws -> [String] {
        let (_, data) = try await RepositoryLayoutTests.output([
            "git", "-C", root.path, "ls-files", "--cached", "--others", "--exclude-standard",
        ])
        let readable = [".swift", ".sh", ".md", ".yml", ".yaml", ".conf", ".json", ".toml", ".txt"]
        let named = ["Makefile", "Dockerfile", "run", ".gitignore", ".dockerignore", ".swift-format"]
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init).filter { path in
            guard !path.hasPrefix("Benchmarks/results/"), !path.contains("/Data/") else { return false }
            let name = path.split(separator: "/").last.map(String.init) ?? path
            return named.contains(name) || readable.contains { name.hasSuffix($0) }
        }
    }

    /// Places outside any clone: the folder beside the repository that development machines have, absolute
    /// paths of one machine, and sections of a design document that is not in the repository.
    /// The folder beside the repository, spelled in parts so that this file does not name it.
    static let beside = ".." + "/" + "shared"

    static let outsideMarkers = [
        beside, "shared" + "/data/", "shared" + "/vendor/", "/work/", "/home/", "/Users/", "DESIGN " + "§",
    ]

    /// The violations in `text`, the contents of the file at `path` (relative to the repository).
    static func violations(in text: String, at path: String) -> [String] {
        var found: [String] = []
        for marker in outsideMarkers where text.contains(marker) {
            found.append("\(path): names \(marker), outside the repository")
        }
        // A relative path climbing out of the repository from the file's own folder.
        let folder = path.split(separator: "/").dropLast().count
        let pattern = /(?:\.\.\/)+/
        for match in text.matches(of: pattern) {
            let climbs = match.output.count / 3
            if climbs > folder {
                found.append("\(path): \(match.output)… climbs out of the repository")
                break
            }
        }
        return found
    }

    @Test func nothingReadsOrCitesAPathOutsideTheRepository() async throws {
        let files = try await Self.files()
        #expect(files.count > 300, "git ls-files listed only \(files.count) files")
        var violations: [String] = []
        for path in files where path != "Tests/RepositoryTests/SelfContainedTests.swift" {
            guard let text = try? String(contentsOf: Self.root.appendingPathComponent(path), encoding: .utf8)
            else { continue }
            violations += Self.violations(in: text, at: path)
        }
        #expect(violations.isEmpty, "\(violations.joined(separator: "\n"))")
    }

    @Test func theEditingTracesAreInTheRepository() {
        for path in [
            "sequential/seph-blog1.json.gz", "concurrent/clownschool.json.gz", "conformance/conformance.json.gz",
            "README.md",
        ] {
            let url = Self.root.appendingPathComponent("Packages/SyncCRDT/Data/editing-traces/\(path)")
            #expect(FileManager.default.fileExists(atPath: url.path), "\(path) is missing")
        }
    }

    /// The check notices each kind of path it claims to.
    @Test func theCheckCatchesWhatItClaims() {
        let planted = [
            ("scripts/bench.sh", "traces=\"$root/" + Self.beside + "/data/editing-traces\""),
            ("Packages/SyncCRDT/Sources/EditingTraces/EditingTrace.swift", #"let url = "/work/shared/x""#),
            ("Packages/SyncEngine/Package.swift", #".package(path: "../../../elsewhere")"#),
            ("Makefile", "include ../../common.mk"),
        ]
        for (path, line) in planted {
            #expect(!Self.violations(in: line, at: path).isEmpty, "`\(line)` in \(path) went unnoticed")
        }
        #expect(
            Self.violations(in: #".package(path: "../SyncModels")"#, at: "Packages/SyncEngine/Package.swift").isEmpty)
    }
}
