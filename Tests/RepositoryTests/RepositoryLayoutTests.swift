import Foundation
import SyncTestSupport
import Testing

/// Checks of the repository itself: the layout users and CI rely on, and the docker-compose file.
@Suite(.onOwnThreads) struct RepositoryLayoutTests {
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

    /// A package's tests live in its `Tests/` folder and are declared once, in the root manifest that runs
    /// them all with one build; no package manifest declares them a second time with other dependencies.
    @Test func everyTestTargetIsDeclaredOnce() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let packages = try FileManager.default.contentsOfDirectory(
            atPath: Self.root.appendingPathComponent("Packages").path)
        for package in packages where !package.hasPrefix(".") {
            let own = try String(
                contentsOf: Self.root.appendingPathComponent("Packages/\(package)/Package.swift"), encoding: .utf8)
            #expect(!own.contains(".testTarget("), "Packages/\(package)/Package.swift declares a test target")
            let tests = Self.root.appendingPathComponent("Packages/\(package)/Tests").path
            for target in (try? FileManager.default.contentsOfDirectory(atPath: tests)) ?? []
            where !target.hasPrefix(".") {
                let path = "path: \"Packages/\(package)/Tests/\(target)\""
                #expect(
                    manifest.components(separatedBy: path).count == 2,
                    "Packages/\(package)/Tests/\(target) is not declared exactly once in the root Package.swift")
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
    @Test func dockerComposeFileIsValid() async throws {
        let result = try await ChildProcess.runOnThread(
            "/usr/bin/env",
            ["docker-compose", "-f", Self.root.appendingPathComponent("docker-compose.yml").path, "config", "-q"],
            environment: ProcessInfo.processInfo.environment)
        let message = String(decoding: result.stderr, as: UTF8.self)
        #expect(result.status == 0, "docker-compose config: \(message)")
    }

    /// Runs `arguments` through `/usr/bin/env` to its end: its exit status and standard output (standard
    /// error is dropped). Waits on a thread of its own: `swift package dump-package` takes seconds, and a
    /// test holding a thread of the concurrency pool that long stalls every async test of the process.
    static func output(_ arguments: [String]) async throws -> (status: Int32, data: Data) {
        let result = try await ChildProcess.runOnThread(
            "/usr/bin/env", arguments, environment: ProcessInfo.processInfo.environment)
        return (result.status, result.stdout)
    }

    /// `output` on the calling thread, for a quick command where nothing can wait (a static property's
    /// first value).
    static func outputBlocking(_ arguments: [String]) throws -> (status: Int32, data: Data) {
        let result = try ChildProcess.run("/usr/bin/env", arguments, environment: ProcessInfo.processInfo.environment)
        return (result.status, result.stdout)
    }

    /// `docker compose --profile load up` runs the stack under load: sync-load and two agents are in the
    /// `load` profile, so a plain `up` leaves them out. (docker-compose 1.x lists every service in `config`,
    /// so the test reads each service's profiles from the normalized file.)
    @Test func dockerComposeLoadProfileAddsTheLoad() async throws {
        let (status, data) = try await Self.output([
            "docker-compose", "-f", Self.root.appendingPathComponent("docker-compose.yml").path, "config",
        ])
        #expect(status == 0)
        // Services are the two-space-indented keys under `services:`; a profile list follows `profiles:`.
        var profiles: [String: [String]] = [:]
        var section = ""
        var service: String?
        var inProfiles = false
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init) {
            if !line.hasPrefix(" ") {
                section = line
                continue
            }
            guard section == "services:" else { continue }
            if line.hasPrefix("  ") && !line.hasPrefix("   ") {
                service = line.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: ":", with: "")
                profiles[service!] = []
                inProfiles = false
            } else if line.trimmingCharacters(in: .whitespaces) == "profiles:" {
                inProfiles = true
            } else if inProfiles, let service, line.trimmingCharacters(in: .whitespaces).hasPrefix("- ") {
                profiles[service]!.append(String(line.trimmingCharacters(in: .whitespaces).dropFirst(2)))
            } else {
                inProfiles = false
            }
        }
        #expect(profiles["postgres"] == [] && profiles["sync-server"] == [])
        for name in ["sync-load", "sync-agent-alice", "sync-agent-bob"] {
            #expect(profiles[name] == ["load"], "\(name): \(profiles[name] ?? [])")
        }
    }
}
