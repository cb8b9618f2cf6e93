import Foundation

/// Resident memory of this process, from `/proc/self/status` (Linux; zero elsewhere).
enum ProcessMemory {
    /// A field of `/proc/<pid>/status` in bytes (`VmRSS`, `VmHWM`), of this process by default, or 0 when
    /// unavailable.
    static func bytes(_ field: String, pid: String = "self") -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
            let kilobytes = line.split(separator: " ").dropFirst().first { Int($0) != nil }
            return (kilobytes.flatMap { Int($0) } ?? 0) * 1024
        }
        return 0
    }

    /// The resident set size now.
    static var resident: Int { bytes("VmRSS") }

    /// The peak resident set size since the start, or since the last `resetPeak()`.
    static var peak: Int { bytes("VmHWM") }

    /// Starts a new peak measurement (writing 5 to `/proc/self/clear_refs` resets VmHWM on Linux 4.0+).
    static func resetPeak() {
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    }
}
