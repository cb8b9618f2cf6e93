import Foundation
import Testing

/// Checks of the repository itself: the layout users and CI rely on, and the docker-compose file.
@Suite struct RepositoryLayoutTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func exists(_ path: String) -> Bool {
        FileManager.default.fileExists(atPath: root.appendingPathComponent(path).path)
    }

    @Test func topLevelLayout() {
        for path in [
            "Packages", "Tests", "docker-compose.yml", "Makefile", "README.md", ".ci/run", "scripts",
            ".gitignore", "Package.swift", ".swift-format",
        ] {
            #expect(Self.exists(path), "\(path) is missing")
        }
    }

    @Test func everyPackageStandsAlone() throws {
        let packages = try FileManager.default.contentsOfDirectory(
            atPath: Self.root.appendingPathComponent("Packages").path)
        #expect(packages.contains("SyncModels") && packages.contains("SyncStorage"))
        for package in packages where !package.hasPrefix(".") {
            for part in ["Package.swift", "Sources", "Tests", "README.md"] {
                #expect(Self.exists("Packages/\(package)/\(part)"), "Packages/\(package)/\(part) is missing")
            }
        }
    }

    @Test func gitignoreKeepsBuildOutputOut() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent(".gitignore"), encoding: .utf8)
        for entry in [".build*", "Package.resolved", ".run/"] {
            #expect(text.split(separator: "\n").contains { $0 == entry }, "\(entry) not ignored")
        }
    }

    @Test func ciRunsMakeTest() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent(".ci/run"), encoding: .utf8)
        #expect(text.contains("make test"))
    }

    /// No Docker engine runs here; `docker-compose config -q` validates the file without one.
    @Test func dockerComposeFileIsValid() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "docker-compose", "-f", Self.root.appendingPathComponent("docker-compose.yml").path,
            "config", "-q",
        ]
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        process.waitUntilExit()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 0, "docker-compose config: \(message)")
    }
}
