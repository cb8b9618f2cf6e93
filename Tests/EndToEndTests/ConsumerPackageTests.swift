import Foundation
import SyncTestSupport
import Testing

/// An app outside the repository adds it the way Swift users add a package: by git URL and a version range
/// (`.package(url: "file://…/offline-sync", from: "0.4.0")`). The app is the Tasks example
/// (`Examples/Tasks`, which names the repository by path) with its manifest naming it by URL instead: it is
/// built with its tests, and its tests run, the end-to-end one syncing two task clients through its own
/// server on real PostgreSQL.
///
/// The repository is the working tree as it is (what git tracks or would track), committed to a git
/// repository in `.build-consumer/` and tagged with a new version. The app builds in `SYNC_CONSUMER_SCRATCH`
/// when set, else in `.build-consumer/scratch`, kept between runs. `make test` runs this test last, on its own
/// and outside `swift test` (which holds the repository's `.build` while it runs), with
/// `SYNC_CONSUMER_SCRATCH` set to the repository's `.build`: the app's build then finds the dependencies it
/// shares with the repository's own build (SwiftNIO, both BoringSSLs, GRDB, PostgresNIO, Hummingbird, …)
/// already compiled, with the same versions (the app starts from the repository's `Package.resolved`), and
/// compiles the stack's modules and its own. In a scratch of its own, a first build compiles all of them once
/// more (about 10 minutes on 2 cores). The stack's modules it compiles from its checkout replace the
/// repository's in `.build`: the next build of the repository compiles them again.
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
        let scratch =
            ProcessInfo.processInfo.environment["SYNC_CONSUMER_SCRATCH"].map { URL(fileURLWithPath: $0) }
            ?? work.appendingPathComponent("scratch")
        // SwiftPM's clone of the repository is dropped, or it would resolve the tags it fetched last time.
        let clones = scratch.appendingPathComponent("repositories")
        for name in (try? FileManager.default.contentsOfDirectory(atPath: clones.path)) ?? []
        where name.hasPrefix("offline-sync") {
            try FileManager.default.removeItem(at: clones.appendingPathComponent(name))
        }
        if !FileManager.default.fileExists(atPath: repository.appendingPathComponent(".git").path) {
            try FileManager.default.createDirectory(at: repository, withIntermediateDirectories: true)
            try await Stack.run("/usr/bin/env", ["git", "init", "-q", repository.path])
        }
        for item in try FileManager.default.contentsOfDirectory(atPath: repository.path) where item != ".git" {
            try FileManager.default.removeItem(at: repository.appendingPathComponent(item))
        }
        try await Stack.run(
            "/bin/sh",
            [
                "-c",
                "git -C \"$0\" ls-files -z --cached --others --exclude-standard | (cd \"$0\" && tar --null -T - -cf -) | tar -xf - -C \"$1\"",
                Self.root.path, repository.path,
            ])
        let version = "0.4.\(Int(Date().timeIntervalSince1970))"
        let git = ["-c", "user.name=consumer-test", "-c", "user.email=consumer-test@localhost", "-C", repository.path]
        try await Stack.run("/usr/bin/env", ["git"] + git + ["add", "-A"])
        try await Stack.run(
            "/usr/bin/env", ["git"] + git + ["commit", "-q", "--allow-empty", "-m", "offline-sync \(version)"])
        try await Stack.run("/usr/bin/env", ["git"] + git + ["tag", version])

        // The app: the Tasks example as git tracks it, its manifest naming the repository by URL.
        try FileManager.default.createDirectory(at: consumer, withIntermediateDirectories: true)
        try await Stack.run(
            "/bin/sh",
            [
                "-c",
                "git -C \"$0\" ls-files -z --cached --others --exclude-standard -- Examples/Tasks | (cd \"$0\" && tar --null -T - -cf -) | tar -xf - -C \"$1\" --strip-components=2",
                Self.root.path, consumer.path,
            ])
        let manifestURL = consumer.appendingPathComponent("Package.swift")
        let manifest = try String(contentsOf: manifestURL, encoding: .utf8)
        let byPath = ".package(name: \"offline-sync\", path: \"../..\")"
        try #require(manifest.contains(byPath), "Examples/Tasks/Package.swift no longer names the repository by path")
        try manifest.replacingOccurrences(
            of: byPath, with: ".package(url: \"file://\(repository.path)\", from: \"0.4.0\")"
        ).write(to: manifestURL, atomically: true, encoding: .utf8)
        // The versions the repository's own build resolved, for the dependencies both share (an app keeps
        // its pins; this one starts from the stack's). `update` below adds the repository's new tag.
        let pins = Self.root.appendingPathComponent("Package.resolved")
        if FileManager.default.fileExists(atPath: pins.path) {
            try FileManager.default.copyItem(at: pins, to: consumer.appendingPathComponent("Package.resolved"))
        }

        // Built without debug information: it changes nothing of what is compiled or whether it builds, and
        // is a good part of a build that compiles the stack's dependencies a second time on a clean clone
        // (CI's case every time). The index store stays: on Linux the tests are found through it.
        let lean = ["-debug-info-format", "none"]
        let started = ContinuousClock.now
        // SwiftPM keeps a dependency at the version its last build checked out while that still satisfies the
        // range: `update` moves this one to the new tag, as an app's developer would.
        let update = try await Stack.runCapturing(
            "/usr/bin/env",
            [
                "swift", "package", "--package-path", consumer.path, "--scratch-path", scratch.path,
                "--disable-dependency-cache", "update", "offline-sync",
            ])
        try #require(update.status == 0, "swift package update failed:\n\(update.stdout)\n\(update.stderr)")
        let build = try await Stack.runCapturing(
            "/usr/bin/env",
            [
                "swift", "build", "--package-path", consumer.path, "--scratch-path", scratch.path,
                "--disable-dependency-cache", "--build-tests",
            ] + lean)
        let took = started.duration(to: .now)
        print("ConsumerPackageTests: the app built in \(took.formatted(.units(allowed: [.seconds])))")
        try #require(build.status == 0, "swift build of the consumer failed:\n\(build.stdout)\n\(build.stderr)")
        let resolved = try String(
            contentsOf: consumer.appendingPathComponent("Package.resolved"), encoding: .utf8)
        #expect(resolved.contains("\"version\" : \"\(version)\""), "the app did not resolve offline-sync at its tag")

        // Its tests, the end-to-end one on a database of its own on the test PostgreSQL.
        let test = try await Stack.runCapturing(
            "/usr/bin/env",
            [
                "swift", "test", "--package-path", consumer.path, "--scratch-path", scratch.path,
                "--disable-dependency-cache", "--skip-build",
            ] + lean,
            environment: ["SYNC_DATABASE_URL": try Stack.postgresURL()])
        #expect(test.status == 0, "the Tasks tests failed:\n\(test.stdout)\n\(test.stderr)")
        #expect((test.stdout + test.stderr).contains("EndToEndTests"), "the end-to-end test did not run")
    }
}
