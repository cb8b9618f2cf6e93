#if canImport(Glibc)
    import Glibc
#endif

/// Blob chunks pass through buffers of megabytes. glibc's allocator serves such a buffer from `mmap` and
/// unmaps it when freed, but by default it then raises its mmap threshold to the size just freed, and the next
/// buffers come from its heap, which keeps them: a server that moved a large file kept tens of MiB more than it
/// needs. Fixing the threshold (128 KiB, glibc's initial value) keeps every large buffer unmapped when freed,
/// so moving a blob leaves resident memory where it was. Once per process; nothing elsewhere.
enum LargeBuffers {
    static let returnedToTheSystem: Void = {
        #if canImport(Glibc)
            // mallopt(M_MMAP_THRESHOLD, 128 KiB); malloc.h is not part of the Glibc module.
            typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
            let mmapThreshold: Int32 = -3
            if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") {
                _ = unsafeBitCast(symbol, to: Mallopt.self)(mmapThreshold, 128 << 10)
            }
        #endif
    }()
}
