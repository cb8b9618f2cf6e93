#ifndef CSYNCCIPHER_H
#define CSYNCCIPHER_H

#include <stdint.h>

/// The page format of an encrypted database file (docs/ARCHITECTURE.md, "Encryption at rest").
#define SYNC_CIPHER_PAGE_SIZE 4096
/// Bytes SQLite leaves free at the end of every page: nonce (12), tag (16), counter (8), zero (4). The counter is
/// the page's version in the main file (increasing with every write of the page), the frame's number in a WAL
/// (from 1), zero in a rollback journal.
#define SYNC_CIPHER_RESERVE 40
#define SYNC_CIPHER_NONCE 12
#define SYNC_CIPHER_TAG 16
#define SYNC_CIPHER_SALT 16
/// Additional data bound to each page: salt (16), kind (1), page number (8), WAL salts (8), counter (8).
#define SYNC_CIPHER_AAD 41

/// The cryptography, supplied by Swift (swift-crypto: ChaCha20-Poly1305, HKDF-SHA256, the system's CSPRNG).
typedef struct SyncCipherHooks {
    /// Encrypts `data` in place, writing a fresh random nonce and the tag. Returns 0 on success.
    int (*seal)(void *fileKey, uint8_t *data, int length, const uint8_t *aad, int aadLength, uint8_t *nonce,
                uint8_t *tag);
    /// Decrypts `data` in place if the tag authenticates it with `aad`. Returns 0 on success.
    int (*open)(void *fileKey, uint8_t *data, int length, const uint8_t *aad, int aadLength,
                const uint8_t *nonce, const uint8_t *tag);
    /// The key of one file, derived from the database key and the file's salt (retained; freed by `release`).
    void *(*deriveFileKey)(void *databaseKey, const uint8_t *salt);
    /// Copies the 32 bytes of a key returned by `deriveFileKey` (for the native cipher, on Linux).
    void (*keyBytes)(void *fileKey, uint8_t *bytes);
    /// Releases a key returned by `deriveFileKey` or handed to `sync_cipher_register`.
    void (*release)(void *key);
    /// Fills `bytes` from a cryptographically secure generator.
    void (*random)(uint8_t *bytes, int count);
} SyncCipherHooks;

/// Installs the hooks and registers the encrypting VFS as SQLite's default (once per process; later calls do
/// nothing). Files whose database was not registered go to the previous default VFS untouched.
int sync_cipher_install(const SyncCipherHooks *hooks);

/// Encrypts the database at `path` (and its WAL and journal) with `databaseKey` from now on; the registry takes
/// ownership of the key. Returns SQLITE_OK, or SQLITE_MISUSE if the path is registered already.
int sync_cipher_register(const char *path, void *databaseKey);

/// Forgets `path`: connections opened later see the file as it is. Open connections keep their key until they
/// close.
void sync_cipher_unregister(const char *path);

/// Why a page was refused (`sync_cipher_last_failure`).
typedef enum SyncCipherFailure {
    /// The page does not authenticate: damaged, from another file or position, or another key's.
    SyncCipherFailureAuthentication = 0,
    /// The page authenticates but is older than the version recorded for it in the file's page versions
    /// (`<database>-versions`): a page or file restored from an older copy.
    SyncCipherFailureOlderVersion = 1,
    /// The page versions file of the database does not authenticate: every page of the file is refused.
    SyncCipherFailureVersionsDamaged = 2,
} SyncCipherFailure;

/// The last page that failed authentication in the files of `path`'s database, if any: copies the failing
/// file's name into `file` (at most `capacity` bytes, NUL-terminated), sets `reason`, and returns its page (the
/// frame for a WAL, 0 when nothing failed).
int64_t sync_cipher_last_failure(const char *path, char *file, int capacity, int *reason);

/// Pages of the encrypted files opened so far, read and written, for tests (counted, never timed).
typedef struct SyncCipherCounters {
    int64_t pagesSealed;
    int64_t pagesOpened;
    int64_t failures;
    /// Saves of page versions files.
    int64_t versionsSaved;
} SyncCipherCounters;
SyncCipherCounters sync_cipher_counters(void);

/// Linux: seals a random page with the native cipher and opens it with the hooks, then the other way, and
/// checks a wrong tag is refused: 0 when all agree, -1 where there is no native cipher.
int sync_cipher_cross_check(void *fileKey, const uint8_t *keyBytes);

#endif
