#if canImport(Glibc)
    import Glibc
#endif

/// Starts the disk writes of a file being written long before its final flush: every `step` bytes written, the
/// kernel is asked to begin writing them out without waiting (Linux's `sync_file_range(SYNC_FILE_RANGE_WRITE)`),
/// so that the `fsync` at the end finds little left instead of the whole file, and a download's flush overlaps
/// its transfer. Elsewhere it does nothing (the final flush writes everything, as before).
struct FileWriteback {
    static let step: Int64 = 4 << 20
    let descriptor: Int32
    /// Where the bytes not handed to the kernel yet begin.
    private var started: Int64

    init(descriptor: Int32, from offset: Int64) {
        self.descriptor = descriptor
        started = offset
    }

    /// The file now holds bytes up to `end`.
    mutating func written(upTo end: Int64) {
        guard end - started >= Self.step else { return }
        #if os(Linux)
            if let syncFileRange = Self.syncFileRange { _ = syncFileRange(descriptor, started, end - started, 2) }
        #endif
        started = end
    }

    #if os(Linux)
        /// `sync_file_range`, which the Glibc module does not declare (a GNU extension).
        private static let syncFileRange: (@convention(c) (Int32, Int64, Int64, UInt32) -> Int32)? = {
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sync_file_range") else { return nil }
            return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int64, Int64, UInt32) -> Int32).self)
        }()
    #endif
}
