import Foundation
import Glibc
import SyncTestSupport
import SyncToolSupport
import Testing

@Suite struct ChildProcessTests {
    static let environment = ProcessInfo.processInfo.environment

    @Test func runReturnsTheStatusAndBothOutputs() throws {
        let result = try ChildProcess.run(
            "/bin/sh", ["-c", "echo out; echo err >&2; exit 3"], environment: Self.environment)
        #expect(result.status == 3)
        #expect(String(decoding: result.stdout, as: UTF8.self) == "out\n")
        #expect(String(decoding: result.stderr, as: UTF8.self) == "err\n")
    }

    /// A child writing megabytes to both outputs finishes: neither pipe is left unread while the other is.
    @Test func largeOutputsOnBothPipesDoNotBlock() throws {
        let result = try ChildProcess.run(
            "/bin/sh", ["-c", "head -c 3000000 /dev/zero; head -c 3000000 /dev/zero >&2"],
            environment: Self.environment)
        #expect(result.status == 0)
        #expect(result.stdout.count == 3_000_000 && result.stderr.count == 3_000_000)
    }

    @Test func theEnvironmentIsTheOneGivenAndStandardInputIsEmpty() throws {
        let result = try ChildProcess.run(
            "/bin/sh", ["-c", "echo \"$ONLY\"; cat"], environment: ["ONLY": "this", "PATH": "/usr/bin:/bin"])
        #expect(String(decoding: result.stdout, as: UTF8.self) == "this\n")
    }

    /// A descriptor of this process that does not close on exec stays out of the child.
    @Test func theChildInheritsNoOtherDescriptor() throws {
        let directory = try TemporaryDirectory()
        let descriptor = open(directory.path("open"), O_WRONLY | O_CREAT, 0o644)
        try #require(descriptor > 2)
        defer { close(descriptor) }
        let result = try ChildProcess.run(
            "/bin/sh", ["-c", "test -e /proc/self/fd/\(descriptor) && echo inherited || echo closed"],
            environment: Self.environment)
        #expect(String(decoding: result.stdout, as: UTF8.self) == "closed\n")
    }

    @Test func itRunsInTheDirectoryGiven() throws {
        let directory = try TemporaryDirectory()
        let result = try ChildProcess.run(
            "/bin/sh", ["-c", "pwd -P"], environment: Self.environment, directory: directory.url.path)
        let expected = directory.url.resolvingSymlinksInPath().path
        #expect(String(decoding: result.stdout, as: UTF8.self) == expected + "\n")
    }

    @Test func aMissingProgramIsAnError() {
        #expect(throws: ChildProcessError.self) {
            try ChildProcess.run("/nonexistent/program", [], environment: Self.environment)
        }
    }

    @Test func aStartedProgramRunsUntilTerminatedAndWritesItsOutputToTheFile() throws {
        let directory = try TemporaryDirectory()
        let log = directory.path("log")
        let running = try ChildProcess.start(
            "/bin/sh", ["-c", "echo started; exec sleep 60"], environment: Self.environment, output: log)
        // It runs until terminated: once it has written its line, it is still there.
        var written = ""
        for _ in 0..<3000 where written.isEmpty {
            written = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if written.isEmpty { usleep(10_000) }
        }
        #expect(written == "started\n")
        #expect(running.isRunning)
        #expect(running.terminationStatus == nil)
        running.terminate()
        running.waitUntilExit()
        #expect(!running.isRunning)
        #expect(running.terminationStatus == SIGTERM)
    }

    @Test func aStartedProgramKilledReportsTheSignal() throws {
        let running = try ChildProcess.start("/bin/sleep", ["60"], environment: Self.environment)
        kill(running.processIdentifier, SIGKILL)
        running.waitUntilExit()
        #expect(running.terminationStatus == SIGKILL)
    }
}
