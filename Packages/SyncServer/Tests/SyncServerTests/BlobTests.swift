import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import PostgresNIO
import Prometheus
import SyncModels
import SyncProtocol
import SyncServerTesting
import SyncTestSupport
import Synchronization
import Testing

@testable import SyncServer

/// Blobs (docs/PROTOCOL.md, "Blobs") against a real PostgreSQL, with each `BlobStore`: uploads in chunks, in any
/// order and resumed, commits that check the whole hash, reads with ranges and conditions, what is refused and
/// leaves nothing stored, quotas, deduplication, the push's `blob.missing`, the expiry sweep and a restart.
@Suite struct BlobTests {
    /// The chunk size of the test servers.
    static let chunk = 64 * 1024

    @Test(arguments: BlobStoreKind.allCases)
    func aChunkedUploadSentOutOfOrderReadsBackByteForByte(store: BlobStoreKind) async throws {
        try await store.run { server in
            let blob = TestBlob(size: 3 * Self.chunk + 1000, seed: 1, type: "image/png")
            let opened = try server.uploadState(try await server.openUpload(blob, scope: "b"))
            #expect(opened.chunks == 4 && opened.missing == [0, 1, 2, 3] && !opened.committed)
            #expect(opened.chunkSize == Self.chunk && opened.expiresAt != nil)
            let id = try #require(opened.upload)

            // Out of order, one sent twice; the session says what is missing (what a device resumes with).
            for index in [2, 0, 2] {
                let response = try await server.putChunk(id, index, blob.chunk(index), scopes: ["b"])
                #expect(response.status == .ok, "\(String(buffer: response.body))")
            }
            let resumed = try server.uploadState(
                try await server.send(.get, "/v1/uploads/\(id)", headers: try await server.bearer(["b"])))
            #expect(resumed.missing == [1, 3] && resumed.upload == id)
            for index in [3, 1] { _ = try await server.putChunk(id, index, blob.chunk(index), scopes: ["b"]) }
            let committed = try server.uploadState(try await server.commit(id, scopes: ["b"]))
            #expect(committed.committed && committed.missing.isEmpty && committed.expiresAt == nil)
            // A commit again answers the same.
            #expect(try server.uploadState(try await server.commit(id, scopes: ["b"])).committed)

            let path = "/v1/blobs/\(blob.hash)?scope=b"
            let headers = try await server.bearer(["b"])
            let head = try await server.send(.head, path, headers: headers)
            #expect(head.status == .ok && head.body.readableBytes == 0)
            #expect(head.headers[.contentLength] == String(blob.bytes.count))
            #expect(head.headers[.contentType] == "image/png" && head.headers[.eTag] == "\"\(blob.hash)\"")
            #expect(head.headers[.acceptRanges] == "bytes")

            let whole = try await server.send(.get, path, headers: headers)
            #expect(whole.status == .ok && whole.headers[.contentEncoding] == nil)
            #expect(whole.headers[.cacheControl] == "private, max-age=31536000, immutable")
            #expect(Array(buffer: whole.body) == blob.bytes)
            #expect(BlobHash.sha256(of: Array(buffer: whole.body)) == blob.hash)

            for (range, expected) in [
                ("bytes=100-70000", 100..<70_001), ("bytes=-500", blob.bytes.count - 500..<blob.bytes.count),
                ("bytes=\(Self.chunk)-", Self.chunk..<blob.bytes.count), ("bytes=0-0", 0..<1),
            ] {
                var ranged = headers
                ranged[.range] = range
                let partial = try await server.send(.get, path, headers: ranged)
                #expect(partial.status == .partialContent, "\(range)")
                #expect(
                    partial.headers[.contentRange]
                        == "bytes \(expected.lowerBound)-\(expected.upperBound - 1)/\(blob.bytes.count)", "\(range)")
                #expect(Array(buffer: partial.body) == Array(blob.bytes[expected]), "\(range)")
            }

            var conditional = headers
            conditional[.ifNoneMatch] = "\"\(blob.hash)\""
            #expect(try await server.send(.get, path, headers: conditional).status == .notModified)
            conditional[.ifNoneMatch] = "*"
            #expect(try await server.send(.get, path, headers: conditional).status == .notModified)
            conditional[.ifNoneMatch] = "\"other\""
            #expect(try await server.send(.get, path, headers: conditional).status == .ok)

            var past = headers
            past[.range] = "bytes=\(blob.bytes.count)-"
            let unsatisfiable = try await server.send(.get, path, headers: past)
            try expectError(unsatisfiable, 416, .blobRangeNotSatisfiable, server)
            #expect(unsatisfiable.headers[.contentRange] == "bytes */\(blob.bytes.count)")
        }
    }

    @Test(arguments: BlobStoreKind.allCases)
    func anEmptyBlobAndAOneChunkBlobRoundTrip(store: BlobStoreKind) async throws {
        try await store.run { server in
            for blob in [
                TestBlob(size: 0, seed: 2), TestBlob(size: 5000, seed: 3), TestBlob(size: Self.chunk, seed: 4),
            ] {
                let opened = try server.uploadState(try await server.openUpload(blob, scope: "e"))
                #expect(opened.chunks == UploadState.chunkCount(size: Int64(blob.bytes.count), chunkSize: Self.chunk))
                let id = try #require(opened.upload)
                for index in opened.missing {
                    #expect(try await server.putChunk(id, index, blob.chunk(index), scopes: ["e"]).status == .ok)
                }
                #expect(try server.uploadState(try await server.commit(id, scopes: ["e"])).committed)
                let headers = try await server.bearer(["e"])
                let head = try await server.send(.head, "/v1/blobs/\(blob.hash)?scope=e", headers: headers)
                #expect(head.status == .ok && head.headers[.contentLength] == String(blob.bytes.count))
                let whole = try await server.send(.get, "/v1/blobs/\(blob.hash)?scope=e", headers: headers)
                #expect(whole.status == .ok && Array(buffer: whole.body) == blob.bytes)
            }
        }
    }

    @Test(arguments: BlobStoreKind.allCases)
    func badChunksAreRefusedAndNothingIsStored(store: BlobStoreKind) async throws {
        try await store.run { server in
            let blob = TestBlob(size: 2 * Self.chunk + 10, seed: 5)
            let id = try #require(try server.uploadState(try await server.openUpload(blob, scope: "c")).upload)
            let first = blob.chunk(0)
            let longer = try await server.putChunk(id, 0, first + [1], scopes: ["c"])
            try expectError(longer, 413, .requestTooLarge, server)
            let lastLonger = try await server.putChunk(id, 2, blob.chunk(2) + [1], scopes: ["c"])
            try expectError(lastLonger, 413, .requestTooLarge, server)
            let shorter = Array(first.dropLast())
            try expectError(
                try await server.putChunk(id, 0, shorter, scopes: ["c"]), 400, .blobChunkInvalid, server)
            try expectError(
                try await server.putChunk(id, 0, first, sha: BlobHash.sha256(of: shorter).hex, scopes: ["c"]), 400,
                .blobHashMismatch, server)
            try expectError(
                try await server.putChunk(id, 0, first, withoutHash: true, scopes: ["c"]), 400, .requestInvalid, server)
            try expectError(
                try await server.putChunk(id, 0, first, sha: "not-a-hash", scopes: ["c"]), 400, .requestInvalid, server)
            try expectError(try await server.putChunk(id, 3, first, scopes: ["c"]), 400, .blobChunkInvalid, server)
            try expectError(try await server.putChunk(id, -1, first, scopes: ["c"]), 400, .blobChunkInvalid, server)
            let state = try server.uploadState(
                try await server.send(.get, "/v1/uploads/\(id)", headers: try await server.bearer(["c"])))
            #expect(state.missing == [0, 1, 2])
            #expect(try await store.storedParts(server) == 0)
            try expectError(try await server.commit(id, scopes: ["c"]), 409, .uploadIncomplete, server)
        }
    }

    @Test(arguments: BlobStoreKind.allCases)
    func aCommitWhoseBytesDoNotMatchDiscardsTheSession(store: BlobStoreKind) async throws {
        try await store.run { server in
            let blob = TestBlob(size: Self.chunk + 10, seed: 6)
            // Declared with the hash of other bytes of the same size: each chunk matches its own hash.
            let lying = TestBlob(bytes: blob.bytes, hash: TestBlob(size: Self.chunk + 10, seed: 7).hash)
            let id = try #require(try server.uploadState(try await server.openUpload(lying, scope: "h")).upload)
            for index in 0..<2 { _ = try await server.putChunk(id, index, blob.chunk(index), scopes: ["h"]) }
            #expect(try await store.storedParts(server) == 2)
            try expectError(try await server.commit(id, scopes: ["h"]), 400, .blobHashMismatch, server)
            let gone = try await server.send(.get, "/v1/uploads/\(id)", headers: try await server.bearer(["h"]))
            try expectError(gone, 404, .uploadNotFound, server)
            #expect(try await store.storedParts(server) == 0)
            let read = try await server.send(
                .get, "/v1/blobs/\(lying.hash)?scope=h", headers: try await server.bearer(["h"]))
            try expectError(read, 404, .blobNotFound, server)
        }
    }

    /// Chunks stored in order by one server: its commit checks the blob's hash from the running hash of the
    /// chunks (`UploadDigests`) and reads nothing back; chunks out of order (the first test) read them back.
    @Test(arguments: BlobStoreKind.allCases)
    func aCommitAfterChunksInOrderUsesTheirRunningHash(store: BlobStoreKind) async throws {
        try await store.run { server in
            let blob = TestBlob(size: 4 * Self.chunk + 5, seed: 22)
            try await server.uploadWhole(blob, scope: "r")
            let outOfOrder = TestBlob(size: 2 * Self.chunk + 5, seed: 23)
            let id = try #require(try server.uploadState(try await server.openUpload(outOfOrder, scope: "r")).upload)
            for index in [1, 0, 2] { _ = try await server.putChunk(id, index, outOfOrder.chunk(index), scopes: ["r"]) }
            #expect(try server.uploadState(try await server.commit(id, scopes: ["r"])).committed)
            let metrics = String(buffer: try await server.send(.get, "/metrics").body)
            #expect(ReadAheadTests.sample(metrics, #"sync_blob_commit_hashes_total{source="running"}"#) == 1)
            #expect(ReadAheadTests.sample(metrics, #"sync_blob_commit_hashes_total{source="read_back"}"#) == 1)
            for stored in [blob, outOfOrder] {
                let whole = try await server.send(
                    .get, "/v1/blobs/\(stored.hash)?scope=r", headers: try await server.bearer(["r"]))
                #expect(Array(buffer: whole.body) == stored.bytes)
            }
        }
    }

    /// A chunk stored again through a second server, with other bytes that match their own hash, is not in the
    /// first server's running hash: the database recorded another hash for the part, so the first server's
    /// commit reads the parts back and refuses bytes that are not the blob's.
    @Test(arguments: BlobStoreKind.allCases)
    func aChunkStoredAgainThroughAnotherServerIsReadBackAtTheCommit(store: BlobStoreKind) async throws {
        let blob = TestBlob(size: 3 * Self.chunk, seed: 24)
        try await TestDatabase.with(citus: TestServer.onCitus) { database in
            defer { store.removeDirectory(of: database) }
            try await store.run(on: database) { first in
                let id = try #require(try first.uploadState(try await first.openUpload(blob, scope: "w")).upload)
                for index in 0..<3 { _ = try await first.putChunk(id, index, blob.chunk(index), scopes: ["w"]) }
                try await store.run(on: database) { second in
                    let other = [UInt8](repeating: 7, count: Self.chunk)
                    let response = try await second.putChunk(id, 1, other, scopes: ["w"])
                    #expect(response.status == .ok)
                }
                try expectError(try await first.commit(id, scopes: ["w"]), 400, .blobHashMismatch, first)
                let metrics = String(buffer: try await first.send(.get, "/metrics").body)
                #expect(ReadAheadTests.sample(metrics, #"sync_blob_commit_hashes_total{source="running"}"#) == 0)
                #expect(ReadAheadTests.sample(metrics, #"sync_blob_commit_hashes_total{source="read_back"}"#) == 1)
                let read = try await first.send(
                    .get, "/v1/blobs/\(blob.hash)?scope=w", headers: try await first.bearer(["w"]))
                try expectError(read, 404, .blobNotFound, first)
            }
        }
    }

    @Test func scopesTheTokenDoesNotNameAndMalformedRequestsAreRefused() async throws {
        try await BlobStoreKind.postgres.run { server in
            let blob = TestBlob(size: 100, seed: 8)
            try expectError(
                try await server.openUpload(blob, scope: "mine", scopes: ["other"]), 403, .scopeForbidden, server)
            let id = try #require(try server.uploadState(try await server.openUpload(blob, scope: "mine")).upload)
            // A session of a scope the token does not name does not exist for it.
            try expectError(
                try await server.putChunk(id, 0, blob.chunk(0), scopes: ["other"]), 404, .uploadNotFound, server)
            let foreign = try await server.bearer(["other"])
            try expectError(
                try await server.send(.get, "/v1/uploads/\(id)", headers: foreign), 404, .uploadNotFound, server)
            try expectError(try await server.commit(id, scopes: ["other"]), 404, .uploadNotFound, server)
            try expectError(
                try await server.send(.get, "/v1/uploads/not-a-uuid", headers: foreign), 404, .uploadNotFound, server)
            #expect(try await BlobStoreKind.postgres.storedParts(server) == 0)

            _ = try await server.putChunk(id, 0, blob.chunk(0), scopes: ["mine"])
            _ = try await server.commit(id, scopes: ["mine"])
            for method in [HTTPRequest.Method.get, .head] {
                let forbidden = try await server.send(method, "/v1/blobs/\(blob.hash)?scope=mine", headers: foreign)
                #expect(forbidden.status.code == 403, "\(method)")
                let elsewhere = try await server.send(
                    method, "/v1/blobs/\(blob.hash)?scope=other", headers: foreign)
                #expect(elsewhere.status.code == 404, "\(method)")
            }
            try expectError(
                try await server.send(.get, "/v1/blobs/\(blob.hash)?scope=mine", headers: foreign), 403,
                .scopeForbidden, server)
            try expectError(
                try await server.send(.get, "/v1/blobs/\(blob.hash)?scope=other", headers: foreign), 404,
                .blobNotFound, server)

            let mine = try await server.bearer(["mine"])
            for path in [
                "/v1/blobs/xyz?scope=mine", "/v1/blobs/\(blob.hash)", "/v1/blobs/\(blob.hash)?scope=bad%20scope",
                "/v1/blobs/\(blob.hash.hex.dropLast())?scope=mine",
            ] {
                try expectError(try await server.send(.get, path, headers: mine), 400, .requestInvalid, server)
            }
            for body in [
                #"{"scope": "mine", "hash": "\#(blob.hash)", "size": -1, "type": "image/png"}"#,
                #"{"scope": "mine", "hash": "\#(blob.hash)", "size": 1, "type": "png"}"#,
                #"{"scope": "mine", "hash": "abc", "size": 1, "type": "image/png"}"#,
                #"{"scope": "mine", "size": 1, "type": "image/png"}"#,
            ] {
                let response = try await server.send(.post, "/v1/uploads", headers: mine, body: Data(body.utf8))
                try expectError(response, 400, .requestInvalid, server)
            }
            // Known blob paths with a method they are not served with.
            let wrong = try await server.send(.delete, "/v1/blobs/\(blob.hash)?scope=mine", headers: mine)
            #expect(wrong.status.code == 405 && wrong.headers[.allow] == "HEAD, GET")
            let wrongChunk = try await server.send(.post, "/v1/uploads/\(id)/chunks/0", headers: mine)
            #expect(wrongChunk.status.code == 405 && wrongChunk.headers[.allow] == "PUT")
        }
    }

    @Test func aSessionOverTheQuotaOrTheLargestBlobIsRefused() async throws {
        try await BlobStoreKind.postgres.run(configure: {
            $0.blobs.quotaBytes = 200_000
            $0.blobs.maxBytes = 150_000
        }) { server in
            let first = TestBlob(size: 120_000, seed: 9)
            let id = try #require(try server.uploadState(try await server.openUpload(first, scope: "q")).upload)
            // Asking again for the same blob is the same session, counted once.
            #expect(try server.uploadState(try await server.openUpload(first, scope: "q")).upload == id)
            let second = TestBlob(size: 100_000, seed: 10)
            try expectError(try await server.openUpload(second, scope: "q"), 413, .blobQuotaExceeded, server)
            try expectError(
                try await server.openUpload(TestBlob(size: 150_001, seed: 11), scope: "r"), 413, .requestTooLarge,
                server)
            #expect(try await server.database.integers("SELECT count(*) FROM blob_uploads") == [1])
            // Another scope has its own quota.
            #expect(try server.uploadState(try await server.openUpload(second, scope: "q2")).upload != nil)
        }
    }

    @Test func aBlobTheScopeHoldsIsNotUploadedAgain() async throws {
        try await BlobStoreKind.postgres.run { server in
            let blob = TestBlob(size: 70_000, seed: 12)
            let first = try server.uploadState(try await server.openUpload(blob, scope: "d"))
            let second = try server.uploadState(try await server.openUpload(blob, scope: "d", subject: "bob"))
            #expect(first.upload != nil && first.upload == second.upload)
            let id = try #require(first.upload)
            for index in 0..<2 { _ = try await server.putChunk(id, index, blob.chunk(index), scopes: ["d"]) }
            _ = try await server.commit(id, scopes: ["d"])
            let again = try await server.openUpload(blob, scope: "d", subject: "carol")
            let state = try server.uploadState(again)
            #expect(state.committed && state.upload == nil && state.missing.isEmpty)
            #expect(!String(buffer: again.body).contains("\"upload\":\""))
            #expect(try await server.database.integers("SELECT count(*) FROM blobs") == [1])
        }
    }

    @Test func anEventReferringToABlobItsScopeDoesNotHoldIsRejected() async throws {
        try await BlobStoreKind.postgres.run { server in
            let blob = TestBlob(size: 1000, seed: 13, type: "image/jpeg")
            let event = EventFixtures.event(
                scope: "p", type: "file.attached", payload: .object(["blob": blob.reference.json]))
            let plain = EventFixtures.event(scope: "p")
            let rejected = try await server.push([event, plain], scopes: ["p", "p2"])
            #expect(rejected[0].status == .rejected && rejected[0].code == .blobMissing)
            #expect(rejected[0].message?.contains(blob.hash.hex) == true)
            #expect(rejected[1].status == .accepted)

            // Committed in another scope: still missing in the event's own.
            try await server.uploadWhole(blob, scope: "p2")
            #expect(try await server.push([event], scopes: ["p", "p2"])[0].code == .blobMissing)
            try await server.uploadWhole(blob, scope: "p")
            let accepted = try await server.push([event], scopes: ["p"])
            #expect(accepted[0].status == .accepted)
            #expect(
                try await server.database.integers(
                    "SELECT count(*) FROM blob_refs WHERE scope = 'p' AND hash = \(blob.hash.hex) AND event_id = \(event.id.uuid)"
                ) == [1])
        }
    }

    @Test(arguments: BlobStoreKind.allCases)
    func expiredSessionsAreSweptWithTheirChunks(store: BlobStoreKind) async throws {
        try await store.run { server in
            let blob = TestBlob(size: 2 * Self.chunk, seed: 14)
            let id = try #require(try server.uploadState(try await server.openUpload(blob, scope: "x")).upload)
            _ = try await server.putChunk(id, 0, blob.chunk(0), scopes: ["x"])
            let kept = TestBlob(size: 10, seed: 15)
            try await server.uploadWhole(kept, scope: "x")
            #expect(try await store.storedParts(server) == 2)
            try await server.database.execute(
                "UPDATE blob_uploads SET expires_at = now() - interval '1 second' WHERE id = \(UUID(uuidString: id)!)")
            let expired = try await server.send(.get, "/v1/uploads/\(id)", headers: try await server.bearer(["x"]))
            try expectError(expired, 404, .uploadNotFound, server)
            let swept = try await store.withService(server) { try await $0.sweep(logger: TestDatabase.logger) }
            #expect(swept == 1)
            #expect(try await server.database.integers("SELECT count(*) FROM blob_uploads") == [1])
            #expect(try await server.database.integers("SELECT count(*) FROM blob_upload_parts") == [0])
            // The committed blob's part stays.
            #expect(try await store.storedParts(server) == 1)
            // The blob can be uploaded again, in a new session.
            let again = try server.uploadState(try await server.openUpload(blob, scope: "x"))
            #expect(again.upload != id && again.missing == [0, 1])
        }
    }

    @Test(arguments: BlobStoreKind.allCases)
    func anUploadResumesAfterTheServerRestarts(store: BlobStoreKind) async throws {
        let blob = TestBlob(size: 3 * Self.chunk - 7, seed: 16)
        try await TestDatabase.with(citus: TestServer.onCitus) { database in
            defer { store.removeDirectory(of: database) }
            let id = try await store.run(on: database) { server in
                let id = try #require(try server.uploadState(try await server.openUpload(blob, scope: "s")).upload)
                for index in [0, 2] { _ = try await server.putChunk(id, index, blob.chunk(index), scopes: ["s"]) }
                return id
            }
            try await store.run(on: database) { server in
                let state = try server.uploadState(
                    try await server.send(.get, "/v1/uploads/\(id)", headers: try await server.bearer(["s"])))
                #expect(state.missing == [1])
                _ = try await server.putChunk(id, 1, blob.chunk(1), scopes: ["s"])
                #expect(try server.uploadState(try await server.commit(id, scopes: ["s"])).committed)
                let whole = try await server.send(
                    .get, "/v1/blobs/\(blob.hash)?scope=s", headers: try await server.bearer(["s"]))
                #expect(Array(buffer: whole.body) == blob.bytes)
            }
        }
    }

    /// The streamed body has the length it says, and a range reads across parts. Through the router, not a
    /// socket: the live test client gives each request 20 s, which a full suite on two cores once exceeded
    /// (the process's two pool threads busy with other suites' work); the end-to-end AttachmentTests move
    /// blobs over real HTTP to a real server, ranges included.
    @Test func aStreamedBlobHasItsLengthAndARangeReadsAcrossParts() async throws {
        try await BlobStoreKind.postgres.run { server in
            let blob = TestBlob(size: 10 * Self.chunk + 3, seed: 17)
            try await server.uploadWhole(blob, scope: "l")
            let headers = try await server.bearer(["l"])
            let whole = try await server.send(.get, "/v1/blobs/\(blob.hash)?scope=l", headers: headers)
            #expect(whole.status == .ok && whole.headers[.contentLength] == String(blob.bytes.count))
            #expect(Array(buffer: whole.body) == blob.bytes)
            var ranged = headers
            ranged[.range] = "bytes=65000-200000"
            let partial = try await server.send(.get, "/v1/blobs/\(blob.hash)?scope=l", headers: ranged)
            #expect(
                partial.status == .partialContent && Array(buffer: partial.body) == Array(blob.bytes[65_000...200_000]))
            let head = try await server.send(.head, "/v1/blobs/\(blob.hash)?scope=l", headers: headers)
            #expect(head.status == .ok && head.headers[.contentLength] == String(blob.bytes.count))
        }
    }

    func expectError(
        _ response: TestResponse, _ status: Int, _ code: ErrorCode, _ server: TestServer,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(response.status.code == status, "\(String(buffer: response.body))", sourceLocation: sourceLocation)
        #expect(try server.error(response).code == code, sourceLocation: sourceLocation)
    }
}

/// The stores the tests run with.
enum BlobStoreKind: String, CaseIterable, Sendable {
    case postgres
    case directory

    /// A test server with `TestDomain`, 64 KiB chunks and this store (a fresh directory for `directory`).
    func run(
        live: Bool = false, configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ test: @Sendable (TestServer) async throws -> Void
    ) async throws {
        try await TestDatabase.with(citus: TestServer.onCitus) { database in
            defer { removeDirectory(of: database) }
            try await run(on: database, live: live, configure: configure) { server in try await test(server) }
        }
    }

    /// Removes what a `directory` store kept for `database`.
    func removeDirectory(of database: TestDatabase) {
        if self == .directory { try? FileManager.default.removeItem(atPath: Self.directory(of: database)) }
    }

    /// A test server on `database`; a `directory` store lives in a directory named after the database, so that a
    /// second server on the same database finds what the first stored.
    func run<Result: Sendable>(
        on database: TestDatabase, live: Bool = false,
        configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ test: @Sendable (TestServer) async throws -> Result
    ) async throws -> Result {
        let directory = Self.directory(of: database)
        let result = Mutex<Result?>(nil)
        try await TestServer.run(
            on: database, live: live, domain: TestDomain(),
            configure: { [self] configuration in
                configuration.blobs.chunkBytes = BlobTests.chunk
                configuration.blobs.sweepIntervalSeconds = 0
                if self == .directory { configuration.blobs.store = .directory(directory) }
                configure(&configuration)
            }
        ) { server in
            let value = try await test(server)
            result.withLock { $0 = value }
        }
        return result.withLock { $0! }
    }

    static func directory(of database: TestDatabase) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("sync-blobs-\(database.name)").path
    }

    /// The parts the store holds, of uploads and of blobs.
    func storedParts(_ server: TestServer) async throws -> Int {
        switch self {
        case .postgres:
            return Int(try await server.database.integers("SELECT count(*) FROM blob_parts").first ?? 0)
        case .directory:
            let root = Self.directory(of: server.database)
            let files = FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? []
            return files.filter { path in
                var isDirectory: ObjCBool = false
                FileManager.default.fileExists(atPath: "\(root)/\(path)", isDirectory: &isDirectory)
                return !isDirectory.boolValue && !path.contains("/trash/")
            }.count
        }
    }

    /// Runs `body` with a `BlobService` on the server's database and this store, as the server's sweep uses it.
    func withService<Result: Sendable>(
        _ server: TestServer, _ body: @Sendable (BlobService) async throws -> Result
    ) async throws -> Result {
        try await TestServer.withClient(server.database) { client in
            let metrics = ServerMetrics(factory: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
            let database = Database(client: client, queueLimit: 16, acquireTimeout: .seconds(10), metrics: metrics)
            let store: any BlobStore =
                self == .postgres
                ? PostgresBlobStore(database: database, logger: TestDatabase.logger)
                : try DirectoryBlobStore(directory: Self.directory(of: server.database))
            var configuration = BlobConfiguration()
            configuration.chunkBytes = BlobTests.chunk
            return try await body(
                BlobService(database: database, store: store, configuration: configuration, metrics: metrics))
        }
    }
}

/// Bytes of a test blob, reproducible from a seed, with the hash and type it is uploaded with.
struct TestBlob: Sendable {
    var bytes: [UInt8]
    var hash: BlobHash
    var type = "application/octet-stream"

    init(bytes: [UInt8], hash: BlobHash, type: String = "application/octet-stream") {
        self.bytes = bytes
        self.hash = hash
        self.type = type
    }

    init(size: Int, seed: UInt64, type: String = "application/octet-stream") {
        var random = SplitMix64(seed: seed)
        let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
        self.init(bytes: bytes, hash: .sha256(of: bytes), type: type)
    }

    var reference: BlobReference { BlobReference(hash: hash, size: Int64(bytes.count), type: type) }

    func chunk(_ index: Int) -> [UInt8] {
        let range = UploadState.chunkRange(index, size: Int64(bytes.count), chunkSize: BlobTests.chunk)
        return Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)])
    }
}

extension TestServer {
    func openUpload(_ blob: TestBlob, scope: Scope, scopes: [String]? = nil, subject: String = "alice")
        async throws -> TestResponse
    {
        let request = UploadRequest(scope: scope, reference: blob.reference)
        return try await send(
            .post, "/v1/uploads", headers: try await bearer(scopes ?? [scope.name], subject: subject),
            body: try codec.encode(request))
    }

    /// Sends a chunk with `sha` as its `X-Chunk-SHA256` (by default the SHA-256 of `bytes`), or none
    /// `withoutHash`.
    func putChunk(
        _ id: String, _ index: Int, _ bytes: [UInt8], sha: String? = nil, withoutHash: Bool = false, scopes: [String]
    ) async throws -> TestResponse {
        var headers = try await bearer(scopes)
        headers[.contentType] = "application/octet-stream"
        if !withoutHash { headers[.init(BlobHeader.chunkSHA256)!] = sha ?? BlobHash.sha256(of: bytes).hex }
        return try await send(.put, "/v1/uploads/\(id)/chunks/\(index)", headers: headers, body: Data(bytes))
    }

    func commit(_ id: String, scopes: [String]) async throws -> TestResponse {
        try await send(.post, "/v1/uploads/\(id)/commit", headers: try await bearer(scopes))
    }

    /// Uploads and commits `blob` in `scope`.
    func uploadWhole(_ blob: TestBlob, scope: Scope) async throws {
        let state = try uploadState(try await openUpload(blob, scope: scope))
        guard let id = state.upload else { return }
        for index in state.missing {
            _ = try uploadState(try await putChunk(id, index, blob.chunk(index), scopes: [scope.name]))
        }
        guard try uploadState(try await commit(id, scopes: [scope.name])).committed else {
            throw TestServerError("the upload of \(blob.hash) did not commit")
        }
    }

    /// The `UploadState` of a 200 answer.
    func uploadState(_ response: TestResponse) throws -> UploadState {
        guard response.status == .ok else {
            throw TestServerError("expected 200, got \(response.status): \(String(buffer: response.body))")
        }
        return try decode(UploadState.self, response)
    }
}
