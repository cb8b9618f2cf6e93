import Crypto
import SyncModels

extension BlobHash {
    /// The name of the blob `bytes` are: their SHA-256.
    static func sha256<Bytes: Sequence<UInt8>>(of bytes: Bytes) -> BlobHash {
        var hasher = SHA256()
        hasher.update(data: Array(bytes))
        return BlobHash(digest: hasher.finalize())
    }
}
