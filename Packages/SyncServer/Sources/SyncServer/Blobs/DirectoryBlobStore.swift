import Foundation
import NIOCore
import NIOPosix
import SyncModels

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A `BlobStore` in a directory (`SYNC_BLOB_STORE=directory:/path`): one file per part.
///
/// ```text
/// <root>/<scope>/uploads/<upload id>/<part>   an upload's parts
/// <root>/<scope>/blobs/<hash>/<part>          a committed blob's parts
/// <root>/<scope>/trash/…                      what is being deleted
/// ```
///
/// A part is written to a temporary name in its directory, then renamed over its final name: a part is there
/// whole or not at all. Its bytes reach the disk at the latest when the upload is promoted, which flushes
/// (`fsync`) every part and the directory before it renames the upload's directory to the blob's, one atomic
/// step; a machine that crashes before may lose parts that were written, and the commit then finds them
/// missing and asks for them again (`BlobStore.writeUploadPart`). Flushing at the commit instead of at each
/// part lets the disk take a chunk's bytes while the next one arrives. Deletion renames first, then removes, so
/// that nothing is ever read half-deleted. The blocking file calls run on NIO's thread pool, never on an event
/// loop. Several servers may share the directory (a network file system with atomic rename) the way they
/// share the database.
public struct DirectoryBlobStore: BlobStore {
    /// The directory everything is kept under.
    public let root: String
    let threadPool: NIOThreadPool

    /// A store under `directory`, created if it does not exist.
    /// - Throws: when the directory cannot be created.
    public init(directory: String, threadPool: NIOThreadPool = .singleton) throws {
        root = directory.hasSuffix("/") && directory.count > 1 ? String(directory.dropLast()) : directory
        self.threadPool = threadPool
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    func uploadDirectory(_ upload: BlobUploadKey) -> String {
        "\(root)/\(upload.scope.name)/uploads/\(upload.id.uuidString.lowercased())"
    }

    func blobDirectory(_ hash: BlobHash, in scope: Scope) -> String { "\(root)/\(scope.name)/blobs/\(hash.hex)" }

    public func writeUploadPart(_ bytes: ByteBuffer, part: Int, of upload: BlobUploadKey) async throws {
        let directory = uploadDirectory(upload)
        try await threadPool.runIfActive {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try PartFile.writeAtomically(bytes, to: "\(directory)/\(part)")
        }
    }

    public func readUploadPart(_ part: Int, of upload: BlobUploadKey) async throws -> ByteBuffer? {
        let path = "\(uploadDirectory(upload))/\(part)"
        return try await threadPool.runIfActive { try PartFile.read(path, range: nil) }
    }

    public func promote(_ upload: BlobUploadKey, parts: Int) async throws -> Bool {
        let source = uploadDirectory(upload)
        let target = blobDirectory(upload.hash, in: upload.scope)
        let trash = trashPath(upload.scope)
        return try await threadPool.runIfActive {
            for part in 0..<parts where !FileManager.default.fileExists(atPath: "\(source)/\(part)") {
                return false
            }
            if parts == 0 { try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: true) }
            // The parts' bytes and names on disk before the blob's name points at them.
            for part in 0..<parts { try PartFile.sync("\(source)/\(part)") }
            try PartFile.sync(source)
            let blobs = (target as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: blobs, withIntermediateDirectories: true)
            // A blob directory already there (the blob was lost from the metadata and uploaded again) goes first.
            if FileManager.default.fileExists(atPath: target) { try PartFile.remove(target, through: trash) }
            guard rename(source, target) == 0 else {
                // Another commit of the same session moved the directory first.
                if errno == ENOENT { return false }
                throw PartFile.Failure(operation: "rename", path: target, code: errno)
            }
            try PartFile.sync(blobs)
            return true
        }
    }

    public func readPart(_ part: Int, range: Range<Int>, of hash: BlobHash, in scope: Scope) async throws
        -> ByteBuffer?
    {
        let path = "\(blobDirectory(hash, in: scope))/\(part)"
        return try await threadPool.runIfActive { try PartFile.read(path, range: range) }
    }

    public func deleteUpload(_ upload: BlobUploadKey) async throws {
        let directory = uploadDirectory(upload)
        let trash = trashPath(upload.scope)
        try await threadPool.runIfActive { try PartFile.remove(directory, through: trash) }
    }

    public func deleteBlob(_ hash: BlobHash, in scope: Scope) async throws {
        let directory = blobDirectory(hash, in: scope)
        let trash = trashPath(scope)
        try await threadPool.runIfActive { try PartFile.remove(directory, through: trash) }
    }

    /// A fresh name under the scope's trash directory.
    func trashPath(_ scope: Scope) -> String { "\(root)/\(scope.name)/trash/\(UUID().uuidString.lowercased())" }
}

/// The file operations of `DirectoryBlobStore`, blocking (run them on a thread pool).
enum PartFile {
    /// A file operation that failed, with its `errno`.
    struct Failure: Error, CustomStringConvertible {
        var operation: String
        var path: String
        var code: Int32
        var description: String { "\(operation) \(path): \(String(cString: strerror(code)))" }
    }

    /// Writes `bytes` to a temporary file next to `path` and renames it to `path`, without waiting for the disk
    /// (`sync(_:)` does).
    static func writeAtomically(_ bytes: ByteBuffer, to path: String) throws {
        let temporary = "\(path).\(UUID().uuidString.lowercased()).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw Failure(operation: "open", path: temporary, code: errno) }
        do {
            defer { _ = close(descriptor) }
            try bytes.withUnsafeReadableBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        throw Failure(operation: "write", path: temporary, code: errno)
                    }
                    offset += written
                }
            }
            startWriteback(descriptor)
        } catch {
            _ = unlink(temporary)
            throw error
        }
        guard rename(temporary, path) == 0 else {
            let code = errno
            _ = unlink(temporary)
            throw Failure(operation: "rename", path: path, code: code)
        }
    }

    /// Asks the kernel to start writing the file's bytes to disk now, without waiting (Linux's
    /// `sync_file_range(SYNC_FILE_RANGE_WRITE)`), so that the flush at the commit finds little left to write
    /// instead of the whole upload. Does nothing where the call does not exist.
    static func startWriteback(_ descriptor: Int32) {
        #if os(Linux)
            if let syncFileRange = syncFileRange { _ = syncFileRange(descriptor, 0, 0, 2) }
        #endif
    }

    #if os(Linux)
        /// `sync_file_range`, which the Glibc module does not declare (a GNU extension).
        private static let syncFileRange: (@convention(c) (Int32, Int64, Int64, UInt32) -> Int32)? = {
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sync_file_range") else { return nil }
            return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int64, Int64, UInt32) -> Int32).self)
        }()
    #endif

    /// `range` of the file at `path` (the whole file when nil), or nil when there is no such file.
    static func read(_ path: String, range: Range<Int>?) throws -> ByteBuffer? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw Failure(operation: "open", path: path, code: errno)
        }
        defer { _ = close(descriptor) }
        let wanted: Range<Int>
        if let range {
            wanted = range
        } else {
            var status = stat()
            guard fstat(descriptor, &status) == 0 else { throw Failure(operation: "stat", path: path, code: errno) }
            wanted = 0..<Int(status.st_size)
        }
        var buffer = ByteBufferAllocator().buffer(capacity: wanted.count)
        var offset = wanted.lowerBound
        while offset < wanted.upperBound {
            let remaining = wanted.upperBound - offset
            let count = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: remaining) { target in
                while true {
                    let read = pread(descriptor, target.baseAddress!, remaining, off_t(offset))
                    if read >= 0 { return read }
                    guard errno == EINTR else { throw Failure(operation: "read", path: path, code: errno) }
                }
            }
            // The end of the file: what it holds.
            if count == 0 { break }
            offset += count
        }
        return buffer
    }

    /// Removes the directory at `path` and what it holds, after moving it to `trash` (created if needed), so
    /// that it is gone from its place in one step; nothing there is not an error.
    static func remove(_ path: String, through trash: String) throws {
        try FileManager.default.createDirectory(
            atPath: (trash as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        guard rename(path, trash) == 0 else {
            if errno == ENOENT { return }
            throw Failure(operation: "rename", path: path, code: errno)
        }
        try FileManager.default.removeItem(atPath: trash)
    }

    /// Flushes a file's bytes, or a directory's entries (a rename in it), to disk.
    static func sync(_ path: String) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure(operation: "open", path: path, code: errno) }
        defer { _ = close(descriptor) }
        guard fsync(descriptor) == 0 else { throw Failure(operation: "fsync", path: path, code: errno) }
    }
}
