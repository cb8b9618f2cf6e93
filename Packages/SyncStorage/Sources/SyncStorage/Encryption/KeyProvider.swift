import Foundation

#if canImport(Security)
    import Security
#endif

/// The keys of one encrypted database: the one its file is encrypted with, and the next one while a
/// `rekey` is under way (so that a crash between rewriting the file and recording the new key leaves a key
/// that opens it).
public struct DatabaseKeys: Sendable, Equatable {
    public var current: DatabaseKey?
    public var next: DatabaseKey?

    public init(current: DatabaseKey? = nil, next: DatabaseKey? = nil) {
        self.current = current
        self.next = next
    }
}

/// Where an app keeps the keys of an encrypted database: `FileKeyProvider` (Linux, servers, the agent),
/// `KeychainKeyProvider` (Apple platforms), `PassphraseKeyProvider`, or the app's own (a hardware token, a key
/// server). `store` must replace both keys at once: after a crash the provider holds the old pair or the new
/// one, never half of each.
public protocol KeyProvider: Sendable {
    /// The stored keys; both nil when none was ever stored.
    func load() throws -> DatabaseKeys
    /// Replaces the stored keys, durably, at once.
    func store(_ keys: DatabaseKeys) throws
    /// Destroys the keys (logout): afterwards nothing the provider held can open the database.
    func destroy() throws
    /// Stores `keys` if the provider holds none, at once: of several processes or threads that make a first
    /// key together, one stores its key and all the others get that one back. Returns the keys stored.
    func storeIfEmpty(_ keys: DatabaseKeys) throws -> DatabaseKeys
}

extension KeyProvider {
    /// A load, then a store if empty: enough for a provider that one process at a time uses.
    public func storeIfEmpty(_ keys: DatabaseKeys) throws -> DatabaseKeys {
        let stored = try load()
        guard stored == DatabaseKeys() else { return stored }
        try store(keys)
        return keys
    }
}

/// Keys in a file only its owner may read (mode 0600; a file readable by others is refused): one line per
/// key, `current <hex>` and `next <hex>`. Replaced through a temporary file, `fsync` and `rename`.
public struct FileKeyProvider: KeyProvider {
    public let path: String

    public init(path: String) { self.path = path }

    public func load() throws -> DatabaseKeys {
        var status = stat()
        guard stat(path, &status) == 0 else {
            if errno == ENOENT { return DatabaseKeys() }
            throw StorageError(
                code: "storage.keyFile",
                message: "cannot read the key file \(path): \(String(cString: strerror(errno)))")
        }
        guard status.st_mode & 0o077 == 0 else {
            throw StorageError(
                code: "storage.keyFile",
                message:
                    "the key file \(path) can be read by others (mode \(String(status.st_mode & 0o777, radix: 8))); run chmod 600"
            )
        }
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw StorageError(code: "storage.keyFile", message: "cannot read the key file \(path)")
        }
        return try Self.parse(text, path: path)
    }

    public func store(_ keys: DatabaseKeys) throws {
        try DurableFile.replace(path, with: Data(Self.text(keys).utf8), mode: 0o600)
    }

    public func destroy() throws {
        try DurableFile.remove(path)
    }

    /// The key file made with `link`, which fails if the file exists: a first key made by several replicas at
    /// once (a load run's, sharing one key file) is the same for all of them.
    public func storeIfEmpty(_ keys: DatabaseKeys) throws -> DatabaseKeys {
        let stored = try load()
        guard stored == DatabaseKeys() else { return stored }
        try DurableFile.create(path, with: Data(Self.text(keys).utf8), mode: 0o600)
        return try load()
    }

    static func text(_ keys: DatabaseKeys) -> String {
        var text = ""
        if let current = keys.current { text += "current \(hex(current))\n" }
        if let next = keys.next { text += "next \(hex(next))\n" }
        return text
    }

    static func hex(_ key: DatabaseKey) -> String {
        key.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
    }

    static func parse(_ text: String, path: String) throws -> DatabaseKeys {
        var keys = DatabaseKeys()
        for line in text.split(whereSeparator: \.isNewline) {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let bytes = Self.bytes(hex: parts[1]), bytes.count == 32 else {
                throw StorageError(
                    code: "storage.keyFile",
                    message: "the key file \(path) has a line that is not `current|next <64 hex digits>`")
            }
            switch parts[0] {
            case "current": keys.current = try DatabaseKey(bytes: bytes)
            case "next": keys.next = try DatabaseKey(bytes: bytes)
            default:
                throw StorageError(code: "storage.keyFile", message: "the key file \(path) has an unknown line")
            }
        }
        return keys
    }

    static func bytes(hex: Substring) -> [UInt8]? {
        guard hex.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.count / 2)
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}

/// A key derived from a passphrase (`DatabaseKey.derive`) once, when the provider is made. Its salt is kept in
/// `saltPath` (created with 16 random bytes on first use). A passphrase's key changes only with the
/// passphrase: `store` accepts only the key it derived, so rekey with another provider's keys.
public struct PassphraseKeyProvider: KeyProvider {
    public let saltPath: String
    let key: DatabaseKey

    public init(passphrase: String, saltPath: String, iterations: Int = 600_000) throws {
        self.saltPath = saltPath
        var salt = (try? Data(contentsOf: URL(fileURLWithPath: saltPath))) ?? Data()
        if salt.isEmpty {
            salt = DatabaseKey.random().withUnsafeBytes { Data($0.prefix(16)) }
            try DurableFile.replace(saltPath, with: salt, mode: 0o600)
        }
        self.key = try DatabaseKey.derive(passphrase: passphrase, salt: salt, iterations: iterations)
    }

    public func load() throws -> DatabaseKeys { DatabaseKeys(current: key) }

    public func store(_ keys: DatabaseKeys) throws {
        guard keys == DatabaseKeys(current: key) else {
            throw StorageError(code: "storage.keyFile", message: "a passphrase's key changes only with the passphrase")
        }
    }

    public func destroy() throws {
        try DurableFile.remove(saltPath)
    }
}

#if canImport(Security)
    /// Keys in the Keychain, as one generic password item (`service`, `account`) readable only when the device
    /// is unlocked and never synced to other devices (`kSecAttrAccessibleWhenUnlockedThisDeviceOnly`).
    public struct KeychainKeyProvider: KeyProvider {
        public let service: String
        public let account: String

        public init(service: String, account: String) {
            self.service = service
            self.account = account
        }

        var query: [String: Any] {
            [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrAccount as String: account,
            ]
        }

        public func load() throws -> DatabaseKeys {
            var query = self.query
            query[kSecReturnData as String] = true
            query[kSecMatchLimit as String] = kSecMatchLimitOne
            var item: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &item)
            if status == errSecItemNotFound { return DatabaseKeys() }
            guard status == errSecSuccess, let data = item as? Data, let text = String(data: data, encoding: .utf8)
            else { throw StorageError(code: "storage.keychain", message: "the Keychain refused the read (\(status))") }
            return try FileKeyProvider.parse(text, path: "Keychain \(service)/\(account)")
        }

        public func store(_ keys: DatabaseKeys) throws {
            let data = Data(FileKeyProvider.text(keys).utf8)
            let update = SecItemUpdate(query as CFDictionary, [kSecValueData as String: data] as CFDictionary)
            if update == errSecSuccess { return }
            guard update == errSecItemNotFound else {
                throw StorageError(code: "storage.keychain", message: "the Keychain refused the update (\(update))")
            }
            var add = query
            add[kSecValueData as String] = data
            add[kSecAttrAccessible as String] = kSecAttrAccessibleWhenUnlockedThisDeviceOnly
            let status = SecItemAdd(add as CFDictionary, nil)
            guard status == errSecSuccess else {
                throw StorageError(code: "storage.keychain", message: "the Keychain refused the key (\(status))")
            }
        }

        public func destroy() throws {
            let status = SecItemDelete(query as CFDictionary)
            guard status == errSecSuccess || status == errSecItemNotFound else {
                throw StorageError(code: "storage.keychain", message: "the Keychain refused the deletion (\(status))")
            }
        }
    }
#endif
