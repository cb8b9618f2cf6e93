#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The process's open-file limit: each client connection takes a descriptor. Public for the tools that
/// open many connections to a server (`sync-bench fanout`).
public enum FileLimit {
    /// Descriptors kept for everything but client connections: the database pool, the listener, files.
    static let reserved = 256

    /// The soft limit now (`Int.max` when unlimited).
    public static var current: Int {
        var limit = rlimit()
        guard getrlimit(Self.resource, &limit) == 0 else { return 1024 }
        return limit.rlim_cur >= rlim_t(Int.max) ? Int.max : Int(limit.rlim_cur)
    }

    /// The default cap on client connections: the soft limit less `reserved`, at least 64.
    static var connectionsDefault: Int { max(64, min(current, 1 << 30) - reserved) }

    /// Raises the soft limit to the hard limit; returns the soft limit after.
    @discardableResult
    public static func raiseToHardLimit() -> Int {
        var limit = rlimit()
        if getrlimit(Self.resource, &limit) == 0, limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Self.resource, &limit)
        }
        return current
    }

    #if canImport(Glibc)
        private static let resource = Int32(RLIMIT_NOFILE.rawValue)
    #else
        private static let resource = RLIMIT_NOFILE
    #endif
}
