import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// File operations that survive a crash at any instant: a file is replaced through a temporary file, `fsync`
/// and `rename`, and the directory is synced after every rename and removal.
enum DurableFile {
    static func failure(_ what: String, _ path: String) -> StorageError {
        StorageError(code: "storage.file", message: "\(what) \(path): \(String(cString: strerror(errno)))")
    }

    /// Writes `data` to `path` at once: a reader (or a crash) sees the old contents or the new, never a mix.
    static func replace(_ path: String, with data: Data, mode: mode_t) throws {
        let temporary = path + ".tmp-\(getpid())"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, mode)
        guard descriptor >= 0 else { throw failure("cannot create", temporary) }
        var ok = fchmod(descriptor, mode) == 0
        ok =
            ok
            && data.withUnsafeBytes { bytes in
                var written = 0
                while written < bytes.count {
                    let count = write(descriptor, bytes.baseAddress! + written, bytes.count - written)
                    if count <= 0 { return false }
                    written += count
                }
                return true
            }
        ok = ok && fsync(descriptor) == 0
        close(descriptor)
        guard ok else {
            unlink(temporary)
            throw failure("cannot write", temporary)
        }
        try rename(temporary, to: path)
    }

    /// Creates `path` holding `data`, at once, unless it exists (then does nothing): the file is written and
    /// synced under a temporary name, then `link`ed to `path`, which fails if `path` exists.
    static func create(_ path: String, with data: Data, mode: mode_t) throws {
        let temporary = path + ".new-\(getpid())-\(UInt32.random(in: .min ... .max))"
        try replace(temporary, with: data, mode: mode)
        defer { unlink(temporary) }
        guard link(temporary, path) == 0 || errno == EEXIST else { throw failure("cannot create", path) }
        try syncDirectory(of: path)
    }

    /// `rename`, then the directory synced so the new name survives a power loss.
    static func rename(_ from: String, to: String) throws {
        guard systemRename(from, to) == 0 else { throw failure("cannot rename to \(to):", from) }
        try syncDirectory(of: to)
    }

    /// Removes `path` if it exists.
    static func remove(_ path: String) throws {
        guard unlink(path) == 0 || errno == ENOENT else { throw failure("cannot remove", path) }
        try syncDirectory(of: path)
    }

    static func sync(_ path: String) throws {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw failure("cannot open", path) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw failure("cannot sync", path) }
    }

    static func syncDirectory(of path: String) throws {
        guard let slash = path.lastIndex(of: "/") else { return try sync(".") }
        try sync(slash == path.startIndex ? "/" : String(path[..<slash]))
    }

    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    static func size(_ path: String) -> Int? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return Int(status.st_size)
    }

    /// The first `count` bytes of `path` (fewer if the file is shorter).
    static func prefix(_ path: String, count: Int) throws -> [UInt8] {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw failure("cannot open", path) }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: count)
        let read = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, count, 0) }
        guard read >= 0 else { throw failure("cannot read", path) }
        return Array(bytes.prefix(read))
    }
}

#if canImport(Glibc)
    private func systemRename(_ from: String, _ to: String) -> Int32 { Glibc.rename(from, to) }
#else
    private func systemRename(_ from: String, _ to: String) -> Int32 { Darwin.rename(from, to) }
#endif
