import Foundation
import SyncTestSupport
import Testing

/// An app outside the repository adds it the way Swift users add a package: by git URL and a version range
/// (`.package(url: "file://…/offline-sync", from: "0.4.0")`), then builds and runs a program that imports
/// `SyncEngine`, `SyncEventStore` and `SyncServer` and syncs two replicas through a server on real
/// PostgreSQL (`Tests/EndToEndTests/Consumer`).
///
/// The repository is the working tree as it is (what git tracks or would track), committed to a git
/// repository in `.build-consumer/` and tagged with a new version. The consumer builds there too, kept
/// between runs: the first build compiles the stack's dependencies once more (about 3.5 minutes on 2 cores),
/// later ones only what changed. `make test` runs this test on its own before the other suites, so that its build
/// does not compete with them for the cores.
@Suite struct ConsumerPackageTests {
    static let root = Stack.repositoryRoot

    @Test func anAppOutsideTheRepositoryBuildsAgainstItByURLAndSyncs() async throws {
        let work = Self.root.appendingPathComponent(".build-consumer")
        let repository = work.appendingPathComponent("offline-sync")
        let consumer = work.appendingPathComponent("consumer")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)

        // The repository as a git remote, the tree as it is committed on top of the last run's and tagged with
        // a new version (one repository kept between runs, so that the build's pins of earlier runs still
        // name commits it has; the app asks `from: 0.4.0` and resolves the newest tag).
        try? FileManager.default.removeItem(at: consumer)
        // SwiftPM's clone of the repository is dropped, or it would resolve the tags it fetched last time.
        let clones = work.appendingPathComponent("scratch/repositories")
        for name in (try? FileManager.default.contentsOfDirectory(atPath: clones.path)) ?? []
        where name.hasPrefix("offline-sync") {
            try FileManager.default.removeItem(at: clones.appendingPathComponent(name))
        }
        if !FileManager.default.fileExists(atPath: repository.appendingPathComponent(".git").path) {
            try FileManager.default.createDirectory(at: repository, withIntermediateDirectories: true)
            try Stack.run("/usr/bin/env", ["git", "init", "-q", repository.path])
        }
        for item in try FileManager.default.contentsOfDirectory(atPath: repository.path) where item != ".git" {
            try FileManager.default.removeItem(at: repository.appendingPathComponent(item))
        }
        try Stack.run(
            "/bin/sh",
            [
                "-c",
                "git -C \"$0\" ls-files -z --cached --others --exclude-standard | (cd \"$0\" && tar --null -T - -cf -) | tar -xf - -C \"$1\"",
                Self.root.path, repository.path,
            ])
        let version = "0.4.\(Int(Date().timeIntervalSince1970))"
        let git = ["-c", "user.name=consumer-test", "-c", "user.email=consumer-test@localhost", "-C", repository.path]
        try Stack.run("/usr/bin/env", ["git"] + git + ["add", "-A"])
        try Stack.run(
            "/usr/bin/env", ["git"] + git + ["commit", "-q", "--allow-empty", "-m", "offline-sync \(version)"])
        try Stack.run("/usr/bin/env", ["git"] + git + ["tag", version])

        // The app: its manifest names the repository by URL.
        try Stack.run(
            "/bin/cp", ["-R", Self.root.appendingPathComponent("Tests/EndToEndTests/Consumer").path, consumer.path])
        let manifestURL = consumer.appendingPathComponent("Package.swift")
        let manifest = try String(contentsOf: manifestURL, encoding: .utf8)
        #expect(manifest.contains("from: \"0.4.0\""))
        try manifest.replacingOccurrences(of: "OFFLINE_SYNC_URL", with: "file://\(repository.path)")
            .write(to: manifestURL, atomically: true, encoding: .utf8)

        let scratch = work.appendingPathComponent("scratch")
        let started = ContinuousClock.now
        // SwiftPM keeps a dependency at the version its last build checked out while that still satisfies the
        // range: `update` moves this one to the new tag, as an app's developer would.
        let update = try await Stack.runCapturingOffPool(
            "/usr/bin/env",
            [
                "swift", "package", "--package-path", consumer.path, "--scratch-path", scratch.path,
                "--disable-dependency-cache", "update", "offline-sync",
            ])
        try #require(update.status == 0, "swift package update failed:\n\(update.stdout)\n\(update.stderr)")
        let build = try await Stack.runCapturingOffPool(
            "/usr/bin/env",
            [
                "swift", "build", "--package-path", consumer.path, "--scratch-path", scratch.path,
                "--disable-dependency-cache", "--product", "TwoReplicas",
            ])
        let took = started.duration(to: .now)
        print("ConsumerPackageTests: the app built in \(took.formatted(.units(allowed: [.seconds])))")
        try #require(build.status == 0, "swift build of the consumer failed:\n\(build.stdout)\n\(build.stderr)")
        let resolved = try String(
            contentsOf: consumer.appendingPathComponent("Package.resolved"), encoding: .utf8)
        #expect(resolved.contains("\"version\" : \"\(version)\""), "the app did not resolve offline-sync at its tag")

        // Run it against a database of its own on the test PostgreSQL.
        let admin = try Stack.postgresURL()
        let name = "consumer_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16))"
        try Stack.run("/usr/bin/env", ["psql", admin, "-qc", "CREATE DATABASE \(name)"])
        defer {
            _ = try? Stack.run("/usr/bin/env", ["psql", admin, "-qc", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"])
        }
        var components = try #require(URLComponents(string: admin))
        components.path = "/\(name)"
        let files = try TemporaryDirectory()
        let run = try await Stack.runCapturingOffPool(
            scratch.appendingPathComponent("debug/TwoReplicas").path, [],
            environment: ["SYNC_DATABASE_URL": try #require(components.string), "CONSUMER_DIRECTORY": files.url.path])
        #expect(run.status == 0, "TwoReplicas failed:\n\(run.stdout)\n\(run.stderr)")
        #expect(run.stdout.contains("converged"))
    }
}
