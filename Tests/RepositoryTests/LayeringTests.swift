import Foundation
import Testing

/// The layering of the packages: generic packages (`Packages/Sync*`) never know the Notes domain, and no
/// file reaches into another package's internals. The domain plugs into the generic packages, never the
/// other way round, so that anyone can reuse them for a domain of their own.
@Suite struct LayeringTests {
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

    /// The modules a Swift file imports, as `(module, testable)`.
    static func imports(of text: String) -> [(module: String, testable: Bool)] {
        text.split(separator: "\n").compactMap { line in
            var words = line.split(separator: " ").map(String.init)
            var testable = false
            while let first = words.first, first.hasPrefix("@") {
                testable = testable || first == "@testable"
                words.removeFirst()
            }
            guard words.count >= 2, words[0] == "import" else { return nil }
            // `import struct Module.Type` names the module after the kind.
            let name =
                words.count >= 3 && ["struct", "class", "enum", "func", "protocol"].contains(words[1])
                ? words[2] : words[1]
            return (String(name.split(separator: ".")[0]), testable)
        }
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
