import Foundation
import SyncTestSupport
import Testing

/// The root manifest exports every library of `Packages/` (an app reaches them by one URL), and each package
/// folder keeps a manifest of its own for working on it alone. The two must describe the same libraries:
/// the same products and targets, the same dependencies, the same version ranges, the root's target paths
/// pointing at the package's sources. Compared through `swift package dump-package`, SwiftPM's own reading.
@Suite(.onOwnThreads) struct ManifestConsistencyTests {
    static let root = RepositoryLayoutTests.root

    /// A manifest as `swift package dump-package` prints it.
    typealias Manifest = [String: Any]

    static func dump(packageAt path: URL) async throws -> Manifest {
        // A scratch path of its own: `swift test` holds the lock of the repository's `.build`.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("dump-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let (status, data) = try await RepositoryLayoutTests.output([
            "swift", "package", "--package-path", path.path, "--scratch-path", scratch.path, "dump-package",
        ])
        guard status == 0, let manifest = try JSONSerialization.jsonObject(with: data) as? Manifest
        else { throw ManifestError(description: "swift package dump-package failed in \(path.path)") }
        return manifest
    }

    struct ManifestError: Error, CustomStringConvertible {
        var description: String
    }

    /// The package folders under `Packages/`.
    static func packageNames() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Packages").path)
            .filter { !$0.hasPrefix(".") }.sorted()
    }

    // MARK: - Reading a dump

    static func list(_ value: Any?) -> [[String: Any]] { value as? [[String: Any]] ?? [] }

    /// Library products: name → target names.
    static func libraries(_ manifest: Manifest) -> [String: [String]] {
        var result: [String: [String]] = [:]
        for product in list(manifest["products"]) {
            guard let type = product["type"] as? [String: Any], type["library"] != nil,
                let name = product["name"] as? String
            else { continue }
            result[name] = product["targets"] as? [String] ?? []
        }
        return result
    }

    /// Remote dependencies: URL → requirement, as SwiftPM reads it (e.g. `range 7.10.0..<8.0.0`).
    static func remoteDependencies(_ manifest: Manifest) -> [String: String] {
        var result: [String: String] = [:]
        for dependency in list(manifest["dependencies"]) {
            for control in list(dependency["sourceControl"]) {
                let location = control["location"] as? [String: Any]
                guard let url = list(location?["remote"]).first?["urlString"] as? String else { continue }
                result[url] = requirement(control["requirement"])
            }
        }
        return result
    }

    static func requirement(_ value: Any?) -> String {
        guard let requirement = value as? [String: Any], let (kind, detail) = requirement.first else { return "?" }
        if let ranges = detail as? [[String: Any]], let range = ranges.first {
            return "\(kind) \(range["lowerBound"] ?? "?")..<\(range["upperBound"] ?? "?")"
        }
        return "\(kind) \(detail)"
    }

    /// Remote package identities (`swift-nio`) by URL, to name product dependencies the same way in both.
    static func identities(_ manifest: Manifest) -> Set<String> {
        var result: Set<String> = []
        for dependency in list(manifest["dependencies"]) {
            for control in list(dependency["sourceControl"]) {
                if let identity = control["identity"] as? String { result.insert(identity) }
            }
        }
        return result
    }

    /// A non-test target: its kind, its path (nil for the default), its dependencies.
    struct Target: Equatable, CustomStringConvertible {
        var type: String
        var path: String?
        var dependencies: Set<String>
        var description: String { "\(type) at \(path ?? "(default)") depending on \(dependencies.sorted())" }
    }

    /// Non-test targets by name. A dependency on a product of a remote package is `Product@package`; any other
    /// (a target of the same package, or a product of a package in `Packages/`) is the module's name, since
    /// the root declares those modules as targets of its own.
    static func targets(_ manifest: Manifest) -> [String: Target] {
        let remote = identities(manifest)
        var result: [String: Target] = [:]
        for target in list(manifest["targets"]) {
            guard let name = target["name"] as? String, let type = target["type"] as? String, type != "test"
            else { continue }
            var dependencies: Set<String> = []
            for dependency in list(target["dependencies"]) {
                for (kind, value) in dependency {
                    guard let parts = value as? [Any], let module = parts.first as? String else { continue }
                    if kind == "product", parts.count > 1, let package = parts[1] as? String,
                        remote.contains(package.lowercased())
                    {
                        dependencies.insert("\(module)@\(package.lowercased())")
                    } else {
                        dependencies.insert(module)
                    }
                }
            }
            result[name] = Target(type: type, path: target["path"] as? String, dependencies: dependencies)
        }
        return result
    }

    // MARK: - The comparison

    /// What differs between the root manifest and the manifests of the package folders (`packages`: folder
    /// name → its manifest). Empty when they agree.
    static func differences(root: Manifest, packages: [String: Manifest]) -> [String] {
        var differences: [String] = []
        let rootLibraries = libraries(root)
        let rootTargets = targets(root)
        let rootDependencies = remoteDependencies(root)
        var packageLibraries: Set<String> = []
        for (folder, manifest) in packages.sorted(by: { $0.key < $1.key }) {
            let place = "Packages/\(folder)/Package.swift"
            for (name, members) in libraries(manifest).sorted(by: { $0.key < $1.key }) {
                packageLibraries.insert(name)
                if let rootMembers = rootLibraries[name] {
                    if Set(rootMembers) != Set(members) {
                        differences.append("\(place): product \(name) has targets \(members), the root \(rootMembers)")
                    }
                } else {
                    differences.append("\(place): product \(name) is not a product of the root manifest")
                }
            }
            for (name, target) in targets(manifest).sorted(by: { $0.key < $1.key }) {
                let expectedPath = "Packages/\(folder)/\(target.path ?? "Sources/\(name)")"
                guard let rootTarget = rootTargets[name] else {
                    differences.append("\(place): target \(name) is not declared in the root manifest")
                    continue
                }
                let expected = Target(type: target.type, path: expectedPath, dependencies: target.dependencies)
                if rootTarget != expected {
                    differences.append("\(place): target \(name) is \(expected); in the root, \(rootTarget)")
                }
            }
            for (url, requirement) in remoteDependencies(manifest).sorted(by: { $0.key < $1.key }) {
                if let rootRequirement = rootDependencies[url] {
                    if rootRequirement != requirement {
                        differences.append("\(place): \(url) \(requirement); the root asks \(rootRequirement)")
                    }
                } else {
                    differences.append("\(place): \(url) is not a dependency of the root manifest")
                }
            }
        }
        for name in Set(rootLibraries.keys).subtracting(packageLibraries).sorted() {
            differences.append("Package.swift: library \(name) is not a product of any package in Packages/")
        }
        // Everything an app can depend on comes with a version range it can share.
        for (url, requirement) in rootDependencies.sorted(by: { $0.key < $1.key })
        where !requirement.hasPrefix("range ") {
            differences.append("Package.swift: \(url) is pinned (\(requirement)); use a version range (from:)")
        }
        for (folder, manifest) in packages.sorted(by: { $0.key < $1.key }) {
            for (url, requirement) in remoteDependencies(manifest).sorted(by: { $0.key < $1.key })
            where !requirement.hasPrefix("range ") {
                differences.append("Packages/\(folder)/Package.swift: \(url) is pinned (\(requirement))")
            }
        }
        return differences
    }

    static func manifests() async throws -> (root: Manifest, packages: [String: Manifest]) {
        var packages: [String: Manifest] = [:]
        for name in try packageNames() {
            packages[name] = try await dump(packageAt: root.appendingPathComponent("Packages/\(name)"))
        }
        return await (try dump(packageAt: root), packages)
    }

    @Test func theRootExportsEveryPackageLibraryAsThePackagesDeclareThem() async throws {
        let (root, packages) = try await Self.manifests()
        let differences = Self.differences(root: root, packages: packages)
        #expect(differences.isEmpty, "\(differences.joined(separator: "\n"))")
        // The products the README promises an app.
        let libraries = Self.libraries(root)
        for name in [
            "SyncModels", "SyncCRDT", "SyncStorage", "SyncEventStore", "SyncProtocol", "SyncEngine",
            "SyncEngineHTTPClient", "SyncEngineTesting", "SyncServer", "SyncServerTesting", "SyncCompression",
            "NotesDomain", "NotesStore", "NotesServer",
        ] {
            #expect(libraries[name] != nil, "the root manifest does not export \(name)")
        }
    }

    /// Every manifest of the repository declares the same minimum toolchain, the one scripts/bootstrap.sh
    /// checks and the README states.
    @Test func everyManifestDeclaresTheMinimumToolchain() throws {
        let bootstrap = try String(
            contentsOf: Self.root.appendingPathComponent("scripts/bootstrap.sh"), encoding: .utf8)
        let minimum = try #require(
            bootstrap.split(separator: "\n").first { $0.hasPrefix("minimum_swift=") }?.split(separator: "=").last)
        var manifests = ["Package.swift", "Examples/Tasks/Package.swift"]
        manifests += try Self.packageNames().map { "Packages/\($0)/Package.swift" }
        for path in manifests {
            let text = try String(contentsOf: Self.root.appendingPathComponent(path), encoding: .utf8)
            #expect(
                text.hasPrefix("// swift-tools-version: \(minimum)\n"), "\(path) does not declare tools \(minimum)")
        }
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.contains("Swift \(minimum) or later"), "README.md does not state Swift \(minimum) or later")
    }

    /// The comparison notices each kind of difference it claims to.
    @Test func theComparisonCatchesWhatItClaims() async throws {
        let (root, packages) = try await Self.manifests()
        #expect(Self.differences(root: root, packages: packages).isEmpty)

        // A dependency added to a package's target but not to the root's.
        var engine = try #require(packages["SyncEngine"])
        var engineTargets = Self.list(engine["targets"])
        let index = try #require(engineTargets.firstIndex { $0["name"] as? String == "SyncEngine" })
        var dependencies = Self.list(engineTargets[index]["dependencies"])
        dependencies.append(["byName": ["SyncCRDT", NSNull()]])
        engineTargets[index]["dependencies"] = dependencies
        engine["targets"] = engineTargets
        var planted = packages
        planted["SyncEngine"] = engine
        #expect(Self.differences(root: root, packages: planted).contains { $0.contains("target SyncEngine") })

        // A product only the package exports.
        var models = try #require(packages["SyncModels"])
        models["products"] =
            Self.list(models["products"]) + [
                ["name": "SyncModelsExtra", "targets": ["SyncModels"], "type": ["library": ["automatic"]]]
            ]
        planted = packages
        planted["SyncModels"] = models
        #expect(Self.differences(root: root, packages: planted).contains { $0.contains("SyncModelsExtra") })

        // Another version range in a package than in the root, and a pin.
        var storage = try #require(packages["SyncStorage"])
        var dependencyList = Self.list(storage["dependencies"])
        var control = Self.list(dependencyList[0]["sourceControl"])
        control[0]["requirement"] = ["exact": ["7.10.0"]]
        dependencyList[0]["sourceControl"] = control
        storage["dependencies"] = dependencyList
        planted = packages
        planted["SyncStorage"] = storage
        let found = Self.differences(root: root, packages: planted)
        #expect(found.contains { $0.contains("the root asks") } && found.contains { $0.contains("is pinned") })
    }
}
