import Foundation
import GRDB
import SyncTestSupport
import Testing

@testable import SyncStorage

/// Encryption at rest, on real files: what reaches the disk, keys, damage, and the in-place rewrites.
@Suite struct EncryptionTests {
    static let secrets = [
        "Quarterly salaries of the Lisbon office", "passport number K4729911", "eyJhbGciOiJFZERTQSJ9",
    ]

    static var migrations: SchemaMigrations {
        var migrations = SchemaMigrations()
        migrations.register("test.v1") { db in
            try db.execute(sql: "CREATE TABLE note (id INTEGER PRIMARY KEY, title TEXT, body TEXT)")
            try db.execute(sql: "CREATE INDEX note_title ON note (title)")
        }
        return migrations
    }

    /// A database of `rows` notes whose titles and bodies repeat the secrets.
    static func fill(_ database: SyncDatabase, rows: Int, from first: Int = 0) throws {
        try database.migrate(migrations)
        try database.writer.write { db in
            for index in first..<first + rows {
                let secret = secrets[index % secrets.count]
                try db.execute(
                    sql: "INSERT INTO note (id, title, body) VALUES (?, ?, ?)",
                    arguments: [index, "\(secret) \(index)", String(repeating: secret + " ", count: 20)])
            }
        }
    }

    static func count(_ database: SyncDatabase) throws -> Int {
        try database.writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM note") ?? 0 }
    }

    /// Plain SQLite, whatever `SYNC_STORAGE_KEY_FILE` says (the suites also run with it set).
    static var plain: StorageConfiguration {
        var configuration = StorageConfiguration()
        configuration.encryption = nil
        return configuration
    }

    static func encrypted(_ keys: any KeyProvider) -> StorageConfiguration {
        var configuration = StorageConfiguration()
        configuration.encryption = DatabaseEncryption(keys: keys)
        return configuration
    }

    /// Every file in `directory` (the database, WAL, shared memory, journals, key files), whole.
    static func files(in directory: TemporaryDirectory) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.url.path) {
            files[name] = try Data(contentsOf: directory.url.appendingPathComponent(name))
        }
        return files
    }

    static func plaintextFound(in files: [String: Data]) -> [String] {
        var found: [String] = []
        for (name, bytes) in files {
            for secret in secrets where bytes.range(of: Data(secret.utf8)) != nil { found.append("\(name): \(secret)") }
            if bytes.starts(with: Data("SQLite format 3".utf8)) { found.append("\(name): SQLite header") }
        }
        return found
    }

    @Test func noPlaintextReachesAnyFileWhileOpenOrAfter() throws {
        let directory = try TemporaryDirectory()
        let keys = FileKeyProvider(path: directory.path("keys"))
        var configuration = Self.encrypted(keys)
        configuration.backgroundCheckpointPages = 0  // keep pages in the WAL while the file is copied below
        let database = try SyncDatabase(path: directory.path("device.sqlite"), configuration: configuration)
        try Self.fill(database, rows: 3_000)
        try database.writer.write { db in
            // A sort larger than SQLite's memory for sorts, and a temporary table: no temporary file on disk.
            try db.execute(sql: "CREATE TEMP TABLE scratch AS SELECT * FROM note ORDER BY body, title")
            try db.execute(sql: "UPDATE note SET body = body || title WHERE id % 7 = 0")
        }
        let whileOpen = try Self.files(in: directory)
        #expect(whileOpen["device.sqlite-wal"].map { $0.count > 100_000 } == true, "the WAL holds pages")
        #expect(Self.plaintextFound(in: whileOpen) == [])
        #expect(try Self.count(database) == 3_000)
        try database.checkpoint()
        #expect(Self.plaintextFound(in: try Self.files(in: directory)) == [])
        #expect(try SyncDatabase.fileKind(at: directory.path("device.sqlite")) == .encrypted)
        #expect(PageCipher.counters.pagesSealed > 0)
        var status = stat()
        #expect(stat(directory.path("keys"), &status) == 0 && status.st_mode & 0o777 == 0o600)
    }

    @Test func reopensWithItsKeyAndKeepsEverything() async throws {
        let directory = try TemporaryDirectory()
        let keys = FileKeyProvider(path: directory.path("keys"))
        do {
            let database = try SyncDatabase(path: directory.path("a.sqlite"), configuration: Self.encrypted(keys))
            try Self.fill(database, rows: 500)
        }
        let database = try SyncDatabase(path: directory.path("a.sqlite"), configuration: Self.encrypted(keys))
        #expect(try Self.count(database) == 500)
        let findings = try await database.verifyPages()
        #expect(findings == [])
        let pageSize = try await database.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") }
        #expect(pageSize == 4096)
    }

    @Test func theWrongKeyOrNoneIsAClearErrorAndChangesNothing() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("a.sqlite")
        do {
            let database = try SyncDatabase(
                path: path, configuration: Self.encrypted(FileKeyProvider(path: directory.path("keys"))))
            try Self.fill(database, rows: 100)
        }
        let before = try Self.files(in: directory)
        let other = FileKeyProvider(path: directory.path("other-keys"))
        try other.store(DatabaseKeys(current: .random()))
        let wrong = #expect(throws: StorageError.self) {
            _ = try SyncDatabase(path: path, configuration: Self.encrypted(other))
        }
        #expect(wrong?.code == "storage.wrongKey")
        #expect(wrong?.message.contains(path) == true)
        // Without a key: SQLite sees no database.
        #expect(throws: DatabaseError.self) {
            let database = try SyncDatabase(path: path, configuration: Self.plain)
            _ = try Self.count(database)
        }
        var after = try Self.files(in: directory)
        after["other-keys"] = nil
        #expect(after == before)
    }

    /// Replicas that share one key file and make its first key at the same instant (a load run's) all get the
    /// same key: each file opens again afterwards.
    @Test func replicasMakingTheFirstKeyTogetherShareIt() async throws {
        let directory = try TemporaryDirectory()
        let keys = FileKeyProvider(path: directory.path("keys"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<16 {
                group.addTask {
                    let database = try SyncDatabase(
                        path: directory.path("r\(index).sqlite"), configuration: Self.encrypted(keys))
                    try Self.fill(database, rows: 5)
                }
            }
            try await group.waitForAll()
        }
        for index in 0..<16 {
            let database = try SyncDatabase(
                path: directory.path("r\(index).sqlite"), configuration: Self.encrypted(keys))
            #expect(try Self.count(database) == 5)
        }
    }

    @Test func aKeyFileReadableByOthersIsRefused() throws {
        let directory = try TemporaryDirectory()
        let keys = FileKeyProvider(path: directory.path("keys"))
        try keys.store(DatabaseKeys(current: .random()))
        chmod(directory.path("keys"), 0o644)
        let error = #expect(throws: StorageError.self) { _ = try keys.load() }
        #expect(error?.code == "storage.keyFile")
    }

    @Test func aFlippedByteInTheFileIsNamedAndNothingWrongIsReturned() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("a.sqlite")
        let keys = FileKeyProvider(path: directory.path("keys"))
        do {
            let database = try SyncDatabase(path: path, configuration: Self.encrypted(keys))
            try Self.fill(database, rows: 2_000)
        }
        let size = try #require(DurableFile.size(path))
        let page = size / 4096 / 2  // a page in the middle, 0-based
        try Self.flip(path: path, at: page * 4096 + 1000)
        let database = try SyncDatabase(path: path, configuration: Self.encrypted(keys))
        let failure = await #expect(throws: StorageError.self) { _ = try await database.verifyPages() }
        #expect(failure?.code == "storage.pageAuthentication")
        #expect(failure?.message.contains("page \(page + 1) of \(path) ") == true, "\(failure?.message ?? "")")
    }

    /// A database of 2,000 notes, closed, then every note changed (every page of the table and the index written
    /// again) and closed again: the file before the change and the path.
    static func changedTwice(in directory: TemporaryDirectory, keys: FileKeyProvider) async throws -> (
        before: Data, path: String
    ) {
        let path = directory.path("a.sqlite")
        do { try Self.fill(SyncDatabase(path: path, configuration: Self.encrypted(keys)), rows: 2_000) }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        do {
            let database = try SyncDatabase(path: path, configuration: Self.encrypted(keys))
            try await database.writer.write { db in
                try db.execute(sql: "UPDATE note SET title = title || ' (2)', body = upper(body)")
            }
        }
        return (before, path)
    }

    @Test func aPageFromAnOlderCopyOfTheFileIsNamedAndNothingOldIsReturned() async throws {
        let directory = try TemporaryDirectory()
        let keys = FileKeyProvider(path: directory.path("keys"))
        let (before, path) = try await Self.changedTwice(in: directory, keys: keys)
        #expect(DurableFile.exists(path + SyncDatabase.versionsSuffix))
        var file = try Data(contentsOf: URL(fileURLWithPath: path))
        // A page written again since the copy, from the middle of the file: its older version put back.
        let changed = (1..<before.count / 4096).filter { page in
            file[page * 4096..<(page + 1) * 4096] != before[page * 4096..<(page + 1) * 4096]
        }
        #expect(changed.count > before.count / 4096 / 2, "most pages were written again")
        let page = changed[changed.count / 2]
        file.replaceSubrange(page * 4096..<(page + 1) * 4096, with: before[page * 4096..<(page + 1) * 4096])
        try file.write(to: URL(fileURLWithPath: path))
        // The old page still authenticates: only its version gives it away.
        let database = try SyncDatabase(path: path, configuration: Self.encrypted(keys))
        let failure = await #expect(throws: StorageError.self) { _ = try await database.verifyPages() }
        #expect(failure?.code == "storage.pageVersion")
        #expect(failure?.message.contains("page \(page + 1) of \(path) is older") == true, "\(failure?.message ?? "")")
    }

    @Test func pageVersionsThatDoNotAuthenticateRefuseTheFileUntilRemoved() async throws {
        let directory = try TemporaryDirectory()
        let keys = FileKeyProvider(path: directory.path("keys"))
        let (_, path) = try await Self.changedTwice(in: directory, keys: keys)
        let versions = path + SyncDatabase.versionsSuffix
        try Self.flip(path: versions, at: try #require(DurableFile.size(versions)) - 100)
        let failure = #expect(throws: StorageError.self) {
            _ = try Self.count(SyncDatabase(path: path, configuration: Self.encrypted(keys)))
        }
        #expect(failure?.code == "storage.pageVersion")
        #expect(failure?.message.contains("\(versions) does not authenticate") == true, "\(failure?.message ?? "")")
        try DurableFile.remove(versions)
        let database = try SyncDatabase(path: path, configuration: Self.encrypted(keys))
        #expect(try Self.count(database) == 2_000)
        #expect(try await database.verifyPages() == [])
    }

    @Test func aFrameMovedWithinTheWALIsNamed() throws {
        let (copy, keys) = try Self.crashedCopy(transactions: 5)
        let wal = copy.path("a.sqlite-wal")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: wal))
        let frame = 24 + 4096
        #expect((bytes.count - 32) / frame >= 4)
        // Frame 2, header and page, copied over frame 4: the same log's salts, a page that authenticates.
        bytes.replaceSubrange(32 + 3 * frame..<32 + 4 * frame, with: bytes[32 + frame..<32 + 2 * frame])
        try bytes.write(to: URL(fileURLWithPath: wal))
        let failure = #expect(throws: StorageError.self) {
            _ = try Self.count(SyncDatabase(path: copy.path("a.sqlite"), configuration: Self.encrypted(keys)))
        }
        #expect(failure?.code == "storage.pageAuthentication")
        #expect(failure?.message.contains("frame 4 of \(wal) ") == true, "\(failure?.message ?? "")")
    }

    /// A copy of an encrypted database and its WAL as a crash would leave them: 20 notes in the file, then
    /// `transactions` transactions of 20 more in the WAL.
    static func crashedCopy(transactions: Int) throws -> (directory: TemporaryDirectory, keys: FileKeyProvider) {
        let directory = try TemporaryDirectory()
        let copy = try TemporaryDirectory()
        let keys = FileKeyProvider(path: copy.path("keys"))
        var configuration = Self.encrypted(keys)
        configuration.backgroundCheckpointPages = 0
        let database = try SyncDatabase(path: directory.path("a.sqlite"), configuration: configuration)
        try Self.fill(database, rows: 20)
        try database.checkpoint()
        for index in 1...transactions { try Self.fill(database, rows: 20, from: 20 * index) }
        for name in ["a.sqlite", "a.sqlite-wal"] {
            try FileManager.default.copyItem(atPath: directory.path(name), toPath: copy.path(name))
        }
        return (copy, keys)
    }

    @Test func aFlippedByteInTheWALIsNamedWhenTheLogIsRecovered() throws {
        let (copy, keys) = try Self.crashedCopy(transactions: 5)
        let wal = copy.path("a.sqlite-wal")
        try Self.flip(path: wal, at: 32 + (24 + 4096) * 1 + 24 + 500)  // inside frame 2's page
        let failure = #expect(throws: StorageError.self) {
            let damaged = try SyncDatabase(path: copy.path("a.sqlite"), configuration: Self.encrypted(keys))
            _ = try Self.count(damaged)
        }
        #expect(failure?.code == "storage.pageAuthentication")
        #expect(failure?.message.contains("frame 2 of \(wal) ") == true, "\(failure?.message ?? "")")
    }

    @Test func aTornLastFrameIsTheLogsEndAsInPlaintext() throws {
        let (copy, keys) = try Self.crashedCopy(transactions: 1)
        // A frame appended by a write that never finished: a copy of the first frame's header, its page torn.
        let wal = copy.path("a.sqlite-wal")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: wal))
        let frames = (bytes.count - 32) / (24 + 4096)
        bytes.append(bytes[32..<32 + 24])
        bytes.append(Data(repeating: 0x5a, count: 4096))
        try bytes.write(to: URL(fileURLWithPath: wal))
        let reopened = try SyncDatabase(path: copy.path("a.sqlite"), configuration: Self.encrypted(keys))
        #expect(try Self.count(reopened) == 40)
        #expect(frames >= 1)
    }

    @Test func aPlaintextFileIsEncryptedInPlaceOnFirstOpen() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("a.sqlite")
        do { try Self.fill(try SyncDatabase(path: path, configuration: Self.plain), rows: 700) }
        #expect(try SyncDatabase.fileKind(at: path) == .plaintext)
        let keys = FileKeyProvider(path: directory.path("keys"))
        let database = try SyncDatabase(path: path, configuration: Self.encrypted(keys))
        #expect(try Self.count(database) == 700)
        #expect(try SyncDatabase.fileKind(at: path) == .encrypted)
        #expect(Self.plaintextFound(in: try Self.files(in: directory)) == [])
    }

    struct Stop: Error {}

    @Test(arguments: [EncryptionStep.checkpointed, .copyWritten, .copySynced, .renamed])
    func encryptStoppedAtAnyStepLeavesOneCompleteFile(_ step: EncryptionStep) throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("a.sqlite")
        do { try Self.fill(try SyncDatabase(path: path, configuration: Self.plain), rows: 700) }
        let keys = FileKeyProvider(path: directory.path("keys"))
        #expect(throws: Stop.self) {
            try SyncDatabase.encrypt(path: path, keys: keys) { if $0 == step { throw Stop() } }
        }
        let kind = try SyncDatabase.fileKind(at: path)
        #expect(kind == (step == .renamed ? .encrypted : .plaintext))
        if kind == .plaintext { #expect(try Self.count(SyncDatabase(path: path, configuration: Self.plain)) == 700) }
        let database = try SyncDatabase(path: path, configuration: Self.encrypted(keys))
        #expect(try Self.count(database) == 700)
        #expect(!DurableFile.exists(path + SyncDatabase.encryptingSuffix))
    }

    @Test(arguments: [EncryptionStep.nextKeyStored, .checkpointed, .copyWritten, .copySynced, .renamed, .keyCommitted])
    func rekeyStoppedAtAnyStepOpensUnderExactlyOneKey(_ step: EncryptionStep) throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("a.sqlite")
        let keys = FileKeyProvider(path: directory.path("keys"))
        do { try Self.fill(SyncDatabase(path: path, configuration: Self.encrypted(keys)), rows: 700) }
        let old = try #require(try keys.load().current)
        let new = DatabaseKey.random()
        #expect(throws: Stop.self) {
            try SyncDatabase.rekey(path: path, keys: keys, to: new) { if $0 == step { throw Stop() } }
        }
        let page = try DurableFile.prefix(path, count: 4096)
        let opens = [old, new].filter { PageCipher.firstPageOpens(page, with: $0) }
        #expect(opens == (step == .renamed || step == .keyCommitted ? [new] : [old]))
        let database = try SyncDatabase(path: path, configuration: Self.encrypted(keys))
        #expect(try Self.count(database) == 700)
        #expect(try keys.load() == DatabaseKeys(current: opens[0]))
    }

    @Test func rekeyReplacesTheKeyAndTheOldOneNoLongerOpens() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("a.sqlite")
        let keys = FileKeyProvider(path: directory.path("keys"))
        do { try Self.fill(SyncDatabase(path: path, configuration: Self.encrypted(keys)), rows: 300) }
        let old = try #require(try keys.load().current)
        try SyncDatabase.rekey(path: path, keys: keys)
        let page = try DurableFile.prefix(path, count: 4096)
        #expect(!PageCipher.firstPageOpens(page, with: old))
        #expect(try Self.count(SyncDatabase(path: path, configuration: Self.encrypted(keys))) == 300)
        #expect(Self.plaintextFound(in: try Self.files(in: directory)) == [])
    }

    @Test func destroyRemovesTheKeyAndEveryFile() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("a.sqlite")
        let keys = FileKeyProvider(path: directory.path("keys"))
        do { try Self.fill(SyncDatabase(path: path, configuration: Self.encrypted(keys)), rows: 300) }
        try SyncDatabase.destroy(path: path, keys: keys)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path) == [])
        #expect(try keys.load() == DatabaseKeys())
    }

    @Test func aPassphraseDerivesTheSameKeyFromTheSameSalt() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("a.sqlite")
        let first = try PassphraseKeyProvider(passphrase: "correct horse", saltPath: directory.path("salt"))
        do { try Self.fill(SyncDatabase(path: path, configuration: Self.encrypted(first)), rows: 10) }
        let again = try PassphraseKeyProvider(passphrase: "correct horse", saltPath: directory.path("salt"))
        #expect(try Self.count(SyncDatabase(path: path, configuration: Self.encrypted(again))) == 10)
        let wrong = try PassphraseKeyProvider(passphrase: "battery staple", saltPath: directory.path("salt"))
        #expect(throws: StorageError.self) { _ = try SyncDatabase(path: path, configuration: Self.encrypted(wrong)) }
    }

    /// The format as docs/ARCHITECTURE.md describes it, read by another implementation: Python's `cryptography`
    /// (`scripts/decrypt-database.py`) decrypts the file and Python's own SQLite reads the rows.
    @Test func anIndependentReaderDecryptsTheFile() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("a.sqlite")
        let keys = FileKeyProvider(path: directory.path("keys"))
        do {
            let database = try SyncDatabase(path: path, configuration: Self.encrypted(keys))
            try Self.fill(database, rows: 1_500)
        }
        #expect(!DurableFile.exists(path + "-wal"))
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let script = root.appendingPathComponent("scripts/decrypt-database.py").path
        let plain = directory.path("plain.sqlite")
        let check = """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            print(db.execute("PRAGMA integrity_check").fetchone()[0], db.execute("SELECT count(*) FROM note").fetchone()[0],
                  db.execute("SELECT title FROM note WHERE id = 4").fetchone()[0])
            """
        let decrypt = try Self.run("/usr/bin/env", ["python3", script, path, directory.path("keys"), plain])
        #expect(decrypt.status == 0, "\(decrypt.output)")
        let read = try Self.run("/usr/bin/env", ["python3", "-c", check, plain])
        #expect(read.output == "ok 1500 \(Self.secrets[1]) 4\n", "\(read.output)")
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    /// Linux seals pages through OpenSSL, Apple platforms through the Swift hooks (CryptoKit): both are the
    /// same cipher, each opening what the other sealed.
    @Test func theNativeCipherAndTheSwiftOneAgree() throws {
        #expect(PageCipher.crossCheck() == 0)
    }

    /// Flips one bit of the byte at `offset`.
    static func flip(path: String, at offset: Int) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        let byte = try #require(try handle.read(upToCount: 1)).first!
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: [byte ^ 0x10])
    }
}
