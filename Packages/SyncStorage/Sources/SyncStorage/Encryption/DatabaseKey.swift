import Crypto
import CryptoExtras
import Foundation

/// A 256-bit key that encrypts a database file (`StorageConfiguration.encryption`). Its bytes never appear in
/// a description, a log line or an error.
public struct DatabaseKey: Sendable, Equatable, CustomStringConvertible {
    let key: SymmetricKey

    /// A key of 32 bytes.
    /// - Throws: `StorageError` (`storage.keyInvalid`) for another length.
    public init<Bytes: ContiguousBytes>(bytes: Bytes) throws {
        let key = SymmetricKey(data: bytes)
        guard key.bitCount == 256 else {
            throw StorageError(
                code: "storage.keyInvalid", message: "a database key has 32 bytes, not \(key.bitCount / 8)")
        }
        self.key = key
    }

    /// A fresh key from the system's cryptographically secure generator.
    public static func random() -> DatabaseKey {
        // A 256-bit SymmetricKey is always a valid key.
        DatabaseKey(checked: SymmetricKey(size: .bits256))
    }

    init(checked key: SymmetricKey) { self.key = key }

    /// The key of a passphrase: PBKDF2-HMAC-SHA256 over `salt` (at least 16 random bytes, kept beside the
    /// database; not secret). Derive it once per process and hand the result to every connection: the
    /// derivation is deliberately slow (`iterations`, 600,000 by default as OWASP recommends for SHA-256; at least 210,000).
    public static func derive<Salt: DataProtocol>(passphrase: String, salt: Salt, iterations: Int = 600_000) throws
        -> DatabaseKey
    {
        guard salt.count >= 16 else {
            throw StorageError(code: "storage.keyInvalid", message: "a passphrase's salt has at least 16 bytes")
        }
        let key = try KDF.Insecure.PBKDF2.deriveKey(
            from: Array(passphrase.utf8), salt: salt, using: .sha256, outputByteCount: 32,
            rounds: iterations)
        return DatabaseKey(checked: key)
    }

    /// The key's bytes, for a `KeyProvider` that stores them.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try key.withUnsafeBytes(body)
    }

    /// A short public name of the key (HMAC of a constant; reveals nothing of the key), for logs and for
    /// telling keys apart.
    public var fingerprint: String {
        let code = HMAC<SHA256>.authenticationCode(for: Array("sync database key".utf8), using: key)
        return code.prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    public var description: String { "DatabaseKey(\(fingerprint))" }

    public static func == (lhs: DatabaseKey, rhs: DatabaseKey) -> Bool { lhs.key == rhs.key }
}
