import Foundation

#if canImport(Glibc)
    import Glibc
    import Synchronization

    /// Starts programs through `posix_spawn` directly, without Foundation's `Process`: `run` to their end with
    /// their outputs, `start` without waiting. The tests start their programs through it, and
    /// `sync-load` asks git for the commit it reports.
    ///
    /// On Linux, `Process.run()` lists `/proc/self/fd` to close the descriptors the child should not inherit,
    /// and copies 256 bytes of each directory entry's name where the entry may be shorter: when the last entry
    /// ends near an unmapped page, the whole test process crashes ("Bad pointer dereference" in
    /// `Process.run()`, swift-corelibs-foundation issue 5472). The test suites start hundreds of programs (each
    /// `sync-agent` command), so a run crashed now and then. Here the child closes every descriptor from 3 up
    /// itself (`posix_spawn_file_actions_addclosefrom_np`), and nothing lists a directory.
    public enum ChildProcess {
        /// What a finished program left: its exit status (the signal's number when a signal ended it, as
        /// `Process.terminationStatus` gives it), standard output and standard error.
        public struct Result: Sendable {
            public var status: Int32
            public var stdout: Data
            public var stderr: Data
        }

        /// `run` on a thread of its own, so that the calling task waits without holding a thread of the
        /// concurrency pool (a program may take a while; the pool may have two threads).
        public static func runOnThread(
            _ executable: String, _ arguments: [String], environment: [String: String], directory: String? = nil
        ) async throws -> Result {
            try await withCheckedThrowingContinuation { continuation in
                Thread {
                    continuation.resume(
                        with: Swift.Result {
                            try run(executable, arguments, environment: environment, directory: directory)
                        })
                }.start()
            }
        }

        /// Runs `executable` (a path) with `arguments` and `environment` (the whole environment, not added to
        /// this process's), in `directory` (this process's when nil), standard input from `/dev/null`, and
        /// waits for it: both outputs are read at once,
        /// so a child filling one while the other is read never blocks. Blocks the calling thread.
        public static func run(
            _ executable: String, _ arguments: [String], environment: [String: String], directory: String? = nil
        ) throws -> Result {
            let output = try makePipe()
            let errors: (read: Int32, write: Int32)
            do { errors = try makePipe() } catch {
                close(output.read)
                close(output.write)
                throw error
            }
            let pid: pid_t
            do {
                pid = try spawn(
                    executable, arguments, environment: environment, directory: directory, stdout: output.write,
                    stderr: errors.write)
            } catch {
                for descriptor in [output.read, output.write, errors.read, errors.write] { close(descriptor) }
                throw error
            }
            close(output.write)
            close(errors.write)
            let collected = Collected()
            let reader = Thread {
                collected.data = readAll(errors.read)
                collected.done.signal()
            }
            reader.start()
            let stdout = readAll(output.read)
            collected.done.wait()
            close(output.read)
            close(errors.read)
            return Result(status: try wait(pid), stdout: stdout, stderr: collected.data)
        }

        /// Starts `executable` without waiting for it, standard input from `/dev/null` and both outputs
        /// appended to the file at `output` (created if missing), or discarded when it is nil.
        public static func start(
            _ executable: String, _ arguments: [String], environment: [String: String], output: String? = nil
        ) throws -> Running {
            let path = output ?? "/dev/null"
            let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else { throw ChildProcessError(message: "open \(path): errno \(errno)") }
            defer { close(descriptor) }
            return Running(
                pid: try spawn(executable, arguments, environment: environment, stdout: descriptor, stderr: descriptor))
        }

        /// A started program (`start`), with the part of `Process`'s interface the tests use.
        public final class Running: Sendable {
            public let processIdentifier: pid_t
            private let exit = Mutex<Int32?>(nil)

            init(pid: pid_t) { processIdentifier = pid }

            /// Whether it has not ended yet (it is reaped once it has).
            public var isRunning: Bool { reap() == nil }

            /// Its exit status (see `Result.status`) once it has ended.
            public var terminationStatus: Int32? { reap() }

            /// Sends it SIGTERM.
            public func terminate() { kill(processIdentifier, SIGTERM) }

            /// Blocks until it has ended.
            public func waitUntilExit() {
                while reap() == nil { usleep(10_000) }
            }

            /// Waits until it has ended without blocking a thread (polls every 10 ms); blocks as
            /// `waitUntilExit` once the task is cancelled.
            public func exited() async {
                while reap() == nil {
                    guard !Task.isCancelled else { return waitUntilExit() }
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }

            /// The exit status, reaping the child if it has just ended; nil while it runs. Polled, not waited
            /// for, so that two threads asking at once cannot both wait for the same child.
            private func reap() -> Int32? {
                exit.withLock { exit in
                    if let exit { return exit }
                    var status: Int32 = 0
                    let reaped = waitpid(processIdentifier, &status, WNOHANG)
                    if reaped == processIdentifier {
                        exit = ChildProcess.status(status)
                    } else if reaped == -1 && errno == ECHILD {
                        exit = -1
                    }
                    return exit
                }
            }
        }

        /// The child's process id once started: in a process group of its own, as `Process` starts it, with
        /// descriptors 0, 1 and 2 set and every other one closed.
        static func spawn(
            _ executable: String, _ arguments: [String], environment: [String: String], directory: String? = nil,
            stdout: Int32, stderr: Int32
        ) throws -> pid_t {
            var actions = posix_spawn_file_actions_t()
            try check(posix_spawn_file_actions_init(&actions), "posix_spawn_file_actions_init")
            defer { posix_spawn_file_actions_destroy(&actions) }
            try check(
                posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0),
                "posix_spawn_file_actions_addopen")
            try check(posix_spawn_file_actions_adddup2(&actions, stdout, 1), "posix_spawn_file_actions_adddup2")
            try check(posix_spawn_file_actions_adddup2(&actions, stderr, 2), "posix_spawn_file_actions_adddup2")
            try check(addCloseFrom(&actions, 3), "posix_spawn_file_actions_addclosefrom_np")
            if let directory {
                try check(addChangeDirectory(&actions, directory), "posix_spawn_file_actions_addchdir_np \(directory)")
            }
            var attributes = posix_spawnattr_t()
            try check(posix_spawnattr_init(&attributes), "posix_spawnattr_init")
            defer { posix_spawnattr_destroy(&attributes) }
            // No signal blocked, and every one at its default action: the calling thread may block some (Dispatch's
            // threads do) and this process ignores SIGPIPE, and a child would inherit both (SIGTERM never
            // arriving, writes to a closed pipe not ending it).
            var noSignals = sigset_t()
            sigemptyset(&noSignals)
            var allSignals = sigset_t()
            sigfillset(&allSignals)
            try check(posix_spawnattr_setsigmask(&attributes, &noSignals), "posix_spawnattr_setsigmask")
            try check(posix_spawnattr_setsigdefault(&attributes, &allSignals), "posix_spawnattr_setsigdefault")
            try check(
                posix_spawnattr_setflags(
                    &attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)),
                "posix_spawnattr_setflags")

            let argv = ([executable] + arguments).map { strdup($0) }
            let envp = environment.map { strdup("\($0.key)=\($0.value)") }
            defer { (argv + envp).forEach { free($0) } }
            var pid: pid_t = 0
            let status = (argv + [nil]).withUnsafeBufferPointer { argvPointer in
                (envp + [nil]).withUnsafeBufferPointer { envpPointer in
                    posix_spawn(
                        &pid, executable, &actions, &attributes,
                        UnsafeMutablePointer(mutating: argvPointer.baseAddress!),
                        UnsafeMutablePointer(mutating: envpPointer.baseAddress!))
                }
            }
            try check(status, "posix_spawn \(executable)")
            return pid
        }

        /// The child's exit status once it has ended (see `Result.status`).
        static func wait(_ pid: pid_t) throws -> Int32 {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 {
                guard errno == EINTR else { throw ChildProcessError(message: "waitpid \(pid): errno \(errno)") }
            }
            return Self.status(status)
        }

        /// The exit status of a `waitpid` status: the exit code, or the signal's number when a signal ended it.
        static func status(_ status: Int32) -> Int32 {
            let signal = status & 0x7f
            return signal == 0 ? (status >> 8) & 0xff : signal
        }

        /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34 and later), which Swift's Glibc module does
        /// not declare.
        private static let addCloseFrom:
            @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32 = {
                guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else {
                    fatalError("posix_spawn_file_actions_addclosefrom_np is missing: glibc 2.34 or later is needed")
                }
                return unsafeBitCast(
                    symbol,
                    to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
            }()

        /// `posix_spawn_file_actions_addchdir_np` (glibc 2.29 and later), which Swift's Glibc module does not
        /// declare either.
        private static let addChangeDirectory:
            @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32 = {
                guard let symbol = dlsym(nil, "posix_spawn_file_actions_addchdir_np") else {
                    fatalError("posix_spawn_file_actions_addchdir_np is missing: glibc 2.29 or later is needed")
                }
                return unsafeBitCast(
                    symbol,
                    to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) ->
                        Int32)
                        .self)
            }()

        /// A pipe whose ends close on exec (the children started here close every descriptor above 2 anyway).
        private static func makePipe() throws -> (read: Int32, write: Int32) {
            var descriptors: [Int32] = [0, 0]
            guard pipe(&descriptors) == 0 else {
                throw ChildProcessError(message: "pipe: errno \(errno)")
            }
            for descriptor in descriptors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
            return (descriptors[0], descriptors[1])
        }

        /// Everything `descriptor` yields until end of file, reads retried when a signal interrupts them.
        private static func readAll(_ descriptor: Int32) -> Data {
            var data = Data()
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
                if count > 0 {
                    data.append(contentsOf: buffer[0..<count])
                } else if count == 0 || errno != EINTR {
                    return data
                }
            }
        }

        private static func check(_ result: Int32, _ call: String) throws {
            guard result == 0 else {
                throw ChildProcessError(message: "\(call) failed: \(String(cString: strerror(result)))")
            }
        }

        /// What the reader thread collected from standard error; `done` signals when it has all of it.
        private final class Collected: @unchecked Sendable {
            var data = Data()
            let done = DispatchSemaphore(value: 0)
        }
    }

    /// A program that could not be started or waited for.
    public struct ChildProcessError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }
#endif
