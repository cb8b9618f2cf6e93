import CSyncCipher
import Crypto
import Foundation
import Synchronization

/// The cryptography under the encrypting VFS (`CSyncCipher`): ChaCha20-Poly1305 per page, a key per file
/// derived with HKDF-SHA256 from the database key and the file's salt. The page format is in
/// docs/ARCHITECTURE.md ("Encryption at rest").
enum PageCipher {
    static let pageSize = Int(SYNC_CIPHER_PAGE_SIZE)
    static let reserve = Int(SYNC_CIPHER_RESERVE)
    static let saltSize = Int(SYNC_CIPHER_SALT)
    static let sqliteHeader = Array("SQLite format 3\0".utf8)

    final class KeyBox: Sendable {
        let key: SymmetricKey
        init(_ key: SymmetricKey) { self.key = key }
    }

    /// Installs the VFS as SQLite's default, once per process.
    static let installed: Int32 = {
        var hooks = SyncCipherHooks(
            seal: { key, data, length, aad, aadLength, nonce, tag in
                PageCipher.seal(key!, data!, Int(length), aad!, Int(aadLength), nonce!, tag!)
            },
            open: { key, data, length, aad, aadLength, nonce, tag in
                PageCipher.open(key!, data!, Int(length), aad!, Int(aadLength), nonce!, tag!)
            },
            deriveFileKey: { databaseKey, salt in
                let key = Unmanaged<KeyBox>.fromOpaque(databaseKey!).takeUnretainedValue().key
                let salt = UnsafeRawBufferPointer(start: salt!, count: PageCipher.saltSize)
                return Unmanaged.passRetained(KeyBox(PageCipher.fileKey(key, salt: salt))).toOpaque()
            },
            keyBytes: { key, bytes in
                Unmanaged<KeyBox>.fromOpaque(key!).takeUnretainedValue().key.withUnsafeBytes {
                    bytes!.update(from: $0.bindMemory(to: UInt8.self).baseAddress!, count: 32)
                }
            },
            release: { key in Unmanaged<KeyBox>.fromOpaque(key!).release() },
            random: { bytes, count in
                var generator = SystemRandomNumberGenerator()
                for index in 0..<Int(count) { bytes![index] = UInt8.random(in: 0...255, using: &generator) }
            })
        return sync_cipher_install(&hooks)
    }()

    static func fileKey(_ key: SymmetricKey, salt: UnsafeRawBufferPointer) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: key, salt: salt, info: Array("sync-cipher page key 1".utf8), outputByteCount: 32)
    }

    static func seal(
        _ key: UnsafeMutableRawPointer, _ data: UnsafeMutablePointer<UInt8>, _ length: Int,
        _ aad: UnsafePointer<UInt8>, _ aadLength: Int, _ nonce: UnsafeMutablePointer<UInt8>,
        _ tag: UnsafeMutablePointer<UInt8>
    ) -> Int32 {
        let key = Unmanaged<KeyBox>.fromOpaque(key).takeUnretainedValue().key
        do {
            let box = try ChaChaPoly.seal(
                UnsafeRawBufferPointer(start: data, count: length), using: key, nonce: ChaChaPoly.Nonce(),
                authenticating: UnsafeRawBufferPointer(start: aad, count: aadLength))
            box.ciphertext.copyBytes(to: data, count: length)
            box.nonce.withUnsafeBytes { nonce.update(from: $0.bindMemory(to: UInt8.self).baseAddress!, count: 12) }
            box.tag.copyBytes(to: tag, count: 16)
            return 0
        } catch {
            return 1
        }
    }

    static func open(
        _ key: UnsafeMutableRawPointer, _ data: UnsafeMutablePointer<UInt8>, _ length: Int,
        _ aad: UnsafePointer<UInt8>, _ aadLength: Int, _ nonce: UnsafePointer<UInt8>, _ tag: UnsafePointer<UInt8>
    ) -> Int32 {
        let key = Unmanaged<KeyBox>.fromOpaque(key).takeUnretainedValue().key
        do {
            let box = try ChaChaPoly.SealedBox(
                nonce: ChaChaPoly.Nonce(data: UnsafeRawBufferPointer(start: nonce, count: 12)),
                ciphertext: UnsafeRawBufferPointer(start: data, count: length),
                tag: UnsafeRawBufferPointer(start: tag, count: 16))
            let plaintext = try ChaChaPoly.open(
                box, using: key, authenticating: UnsafeRawBufferPointer(start: aad, count: aadLength))
            plaintext.copyBytes(to: data, count: length)
            return 0
        } catch {
            return 1
        }
    }

    /// Whether `page` (the first page of an encrypted file, as on disk) authenticates under `key`.
    static func firstPageOpens(_ page: [UInt8], with key: DatabaseKey) -> Bool {
        guard page.count >= pageSize else { return false }
        let salt = Array(page[0..<saltSize])
        let fileKey = salt.withUnsafeBytes { PageCipher.fileKey(key.key, salt: $0) }
        let reserveStart = pageSize - reserve
        let nonce = page[reserveStart..<reserveStart + 12]
        let tag = page[reserveStart + 12..<reserveStart + 28]
        let counter = page[reserveStart + 28..<reserveStart + 36]
        var aad = salt
        aad.append(UInt8(ascii: "D"))
        aad += [0, 0, 0, 0, 0, 0, 0, 1]
        aad += [UInt8](repeating: 0, count: 8)
        aad += counter
        guard
            let box = try? ChaChaPoly.SealedBox(
                nonce: ChaChaPoly.Nonce(data: nonce), ciphertext: page[saltSize..<reserveStart], tag: tag)
        else { return false }
        return (try? ChaChaPoly.open(box, using: fileKey, authenticating: aad)) != nil
    }

    /// `sync_cipher_cross_check` with a random key: 0 when the native cipher and the hooks agree.
    static func crossCheck() -> Int32 {
        _ = installed
        let key = SymmetricKey(size: .bits256)
        let box = Unmanaged.passRetained(KeyBox(key))
        defer { box.release() }
        return key.withUnsafeBytes { bytes in
            sync_cipher_cross_check(box.toOpaque(), bytes.bindMemory(to: UInt8.self).baseAddress!)
        }
    }

    /// Pages sealed, opened and refused by this process so far (counted, for tests).
    static var counters: SyncCipherCounters { sync_cipher_counters() }
}

/// `path` registered with the VFS for as long as this value lives (a `SyncDatabase` holds one).
final class CipherRegistration: Sendable {
    let path: String

    private static let registered = Mutex<[String: (count: Int, fingerprint: String)]>([:])

    init(path: String, key: DatabaseKey) throws {
        let path = URL(fileURLWithPath: path).standardizedFileURL.path
        self.path = path
        try Self.install()
        try Self.registered.withLock { registered in
            if let existing = registered[path] {
                guard existing.fingerprint == key.fingerprint else {
                    throw StorageError(code: "storage.encryption", message: "\(path) is open under another key")
                }
                registered[path] = (existing.count + 1, existing.fingerprint)
                return
            }
            let box = Unmanaged.passRetained(PageCipher.KeyBox(key.key)).toOpaque()
            let code = sync_cipher_register(path, box)
            guard code == 0 else {
                Unmanaged<PageCipher.KeyBox>.fromOpaque(box).release()
                throw StorageError(
                    code: "storage.encryption", message: "cannot register \(path) for encryption (\(code))")
            }
            registered[path] = (1, key.fingerprint)
        }
    }

    /// Makes the encrypting VFS SQLite's default, once per process.
    static func install() throws {
        guard PageCipher.installed == 0 else {
            throw StorageError(
                code: "storage.encryption", message: "SQLite refused the encrypting VFS (\(PageCipher.installed))")
        }
    }

    deinit {
        Self.registered.withLock { registered in
            guard let existing = registered[path] else { return }
            if existing.count > 1 {
                registered[path] = (existing.count - 1, existing.fingerprint)
            } else {
                registered[path] = nil
                sync_cipher_unregister(path)
            }
        }
    }

    /// The page that last failed authentication in this database's files: its file, page (frame for a WAL) and
    /// why.
    static func lastFailure(path: String) -> (file: String, page: Int, reason: SyncCipherFailure)? {
        var name = [CChar](repeating: 0, count: 1024)
        var reason: Int32 = 0
        let page = sync_cipher_last_failure(URL(fileURLWithPath: path).standardizedFileURL.path, &name, 1024, &reason)
        guard page > 0 else { return nil }
        let file = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return (file, Int(page), SyncCipherFailure(rawValue: UInt32(reason)))
    }
}
