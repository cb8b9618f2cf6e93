import Foundation
import SyncTestSupport
import Synchronization
import Testing

/// Every module a file imports is one its target declares: a target of the same package that it depends on,
/// or a target of a product it depends on (a product exposes the targets it lists, not what they depend on).
/// SwiftPM compiles a target with every module of its dependencies' graphs in reach, so an import of a module
/// that only comes along (NIOCore behind Hummingbird, a sibling target behind another) builds today, and
/// breaks when that dependency changes its own, or in an app that declares the target as it is declared here.
/// Read for the root manifest and the Tasks example's through `swift package dump-package`, with the
/// manifests of the packages they depend on (checked out in `.build/checkouts`).
@Suite(.onOwnThreads) struct ImportDeclarationTests {
    static let root = RepositoryLayoutTests.root

    typealias Manifest = ManifestConsistencyTests.Manifest

    /// The toolchain's and the system's modules, which no manifest declares.
    static let systemModules: Set<String> = [
        "Foundation", "FoundationEssentials", "FoundationNetworking", "Glibc", "Musl", "Darwin", "Dispatch",
        "Synchronization", "Observation", "Testing", "XCTest", "os", "_Concurrency", "Security",
    ]

    // MARK: - Reading imports

    /// An `import` declaration: its line (from 1), its attributes (`@testable`, `@_exported`…) and the module
    /// it imports (`Module` of `import struct Module.Type` or `import Module.Submodule`).
    struct Import: Equatable {
        var line: Int
        var attributes: [String]
        var module: String
    }

    static let accessModifiers: Set<String> = ["public", "package", "internal", "fileprivate", "private"]
    static let importKinds: Set<String> = ["typealias", "struct", "class", "enum", "protocol", "let", "var", "func"]

    /// The imports of a Swift file, wherever they are (under `#if canImport(…)` too); lines in multi-line
    /// string literals and block comments are not code and are skipped.
    static func imports(in text: String) -> [Import] {
        var found: [Import] = []
        var inString = false
        var inComment = false
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let delimiters = line.components(separatedBy: "\"\"\"").count - 1
            if inString || inComment {
                if inString && delimiters % 2 == 1 { inString = false }
                if inComment && line.contains("*/") { inComment = false }
                continue
            }
            if delimiters % 2 == 1 { inString = true }
            var words = line.split(whereSeparator: \.isWhitespace).map(String.init)[...]
            if words.first?.hasPrefix("/*") == true && !line.contains("*/") { inComment = true }
            var attributes: [String] = []
            while let first = words.first, first.hasPrefix("@") {
                attributes.append(first)
                words = words.dropFirst()
            }
            if let first = words.first, accessModifiers.contains(first) { words = words.dropFirst() }
            guard words.first == "import", words.count >= 2 else { continue }
            words = words.dropFirst()
            if words.count >= 2, let kind = words.first, importKinds.contains(kind) { words = words.dropFirst() }
            let module = words.first!.prefix { $0.isLetter || $0.isNumber || $0 == "_" }
            guard !module.isEmpty else { continue }
            found.append(Import(line: index + 1, attributes: attributes, module: String(module)))
        }
        return found
    }

    // MARK: - Reading manifests

    /// A target of a manifest: where its sources are, what it leaves out of them, and what it depends on.
    struct Target {
        var name: String
        var folder: URL
        var excluded: [String]
        /// Dependencies by name (`"SyncModels"`, `.target(name:)`): a target of the same package, or else a
        /// product of that name.
        var byName: [String]
        /// `.product(name:package:)` dependencies.
        var products: [(name: String, package: String)]
    }

    static func targets(of manifest: Manifest, at package: URL) -> [Target] {
        ManifestConsistencyTests.list(manifest["targets"]).compactMap { target in
            guard let name = target["name"] as? String, let type = target["type"] as? String else { return nil }
            let path = target["path"] as? String ?? "\(type == "test" ? "Tests" : "Sources")/\(name)"
            var byName: [String] = []
            var products: [(name: String, package: String)] = []
            for dependency in ManifestConsistencyTests.list(target["dependencies"]) {
                for (kind, value) in dependency {
                    guard let parts = value as? [Any], let module = parts.first as? String else { continue }
                    if kind == "product", parts.count > 1, let package = parts[1] as? String {
                        products.append((module, package))
                    } else {
                        byName.append(module)
                    }
                }
            }
            return Target(
                name: name, folder: package.appendingPathComponent(path),
                excluded: target["exclude"] as? [String] ?? [], byName: byName, products: products)
        }
    }

    /// The folders of a manifest's dependencies, by each name a product dependency may give them (the
    /// package's identity, and the name a path dependency is known by), lowercased. A package named by URL is
    /// the one checked out under its repository's name in the first of `checkouts` that has it.
    static func dependencyFolders(of manifest: Manifest, checkouts: [URL]) -> [String: URL] {
        var folders: [String: URL] = [:]
        for dependency in ManifestConsistencyTests.list(manifest["dependencies"]) {
            for (kind, value) in dependency {
                guard let description = (value as? [[String: Any]])?.first,
                    let identity = description["identity"] as? String
                else { continue }
                var folder: URL?
                if kind == "fileSystem", let path = description["path"] as? String {
                    folder = URL(fileURLWithPath: path)
                } else if let location = description["location"] as? [String: Any],
                    let url = ManifestConsistencyTests.list(location["remote"]).first?["urlString"] as? String
                {
                    var name = String(url.split(separator: "/").last ?? "")
                    if name.hasSuffix(".git") { name.removeLast(4) }
                    folder = checkouts.map { $0.appendingPathComponent(name) }.first {
                        FileManager.default.fileExists(atPath: $0.appendingPathComponent("Package.swift").path)
                    }
                }
                guard let folder else { continue }
                folders[identity.lowercased()] = folder
                if let name = description["nameForTargetDependencyResolutionOnly"] as? String {
                    folders[name.lowercased()] = folder
                }
            }
        }
        return folders
    }

    /// The manifests of the packages at `folders`, dumped two at a time.
    static func dumpManifests(_ folders: Set<URL>) async throws -> [URL: Manifest] {
        let folders = Array(folders)
        var data: [Int: Data] = [:]
        for start in stride(from: 0, to: folders.count, by: 2) {
            await withTaskGroup(of: (Int, Data?).self) { group in
                for index in start..<min(start + 2, folders.count) {
                    group.addTask { (index, await dumpOutput(folders[index])) }
                }
                for await (index, output) in group { data[index] = output }
            }
        }
        var manifests: [URL: Manifest] = [:]
        for (index, folder) in folders.enumerated() {
            guard let output = data[index], let manifest = try JSONSerialization.jsonObject(with: output) as? Manifest
            else {
                throw ManifestConsistencyTests.ManifestError(
                    description: "swift package dump-package failed in \(folder.path)")
            }
            manifests[folder] = manifest
        }
        return manifests
    }

    /// `swift package dump-package` of the package at `folder`, in a scratch folder of its own; nil when it fails.
    static func dumpOutput(_ folder: URL) async -> Data? {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("dump-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        guard
            let (status, data) = try? await RepositoryLayoutTests.output([
                "swift", "package", "--package-path", folder.path, "--scratch-path", scratch.path, "dump-package",
            ]), status == 0
        else { return nil }
        return data
    }

    // MARK: - The check

    /// The imports of modules their targets do not declare, in the package at `package` (its manifest
    /// `manifest`), as `path:line: …` with paths relative to `base`. `dependencies` holds the manifests of the
    /// packages in `folders` (`dependencyFolders`).
    static func undeclaredImports(
        package: URL, manifest: Manifest, folders: [String: URL], dependencies: [URL: Manifest], base: URL
    ) throws -> [String] {
        let targets = targets(of: manifest, at: package)
        let ownTargets = Set(targets.map(\.name))
        // Every library product of every dependency, for dependencies by name that are no target here.
        var productsByName: [String: [String]] = [:]
        for folder in Set(folders.values) {
            for (name, members) in ManifestConsistencyTests.libraries(dependencies[folder] ?? [:]) {
                productsByName[name] = members
            }
        }
        var violations: [String] = []
        for target in targets {
            var declared = systemModules.union([target.name])
            for name in target.byName {
                if ownTargets.contains(name) {
                    declared.insert(name)
                } else {
                    declared.formUnion(productsByName[name] ?? [name])
                }
            }
            for (name, packageName) in target.products {
                guard let folder = folders[packageName.lowercased()], let dependency = dependencies[folder] else {
                    throw ManifestConsistencyTests.ManifestError(
                        description: "\(target.name) depends on \(name) of \(packageName), which is not checked out")
                }
                guard let members = ManifestConsistencyTests.libraries(dependency)[name] else {
                    throw ManifestConsistencyTests.ManifestError(
                        description: "\(target.name) depends on \(name), which \(packageName) does not export")
                }
                declared.formUnion(members)
            }
            for file in swiftFiles(of: target) {
                let text = try String(contentsOf: target.folder.appendingPathComponent(file), encoding: .utf8)
                let path = relativePath(of: target.folder.appendingPathComponent(file), to: base)
                for declaration in imports(in: text) where !declared.contains(declaration.module) {
                    violations.append(
                        "\(path):\(declaration.line): \(target.name) imports \(declaration.module), which it does "
                            + "not declare")
                }
            }
        }
        return violations
    }

    /// The Swift files of a target, relative to its folder, less what it excludes.
    static func swiftFiles(of target: Target) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: target.folder.path) else { return [] }
        return walker.compactMap { $0 as? String }.filter { file in
            file.hasSuffix(".swift") && !target.excluded.contains { file == $0 || file.hasPrefix($0 + "/") }
        }.sorted()
    }

    static func relativePath(of file: URL, to base: URL) -> String {
        let path = file.standardizedFileURL.path
        let prefix = base.standardizedFileURL.path + "/"
        return path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path
    }

    /// The undeclared imports of the packages at `packages`, with `checkouts` the folders their dependencies
    /// named by URL are checked out in, and paths relative to `base`.
    static func undeclaredImports(packages: [URL], checkouts: [URL], base: URL) async throws -> [String] {
        var manifests = try await dumpManifests(Set(packages))
        var folders: [URL: [String: URL]] = [:]
        for package in packages {
            folders[package] = dependencyFolders(of: manifests[package]!, checkouts: checkouts)
        }
        let missing = Set(folders.values.flatMap(\.values)).subtracting(manifests.keys)
        await manifests.merge(try dumpManifests(missing)) { first, _ in first }
        var violations: [String] = []
        for package in packages {
            violations += try undeclaredImports(
                package: package, manifest: manifests[package]!, folders: folders[package]!,
                dependencies: manifests, base: base)
        }
        return violations
    }

    @Test func everyImportIsOfAModuleItsTargetDeclares() async throws {
        let tasks = Self.root.appendingPathComponent("Examples/Tasks")
        let violations = try await Self.undeclaredImports(
            packages: [Self.root, tasks],
            checkouts: [".build/checkouts", "Examples/Tasks/.build/checkouts"].map {
                Self.root.appendingPathComponent($0)
            },
            base: Self.root)
        #expect(violations.isEmpty, "\(violations.joined(separator: "\n"))")
    }

    /// Every form of `import` is read, and only code: not a line of a string literal or a comment.
    @Test func importsAreReadInEveryForm() {
        let text = [
            "import Foundation",
            "@testable import SyncServer",
            "@_exported import SyncTestSupport",
            "public import struct NIOCore.ByteBuffer",
            "@preconcurrency internal import Logging.Logger  // a comment",
            "#if canImport(Glibc)",
            "    import Glibc",
            "#endif",
            "let text = \"\"\"",
            "    import InAString",
            "    \"\"\"",
            "/* import InAComment",
            "   import InAComment */",
            "// import InALineComment",
            "let importer = \"import InALiteral\"",
            "@usableFromInline",
        ].joined(separator: "\n")
        #expect(
            Self.imports(in: text) == [
                Import(line: 1, attributes: [], module: "Foundation"),
                Import(line: 2, attributes: ["@testable"], module: "SyncServer"),
                Import(line: 3, attributes: ["@_exported"], module: "SyncTestSupport"),
                Import(line: 4, attributes: [], module: "NIOCore"),
                Import(line: 5, attributes: ["@preconcurrency"], module: "Logging"),
                Import(line: 7, attributes: [], module: "Glibc"),
            ])
    }

    /// A package with imports its targets do not declare, in a temporary folder: a module that a product's
    /// target depends on (not the product's own), a sibling target not depended on (under `#if`), a module
    /// declared nowhere, and a test importing what only its dependency depends on. Each is reported with its
    /// file and line; the declared imports and the line in a string literal are not.
    @Test func theCheckReportsAnImportItsTargetDoesNotDeclare() async throws {
        let directory = try TemporaryDirectory()
        let manifest = [
            "// swift-tools-version: 6.2",
            "import PackageDescription",
            "let package = Package(",
            "    name: \"Fixture\",",
            "    dependencies: [.package(path: \"Dependency\")],",
            "    targets: [",
            "        .target(name: \"App\", dependencies: [\"Base\", .product(name: \"Kit\", package: \"Dependency\")]),",
            "        .target(name: \"Base\"),",
            "        .target(name: \"Other\"),",
            "        .testTarget(name: \"AppTests\", dependencies: [\"App\"]),",
            "    ]",
            ")",
        ]
        let dependencyManifest = [
            "// swift-tools-version: 6.2",
            "import PackageDescription",
            "let package = Package(",
            "    name: \"Dependency\",",
            "    products: [.library(name: \"Kit\", targets: [\"Kit\"])],",
            "    targets: [.target(name: \"Kit\", dependencies: [\"Core\"]), .target(name: \"Core\")]",
            ")",
        ]
        let app = [
            "import Foundation",
            "import Base",
            "@_exported import Kit",
            "public import struct Kit.Widget",
            "import Core",
            "#if canImport(Other)",
            "    import Other",
            "#endif",
            "@testable import Nowhere",
            "let text = \"\"\"",
            "    import InAString",
            "    \"\"\"",
        ]
        let tests = ["@testable import App", "import Testing", "import Base"]
        let files = [
            "Package.swift": manifest, "Dependency/Package.swift": dependencyManifest,
            "Sources/App/App.swift": app, "Sources/Base/Base.swift": ["public struct Base {}"],
            "Sources/Other/Other.swift": ["public struct Other {}"],
            "Dependency/Sources/Kit/Kit.swift": ["import Core", "public struct Widget {}"],
            "Dependency/Sources/Core/Core.swift": ["public struct Core {}"],
            "Tests/AppTests/AppTests.swift": tests,
        ]
        for (path, lines) in files {
            let url = directory.url.appendingPathComponent(path)
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: url)
        }
        let violations = try await Self.undeclaredImports(packages: [directory.url], checkouts: [], base: directory.url)
        #expect(
            violations == [
                "Sources/App/App.swift:5: App imports Core, which it does not declare",
                "Sources/App/App.swift:7: App imports Other, which it does not declare",
                "Sources/App/App.swift:9: App imports Nowhere, which it does not declare",
                "Tests/AppTests/AppTests.swift:3: AppTests imports Base, which it does not declare",
            ])
    }
}
