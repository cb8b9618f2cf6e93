import Crypto
import Foundation
import GRDB
import SyncEventStore
import SyncEventStoreTestSupport
import SyncModels
import SyncTestSupport
import Testing

@testable import SyncEngine

/// The device's blob directory (issue 46): blobs added by hash, and a least-recently-used byte bound that never
/// evicts a blob waiting for its upload or a pinned one.
@Suite(.onOwnThreads) struct LocalBlobsTests {
    /// `count` bytes that differ from one blob to the next (`seed`).
    static func bytes(_ count: Int, seed: UInt8 = 1) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed) &* 7) ^ seed })
    }

    /// `LocalBlobs.usage()` as `[total, evictable]`.
    static func usage(_ local: LocalBlobs) async throws -> [Int64] {
        let usage = try await local.usage()
        return [usage.total, usage.evictable]
    }

    static func files(in directory: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
    }

    @Test func addingAFileHashesItAndCopiesItIntoTheDirectory() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"))
        let local = try LocalBlobs(store: store)
        #expect(local.directory.path == directory.path("a.sqlite") + ".blobs")
        // Larger than a piece, and not a multiple of it: hashed and copied over several reads.
        let content = Self.bytes(LocalBlobs.pieceBytes * 2 + 123, seed: 1)
        let source = directory.url.appendingPathComponent("photo.png")
        try content.write(to: source)
        let reference = try await local.add(file: source, type: "image/png")
        #expect(reference.hash == BlobHash(digest: SHA256.hash(data: content)))
        #expect(reference.size == Int64(content.count) && reference.type == "image/png")
        #expect(try Self.files(in: local.directory) == [reference.hash.hex], "no temporary file left")
        #expect(try Data(contentsOf: local.fileURL(reference.hash)) == content)
        #expect(try Data(contentsOf: source) == content, "the source stays")
        #expect(try await local.file(reference.hash) == local.fileURL(reference.hash))
        let rehashed = try LocalBlobs.hash(of: source)
        #expect(rehashed.hash == reference.hash && rehashed.size == reference.size)
        let recorded = try await store.database.writer.read { db in
            try Row.fetchOne(
                db, sql: "SELECT size, present, pinned FROM blob_files WHERE hash = ?",
                arguments: [reference.hash.hex]
            ).map { row -> [Int64] in [row["size"], row["present"], row["pinned"]] }
        }
        #expect(recorded == [reference.size, 1, 0])
        // Not a pending upload until an event refers to it.
        #expect(try await Self.usage(local) == [Int64(content.count), Int64(content.count)])
    }

    @Test func addingTheSameBytesTwiceKeepsOneFile() async throws {
        let directory = try TemporaryDirectory()
        let local = try LocalBlobs(store: try EventStore(path: directory.path("a.sqlite")))
        let content = Self.bytes(1000, seed: 2)
        let first = try await local.add(data: content, type: "text/plain")
        let second = try await local.add(data: content)
        #expect(first.hash == second.hash && second.type == "application/octet-stream")
        #expect(first.hash == BlobHash(digest: SHA256.hash(data: content)))
        #expect(try Self.files(in: local.directory) == [first.hash.hex])
        let empty = try await local.add(data: Data())
        #expect(empty.size == 0 && empty.hash == BlobHash(digest: SHA256.hash(data: Data())))
        #expect(try await local.file(BlobHash(digest: SHA256.hash(data: Self.bytes(10, seed: 3)))) == nil)
    }

    /// `evict()` marks a victim absent in the database before it removes the file, so that "a reader never gets
    /// a file that is being removed": `file(_:)` has to go by that mark, not by the file still being there.
    @Test func aBlobMarkedAbsentIsNotHandedOut() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"))
        let local = try LocalBlobs(store: store)
        let reference = try await local.add(data: Self.bytes(100))
        // Where `evict()` is between its two steps: marked absent, the file not removed yet.
        try await store.database.writer.write { db in
            try db.execute(sql: "UPDATE blob_files SET present = 0 WHERE hash = ?", arguments: [reference.hash.hex])
        }
        #expect(try await local.file(reference.hash) == nil, "a blob being evicted is not handed out")
    }

    /// Five blobs of 100 bytes: `pending` (an event waits for its upload), `pinned`, `referenced` (uploaded, but
    /// the event referring to it is still pending) and two downloaded ones, `older` and `newer`. Least recently
    /// used first: pending, pinned, referenced, older, newer; then `older` is read again.
    @Test func evictionDropsTheLeastRecentlyUsedButNeverAPendingUploadAReferencedOrAPinnedBlob() async throws {
        let directory = try TemporaryDirectory()
        let store = try EventStore(path: directory.path("a.sqlite"))
        let blobsDirectory = directory.url.appendingPathComponent("blobs")
        let unbounded = try LocalBlobs(store: store, directory: blobsDirectory)
        let names = ["pending", "pinned", "referenced", "older", "newer"]
        var blobs: [String: BlobReference] = [:]
        for (index, name) in names.enumerated() {
            let content = Self.bytes(100, seed: UInt8(index + 10))
            if name == "pinned" {
                // Pinned before its bytes are here: adding them keeps the pin.
                try await unbounded.pin(BlobHash(digest: SHA256.hash(data: content)), size: 100)
                #expect(
                    try await unbounded.pinnedMissing().map(\.hash) == [BlobHash(digest: SHA256.hash(data: content))])
            }
            blobs[name] = try await unbounded.add(data: content)
        }
        #expect(try await unbounded.pinnedMissing().isEmpty)
        var waiting = title("note:1", "pending attachment")
        waiting.blobs = [blobs["pending"]!]
        var sent = title("note:2", "uploaded attachment")
        sent.blobs = [blobs["referenced"]!]
        let events = try await store.append([waiting, sent])
        let hashes = blobs.mapValues(\.hash.hex)
        try await store.database.writer.write { db in
            try db.execute(
                sql: "UPDATE local_blobs SET uploaded = 1 WHERE hash = ?", arguments: [hashes["referenced"]])
            for (index, name) in names.enumerated() {
                try db.execute(
                    sql: "UPDATE blob_files SET used_at = ? WHERE hash = ?", arguments: [index + 1, hashes[name]])
            }
        }
        // Read now: the most recently used.
        #expect(try await unbounded.file(blobs["older"]!.hash) != nil)
        #expect(try await Self.usage(unbounded) == [500, 200])
        #expect(try await unbounded.evict() == 0, "under the default bound")

        let bounded = try LocalBlobs(store: store, directory: blobsDirectory, cacheBytes: 150)
        #expect(try await bounded.evict() == 100)
        #expect(try await bounded.file(blobs["newer"]!.hash) == nil, "the least recently used goes")
        #expect(!FileManager.default.fileExists(atPath: bounded.fileURL(blobs["newer"]!.hash).path))
        for name in ["pending", "pinned", "referenced", "older"] {
            #expect(try await bounded.file(blobs[name]!.hash) != nil, "\(name) kept")
        }
        #expect(try await Self.usage(bounded) == [400, 100])

        // Nothing evictable left above the bound, even at 0 bytes: the pending, the referenced and the pinned
        // blob stay.
        let none = try LocalBlobs(store: store, directory: blobsDirectory, cacheBytes: 0)
        #expect(try await none.evict() == 100)
        #expect(try await none.file(blobs["older"]!.hash) == nil)
        for name in ["pending", "pinned", "referenced"] {
            #expect(try await none.file(blobs[name]!.hash) != nil, "\(name) kept")
        }
        #expect(try await none.evict() == 0)

        // Once uploaded, pushed and unpinned they are ordinary cache entries.
        try await store.database.writer.write { db in
            try db.execute(sql: "UPDATE local_blobs SET uploaded = 1")
        }
        #expect(try await none.evict() == 0, "their events are still pending")
        try await store.markConfirmed([events[0].event.id: 1, events[1].event.id: 2])
        #expect(try await none.evict() == 200)
        try await none.pin(blobs["pinned"]!.hash, size: 100, false)
        #expect(try await none.evict() == 100)
        #expect(try Self.files(in: blobsDirectory).isEmpty)
        #expect(try await Self.usage(none) == [0, 0])
    }
}
