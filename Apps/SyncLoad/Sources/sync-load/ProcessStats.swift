import Foundation

/// CPU time and memory of processes, from `/proc` (Linux; zero elsewhere): where a load run's time goes.
enum ProcessStats {
    /// Resident memory of this process now and at its peak (`VmRSS`, `VmHWM` of `/proc/self/status`).
    static func memory() -> (resident: Int, peak: Int) {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
        func field(_ name: String) -> Int {
            for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
                let kilobytes = line.split(separator: " ").dropFirst().first { Int($0) != nil }
                return (kilobytes.flatMap { Int($0) } ?? 0) * 1024
            }
            return 0
        }
        return (field("VmRSS"), field("VmHWM"))
    }

    /// CPU seconds (user and system) that `pid` and its live descendants have used, including the children
    /// they have reaped: for a server, its process; for PostgreSQL, the postmaster and its backends.
    static func cpuSeconds(tree pid: Int32) -> Double {
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var parents: [Int32: Int32] = [:]
        var times: [Int32: Double] = [:]
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let process = Int32(entry), let stat = self.stat(process) else { continue }
            parents[process] = stat.parent
            times[process] = stat.ticks / ticks
        }
        var total = 0.0
        for (process, time) in times {
            var current: Int32? = process
            while let candidate = current, candidate > 1 {
                if candidate == pid {
                    total += time
                    break
                }
                current = parents[candidate]
            }
        }
        return total
    }

    /// CPU seconds this process has used.
    static func ownCPUSeconds() -> Double {
        cpuSeconds(tree: getpid())
    }

    /// The parent and the utime + stime + cutime + cstime ticks of `/proc/PID/stat`.
    private static func stat(_ pid: Int32) -> (parent: Int32, ticks: Double)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name: state, ppid, …; utime is field 14 of the whole line.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 15, let parent = Int32(fields[1]) else { return nil }
        let ticks = fields[11...14].compactMap { Double($0) }.reduce(0, +)
        return (parent, ticks)
    }
}
