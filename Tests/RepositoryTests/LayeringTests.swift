import Foundation
import SyncTestSupport
import Testing

/// The layering of the packages: generic packages (`Packages/Sync*`) never know the Notes domain, no file
/// reaches into another package's internals, and nothing shipped is built on test support. The domain plugs
/// into the generic packages, never the other way round, so that anyone can reuse them for a domain of their
/// own; and what an app or a deployment runs holds no code written only for tests.
@Suite(.onOwnThreads) struct LayeringTests {
    static let root = RepositoryLayoutTests.root

    /// The modules of the Notes reference domain.
    static let domainModules: Set<String> = ["NotesDomain", "NotesStore", "NotesServer"]

    /// Every package folder under `Packages/`, with the modules (folders of `Sources/`) it defines.
    static func packages() throws -> [String: Set<String>] {
        let folder = root.appendingPathComponent("Packages")
        var packages: [String: Set<String>] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) where !name.hasPrefix(".") {
            let sources = folder.appendingPathComponent(name).appendingPathComponent("Sources").path
            packages[name] = Set((try? FileManager.default.contentsOfDirectory(atPath: sources)) ?? [])
        }
        return packages
    }

    /// The Swift files below `path` (relative to the repository), as paths relative to the repository.
    static func swiftFiles(under path: String) -> [String] {
        let base = root.appendingPathComponent(path)
        guard let walker = FileManager.default.enumerator(atPath: base.path) else { return [] }
        return walker.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") && !$0.contains(".build") }
            .map { path + "/" + $0 }
    }

    /// The modules a Swift file imports, as `(module, testable)`, read as `ImportDeclarationTests` reads them.
    static func imports(of text: String) -> [(module: String, testable: Bool)] {
        ImportDeclarationTests.imports(in: text).map { ($0.module, $0.attributes.contains("@testable")) }
    }

    /// The violations of the rules in the files of `Packages/`, `Apps/`, `Tests/` and `Benchmarks/`.
    static func violations(readingWith read: (String) throws -> String) throws -> [String] {
        let packages = try packages()
        var owner: [String: String] = [:]
        for (package, modules) in packages { for module in modules { owner[module] = package } }
        var violations: [String] = []
        for top in ["Packages", "Apps", "Tests", "Benchmarks"] {
            for path in swiftFiles(under: top) {
                let text = try read(path)
                let components = path.split(separator: "/").map(String.init)
                let package = top == "Packages" ? components[1] : nil
                let generic = package.map { $0.hasPrefix("Sync") } ?? false
                for (module, testable) in imports(of: text) {
                    if generic && domainModules.contains(module) {
                        violations.append("\(path): a generic package imports the domain module \(module)")
                    }
                    if testable, let home = owner[module], home != package {
                        violations.append("\(path): @testable import \(module) reaches into package \(home)")
                    }
                }
                // Spelled in two parts so that this file does not match itself.
                if text.contains("@_" + "spi(") || text.contains("@_" + "private(") {
                    violations.append("\(path): uses another module's private interface")
                }
            }
        }
        for (package, _) in packages where package.hasPrefix("Sync") {
            let manifest = try read("Packages/\(package)/Package.swift")
            for name in ["NotesDomain", "NotesStore", "NotesServer"] where manifest.contains(name) {
                violations.append("Packages/\(package)/Package.swift: a generic package depends on \(name)")
            }
            if manifest.range(of: #"path:\s*"\.\./\.\./"#, options: .regularExpression) != nil {
                violations.append("Packages/\(package)/Package.swift: reaches outside Packages/")
            }
        }
        return violations.sorted()
    }

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    // MARK: - Test support

    /// The modules written for tests: SyncTestSupport and the testing products beside it. The benchmarks and
    /// the tests may use them; a shipped target may not.
    static let testSupportModules: Set<String> = [
        "SyncTestSupport", "SyncEventStoreTestSupport", "SyncEngineTesting", "SyncServerTesting",
    ]

    /// The shipped targets of `manifest` (the root's) that depend on or import a test-support module. Shipped
    /// is every target with its sources under `Packages/*/Sources` (a library an app links) or
    /// `Apps/*/Sources` (a program and its libraries), less the test-support modules themselves.
    static func testSupportInShippedTargets(
        manifest: ManifestConsistencyTests.Manifest, readingWith read: (String) throws -> String
    ) throws -> [String] {
        var violations: [String] = []
        for target in ImportDeclarationTests.targets(of: manifest, at: root)
        where !testSupportModules.contains(target.name) {
            let folder = ImportDeclarationTests.relativePath(of: target.folder, to: root)
            guard folder.wholeMatch(of: /(Packages|Apps)\/[^\/]+\/Sources\/.+/) != nil else { continue }
            for module in target.byName + target.products.map(\.name) where testSupportModules.contains(module) {
                violations.append("Package.swift: \(target.name), a shipped target, depends on \(module)")
            }
            for file in ImportDeclarationTests.swiftFiles(of: target) {
                let path = folder + "/" + file
                for declaration in ImportDeclarationTests.imports(in: try read(path))
                where testSupportModules.contains(declaration.module) {
                    violations.append(
                        "\(path):\(declaration.line): \(target.name), a shipped target, imports \(declaration.module)")
                }
            }
        }
        return violations
    }

    @Test func noShippedTargetDependsOnOrImportsTestSupport() async throws {
        let manifest = try await ManifestConsistencyTests.dump(packageAt: Self.root)
        let violations = try Self.testSupportInShippedTargets(manifest: manifest, readingWith: Self.read)
        #expect(violations.isEmpty, "\(violations.joined(separator: "\n"))")
    }

    /// The check fails on a shipped target's dependency on test support and on each shipped place's import
    /// of it, and leaves the test-support modules and the benchmarks alone.
    @Test func theTestSupportCheckCatchesWhatItClaims() async throws {
        let manifest = try await ManifestConsistencyTests.dump(packageAt: Self.root)
        var targets = ManifestConsistencyTests.list(manifest["targets"])
        let agent = try #require(targets.firstIndex { $0["name"] as? String == "sync-agent" })
        targets[agent]["dependencies"] =
            ManifestConsistencyTests.list(targets[agent]["dependencies"]) + [["byName": ["SyncTestSupport", NSNull()]]]
        var planted = manifest
        planted["targets"] = targets
        #expect(
            try Self.testSupportInShippedTargets(manifest: planted, readingWith: Self.read).contains {
                $0 == "Package.swift: sync-agent, a shipped target, depends on SyncTestSupport"
            })

        let imports: [String: (line: String, caught: Bool)] = [
            "Apps/SyncLoad/Sources/sync-load/SyncLoad.swift": ("import SyncTestSupport", true),
            "Apps/SyncFaultProxy/Sources/FaultProxy/FaultProxy.swift": ("@testable import SyncTestSupport", true),
            "Packages/SyncEngine/Sources/SyncEngine/SyncEngine.swift": ("import SyncEngineTesting", true),
            "Packages/NotesDomain/Sources/NotesServer/NotesServerDomain.swift": ("import SyncServerTesting", true),
            "Packages/SyncServer/Sources/SyncServerTesting/TestServer.swift": ("import SyncTestSupport", false),
            "Benchmarks/SyncBench/SyncBench.swift": ("import SyncEventStoreTestSupport", false),
        ]
        for (path, (line, caught)) in imports {
            let violations = try Self.testSupportInShippedTargets(manifest: manifest) { read in
                let text = try Self.read(read)
                return read == path ? line + "\n" + text : text
            }
            #expect(
                violations.contains { $0.hasPrefix(path + ":1:") } == caught,
                "planting `\(line)` in \(path): \(violations)")
        }
    }

    @Test func genericPackagesNeverKnowTheDomainAndNoPackageReachesIntoAnother() throws {
        let violations = try Self.violations(readingWith: Self.read)
        #expect(violations.isEmpty, "\(violations.joined(separator: "\n"))")
    }

    /// The check itself fails on each kind of violation it claims to catch.
    @Test func theCheckCatchesWhatItClaims() throws {
        let planted: [String: String] = [
            "Packages/SyncServer/Sources/SyncServer/Service/SyncServerApp.swift": "import NotesDomain",
            "Packages/SyncEngine/Sources/SyncEngine/SyncEngine.swift": "import NotesStore",
            "Packages/SyncServer/Tests/SyncServerTests/PushPullTests.swift": "@testable import NotesServer",
            "Packages/SyncEventStore/Tests/SyncEventStoreTests/EventStoreTests.swift": "@testable import SyncModels",
            "Tests/EndToEndTests/Stack.swift": "@testable import SyncServer",
            "Packages/SyncServer/Package.swift": #".package(path: "../NotesDomain")"#,
        ]
        for (path, line) in planted {
            let violations = try Self.violations { read in
                let text = try Self.read(read)
                return read == path ? line + "\n" + text : text
            }
            #expect(violations.contains { $0.hasPrefix(path) }, "planting `\(line)` in \(path) went unnoticed")
        }
    }
}
