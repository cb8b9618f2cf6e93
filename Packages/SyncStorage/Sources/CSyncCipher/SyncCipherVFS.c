// An encrypting VFS shim over the system SQLite: every page of a registered database's main file, WAL and
// rollback journal is encrypted with authenticated encryption (ChaCha20-Poly1305, supplied by Swift) in the
// bytes SQLite reserves at the end of each page. Temporary files of every connection are kept in memory
// once a database is registered. The page format is in docs/ARCHITECTURE.md ("Encryption at rest").

#include "CSyncCipher.h"

#if defined(__linux__)
// On Linux the pages are sealed here, through OpenSSL's libcrypto (a required package): the same
// ChaCha20-Poly1305 as the Swift hooks, without their allocations and copies per page. Elsewhere (Apple
// platforms: CryptoKit) the hooks do it.
#define SYNC_CIPHER_NATIVE 1
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#endif
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { P = SYNC_CIPHER_PAGE_SIZE, R = SYNC_CIPHER_RESERVE, WAL_HEADER = 32, FRAME_HEADER = 24 };
enum { KIND_DB = 'D', KIND_WAL = 'W', KIND_JOURNAL = 'J', KIND_VERSIONS = 'V' };
/// Where the counter sits in a page's reserved bytes.
enum { COUNTER = P - R + SYNC_CIPHER_NONCE + SYNC_CIPHER_TAG };
/// The page versions file: magic (8), salt (16), generation (8), pages (8), nonce (12), tag (16), then the
/// pages' versions (8 bytes each, big-endian), encrypted.
enum { VERSIONS_HEADER = 8 + SYNC_CIPHER_SALT + 8 + 8 + SYNC_CIPHER_NONCE + SYNC_CIPHER_TAG };
static const uint8_t versionsMagic[8] = "SYNCVER1";
/// A version read from disk before a page is overwritten counts only below this (a larger one was not written
/// by the shim: versions are nanoseconds since 1970).
static const uint64_t plausibleVersion = 1ull << 62;

static const uint8_t sqliteMagic[16] = "SQLite format 3";
static const uint8_t journalMagic[8] = {0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7};

// MARK: - The registry of encrypted databases

typedef struct Entry {
    struct Entry *next;
    char *path;
    void *databaseKey;
    void *fileKey;  // derived once the salt is known
    uint8_t fileKeyBytes[32];  // the same key's bytes, for the native cipher
    uint8_t salt[SYNC_CIPHER_SALT];
    int saltKnown;
    int references;  // the registry's own (while registered) and one per open file
    int registered;
    int64_t failedPage;
    int failedReason;
    char failedFile[512];
    // Page versions of the main file (docs/ARCHITECTURE.md, "Encryption at rest"). `floors[n - 1]` is the
    // lowest version page n may have: read from the versions file, or written by this process and synced
    // since. `written` holds the versions written since the last sync, for pages writtenLow...writtenHigh.
    // A floor is never above the version on disk, so a crash never makes a page look old.
    pthread_mutex_t versionsLock;
    atomic_int versionsState;  // 0: not read yet, 1: read (or there is none), 2: the file does not authenticate
    uint64_t *floors, *written;
    int64_t capacity, floorCount, writtenLow, writtenHigh;
    uint64_t lastVersion, generation;
    int versionsDirty, saving, openDatabases;
    int64_t lastSave;  // CLOCK_MONOTONIC nanoseconds
} Entry;

static SyncCipherHooks hooks;
static sqlite3_vfs *base;
static sqlite3_vfs cipherVFS;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Entry *entries;
static atomic_int anyRegistered;
static atomic_llong sealedCount, openedCount, failureCount, versionsSavedCount;

static Entry *findLocked(const char *path) {
    for (Entry *entry = entries; entry; entry = entry->next) {
        if (entry->registered && strcmp(entry->path, path) == 0) return entry;
    }
    return NULL;
}

static void releaseLocked(Entry *entry) {
    if (--entry->references > 0) return;
    if (entry->fileKey) hooks.release(entry->fileKey);
    memset(entry->fileKeyBytes, 0, sizeof(entry->fileKeyBytes));
    if (entry->databaseKey) hooks.release(entry->databaseKey);
    free(entry->floors);
    free(entry->written);
    pthread_mutex_destroy(&entry->versionsLock);
    free(entry->path);
    free(entry);
}

static void releaseEntry(Entry *entry) {
    pthread_mutex_lock(&lock);
    releaseLocked(entry);
    pthread_mutex_unlock(&lock);
}

/// Sets the file's salt (from its first page, or fresh for a new file) and derives its key, once.
static void *fileKey(Entry *entry, const uint8_t *saltOnDisk) {
    pthread_mutex_lock(&lock);
    if (!entry->saltKnown) {
        if (saltOnDisk) {
            memcpy(entry->salt, saltOnDisk, SYNC_CIPHER_SALT);
        } else {
            hooks.random(entry->salt, SYNC_CIPHER_SALT);
        }
        entry->saltKnown = 1;
    }
    if (!entry->fileKey) {
        entry->fileKey = hooks.deriveFileKey(entry->databaseKey, entry->salt);
        if (entry->fileKey) hooks.keyBytes(entry->fileKey, entry->fileKeyBytes);
    }
    void *key = entry->fileKey;
    pthread_mutex_unlock(&lock);
    return key;
}

static void recordFailure(Entry *entry, const char *file, int64_t page, SyncCipherFailure reason) {
    atomic_fetch_add(&failureCount, 1);
    pthread_mutex_lock(&lock);
    entry->failedPage = page;
    entry->failedReason = (int)reason;
    strncpy(entry->failedFile, file ? file : "?", sizeof(entry->failedFile) - 1);
    entry->failedFile[sizeof(entry->failedFile) - 1] = 0;
    pthread_mutex_unlock(&lock);
    if (reason == SyncCipherFailureOlderVersion) {
        sqlite3_log(SQLITE_IOERR_DATA, "sync cipher: page %lld of %s is older than its recorded version",
                    (long long)page, file ? file : "?");
    } else {
        sqlite3_log(SQLITE_IOERR_DATA, "sync cipher: page %lld of %s fails authentication (damaged, replaced, or "
                                       "not this key's)", (long long)page, file ? file : "?");
    }
}

// MARK: - Page encryption

static void put64(uint8_t *out, uint64_t value) {
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)value;
        value >>= 8;
    }
}

static uint64_t get64(const uint8_t *bytes) {
    uint64_t value = 0;
    for (int i = 0; i < 8; i++) value = (value << 8) | bytes[i];
    return value;
}

static void makeAAD(uint8_t *aad, const Entry *entry, uint8_t kind, uint64_t page, const uint8_t *walSalts,
                    const uint8_t *counter) {
    memcpy(aad, entry->salt, SYNC_CIPHER_SALT);
    aad[16] = kind;
    put64(aad + 17, page);
    if (walSalts) {
        memcpy(aad + 25, walSalts, 8);
    } else {
        memset(aad + 25, 0, 8);
    }
    memcpy(aad + 33, counter, 8);
}

#if SYNC_CIPHER_NATIVE
// One context per thread and direction, keyed once: a page then only sets its nonce. Setting the cipher and
// the key for every page (a provider lookup and a key schedule in OpenSSL 3) took a quarter of the time of
// opening a 4 KiB page. The key is compared byte for byte, never by the entry it came from, which may be freed
// and another allocated at its address. A context keeps the last key it was given, as OpenSSL's does.
typedef struct NativeContext {
    EVP_CIPHER_CTX *ctx;
    uint8_t key[32];
    int keyed;
} NativeContext;

static _Thread_local NativeContext sealing, opening;
static pthread_once_t cipherOnce = PTHREAD_ONCE_INIT;
static const EVP_CIPHER *chacha;

static void fetchCipher(void) {
    // Fetched once: EVP_chacha20_poly1305() makes OpenSSL 3 look the implementation up on every init.
    EVP_CIPHER *fetched = EVP_CIPHER_fetch(NULL, "ChaCha20-Poly1305", NULL);
    chacha = fetched ? fetched : EVP_chacha20_poly1305();
}

/// The thread's context for one direction, initialized for `nonce` under `key`.
static EVP_CIPHER_CTX *nativeContext(NativeContext *native, const uint8_t *key, const uint8_t *nonce, int encrypt) {
    if (!native->ctx) native->ctx = EVP_CIPHER_CTX_new();
    if (!native->ctx) return NULL;
    if (!native->keyed || CRYPTO_memcmp(native->key, key, 32) != 0) {
        pthread_once(&cipherOnce, fetchCipher);
        native->keyed = 0;
        if (EVP_CipherInit_ex(native->ctx, chacha, NULL, key, nonce, encrypt) != 1) return NULL;
        memcpy(native->key, key, 32);
        native->keyed = 1;
        return native->ctx;
    }
    if (EVP_CipherInit_ex(native->ctx, NULL, NULL, NULL, nonce, encrypt) != 1) {
        native->keyed = 0;
        return NULL;
    }
    return native->ctx;
}

static int nativeSeal(const uint8_t *key, uint8_t *data, int length, const uint8_t *aad, int aadLength,
                      uint8_t *nonce, uint8_t *tag) {
    int out = 0;
    if (RAND_bytes(nonce, SYNC_CIPHER_NONCE) != 1) return 1;
    EVP_CIPHER_CTX *ctx = nativeContext(&sealing, key, nonce, 1);
    if (!ctx || EVP_EncryptUpdate(ctx, NULL, &out, aad, aadLength) != 1 ||
        (length > 0 && (EVP_EncryptUpdate(ctx, data, &out, data, length) != 1 || out != length)) ||
        EVP_EncryptFinal_ex(ctx, data + length, &out) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, SYNC_CIPHER_TAG, tag) != 1) {
        sealing.keyed = 0;  // initialized in full next time
        return 1;
    }
    return 0;
}

/// Decrypts in place; bytes that fail authentication are wiped, never left half-decrypted.
static int nativeOpen(const uint8_t *key, uint8_t *data, int length, const uint8_t *aad, int aadLength,
                      const uint8_t *nonce, const uint8_t *tag) {
    int out = 0;
    uint8_t expected[SYNC_CIPHER_TAG];
    memcpy(expected, tag, SYNC_CIPHER_TAG);
    EVP_CIPHER_CTX *ctx = nativeContext(&opening, key, nonce, 0);
    if (!ctx || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, SYNC_CIPHER_TAG, expected) != 1 ||
        EVP_DecryptUpdate(ctx, NULL, &out, aad, aadLength) != 1) {
        opening.keyed = 0;
        return 1;
    }
    if ((length > 0 && (EVP_DecryptUpdate(ctx, data, &out, data, length) != 1 || out != length)) ||
        EVP_DecryptFinal_ex(ctx, data + length, &out) != 1) {
        memset(data, 0, (size_t)length);
        opening.keyed = 0;
        return 1;
    }
    return 0;
}
#endif

/// Seals with the native cipher where there is one, else through the hooks.
static int sealBytes(Entry *entry, void *key, uint8_t *data, int length, const uint8_t *aad, uint8_t *nonce,
                     uint8_t *tag) {
#if SYNC_CIPHER_NATIVE
    (void)key;
    return nativeSeal(entry->fileKeyBytes, data, length, aad, SYNC_CIPHER_AAD, nonce, tag);
#else
    (void)entry;
    return hooks.seal(key, data, length, aad, SYNC_CIPHER_AAD, nonce, tag);
#endif
}

static int openBytes(Entry *entry, void *key, uint8_t *data, int length, const uint8_t *aad, const uint8_t *nonce,
                     const uint8_t *tag) {
#if SYNC_CIPHER_NATIVE
    (void)key;
    return nativeOpen(entry->fileKeyBytes, data, length, aad, SYNC_CIPHER_AAD, nonce, tag);
#else
    (void)entry;
    return hooks.open(key, data, length, aad, SYNC_CIPHER_AAD, nonce, tag);
#endif
}

/// Encrypts a page image in place: bytes [start, P - R) with page 1's salt in bytes 0..15, bound to `counter`.
static int sealPage(Entry *entry, void *key, uint8_t *page, uint8_t kind, uint64_t pgno, const uint8_t *walSalts,
                    uint64_t counter) {
    uint8_t *reserve = page + P - R;
    uint8_t aad[SYNC_CIPHER_AAD];
    put64(page + COUNTER, counter);
    memset(page + COUNTER + 8, 0, 4);
    makeAAD(aad, entry, kind, pgno, walSalts, reserve + SYNC_CIPHER_NONCE + SYNC_CIPHER_TAG);
    int start = (pgno == 1) ? SYNC_CIPHER_SALT : 0;
    if (sealBytes(entry, key, page + start, P - R - start, aad, reserve, reserve + SYNC_CIPHER_NONCE))
        return SQLITE_IOERR_WRITE;
    if (pgno == 1) memcpy(page, entry->salt, SYNC_CIPHER_SALT);
    atomic_fetch_add(&sealedCount, 1);
    return SQLITE_OK;
}

/// Decrypts a page image in place and returns its counter in `counter`.
static int openPage(Entry *entry, void *key, uint8_t *page, uint8_t kind, uint64_t pgno, const uint8_t *walSalts,
                    const char *file, int64_t reported, uint64_t *counter) {
    uint8_t *reserve = page + P - R;
    uint8_t aad[SYNC_CIPHER_AAD];
    makeAAD(aad, entry, kind, pgno, walSalts, reserve + SYNC_CIPHER_NONCE + SYNC_CIPHER_TAG);
    int start = (pgno == 1) ? SYNC_CIPHER_SALT : 0;
    if (openBytes(entry, key, page + start, P - R - start, aad, reserve, reserve + SYNC_CIPHER_NONCE)) {
        if (file) recordFailure(entry, file, reported, SyncCipherFailureAuthentication);  // NULL: the caller decides
        return SQLITE_IOERR_DATA;
    }
    *counter = get64(page + COUNTER);
    if (pgno == 1) memcpy(page, sqliteMagic, 16);
    memset(reserve, 0, R);
    atomic_fetch_add(&openedCount, 1);
    return SQLITE_OK;
}

// MARK: - Page versions

static uint64_t clockNanos(clockid_t clock) {
    struct timespec now;
    clock_gettime(clock, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/// `<database>-versions`, allocated (NULL without memory).
static char *versionsPath(const Entry *entry) {
    size_t size = strlen(entry->path) + sizeof("-versions");
    char *path = malloc(size);
    if (path) snprintf(path, size, "%s-versions", entry->path);
    return path;
}

/// Room for `pages` floors and written versions (versionsLock held). 0 without memory.
static int reserveVersions(Entry *entry, int64_t pages) {
    if (pages <= entry->capacity) return 1;
    int64_t capacity = entry->capacity ? entry->capacity : 1024;
    while (capacity < pages) capacity *= 2;
    uint64_t *floors = realloc(entry->floors, (size_t)capacity * 8);
    if (!floors) return 0;
    entry->floors = floors;
    uint64_t *written = realloc(entry->written, (size_t)capacity * 8);
    if (!written) return 0;
    entry->written = written;
    memset(floors + entry->capacity, 0, (size_t)(capacity - entry->capacity) * 8);
    memset(written + entry->capacity, 0, (size_t)(capacity - entry->capacity) * 8);
    entry->capacity = capacity;
    return 1;
}

static void makeVersionsAAD(uint8_t *aad, const Entry *entry, uint64_t pages, uint64_t generation) {
    uint8_t counter[8];
    put64(counter, generation);
    makeAAD(aad, entry, KIND_VERSIONS, pages, NULL, counter);
}

/// Takes the floors from the bytes of a versions file (versionsLock held): 1 when they are this file's and
/// authentic, or another file's (a file this one replaced: none taken); 2 when they do not authenticate.
static int takeVersions(Entry *entry, void *key, uint8_t *bytes, size_t size) {
    if (size < VERSIONS_HEADER || memcmp(bytes, versionsMagic, 8) != 0) return 2;
    if (memcmp(bytes + 8, entry->salt, SYNC_CIPHER_SALT) != 0) return 1;
    uint64_t generation = get64(bytes + 24), pages = get64(bytes + 32);
    if (pages > (size - VERSIONS_HEADER) / 8 || VERSIONS_HEADER + pages * 8 != size) return 2;
    uint8_t aad[SYNC_CIPHER_AAD];
    makeVersionsAAD(aad, entry, pages, generation);
    uint8_t *body = bytes + VERSIONS_HEADER;
    if (openBytes(entry, key, body, (int)(pages * 8), aad, bytes + 40, bytes + 52)) return 2;
    if (!reserveVersions(entry, (int64_t)pages)) return 1;  // no floors: never a false alarm
    for (uint64_t index = 0; index < pages; index++) {
        uint64_t version = get64(body + 8 * index);
        entry->floors[index] = version;
        if (version > entry->lastVersion) entry->lastVersion = version;
    }
    entry->floorCount = (int64_t)pages;
    entry->generation = generation;
    return 1;
}

/// Reads the database's versions file once its key is known. A missing one means no floors yet.
static void loadVersions(Entry *entry, void *key) {
    if (atomic_load(&entry->versionsState) != 0 || !key) return;
    pthread_mutex_lock(&entry->versionsLock);
    if (atomic_load(&entry->versionsState) == 0) {
        int state = 1;
        char *path = versionsPath(entry);
        int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        struct stat info;
        if (fd >= 0 && fstat(fd, &info) == 0) {
            size_t size = (size_t)info.st_size, done = 0;
            uint8_t *bytes = malloc(size + 1);
            while (bytes && done < size) {
                ssize_t got = pread(fd, bytes + done, size - done, (off_t)done);
                if (got <= 0) break;
                done += (size_t)got;
            }
            if (bytes && done == size) state = takeVersions(entry, key, bytes, size);
            free(bytes);
        }
        if (fd >= 0) close(fd);
        free(path);
        if (state == 2) {
            sqlite3_log(SQLITE_IOERR_DATA, "sync cipher: the page versions of %s do not authenticate",
                        entry->path);
        }
        atomic_store(&entry->versionsState, state);
    }
    pthread_mutex_unlock(&entry->versionsLock);
}

static int writeAll(int fd, const uint8_t *bytes, size_t size) {
    while (size > 0) {
        ssize_t wrote = write(fd, bytes, size);
        if (wrote <= 0) return 0;
        bytes += wrote;
        size -= (size_t)wrote;
    }
    return 1;
}

/// Writes the floors to the versions file: a copy beside it, synced, then renamed over it. A failure keeps the
/// old file (floors lower than the pages', never higher: safe) and is logged. A damaged file is never replaced:
/// the database stays refused until someone removes it.
static void saveVersions(Entry *entry) {
    pthread_mutex_lock(&entry->versionsLock);
    if (entry->saving || !entry->versionsDirty || atomic_load(&entry->versionsState) != 1 || !entry->fileKey) {
        pthread_mutex_unlock(&entry->versionsLock);
        return;
    }
    entry->saving = 1;
    entry->versionsDirty = 0;
    entry->lastSave = (int64_t)clockNanos(CLOCK_MONOTONIC);
    uint64_t pages = (uint64_t)entry->floorCount, generation = ++entry->generation;
    size_t size = VERSIONS_HEADER + pages * 8;
    uint8_t *bytes = malloc(size);
    for (uint64_t index = 0; bytes && index < pages; index++) {
        put64(bytes + VERSIONS_HEADER + 8 * index, entry->floors[index]);
    }
    pthread_mutex_unlock(&entry->versionsLock);

    int saved = 0;
    char *path = versionsPath(entry);
    size_t temporarySize = path ? strlen(path) + 32 : 0;
    char *temporary = path ? malloc(temporarySize) : NULL;
    if (bytes && temporary) {
        memcpy(bytes, versionsMagic, 8);
        memcpy(bytes + 8, entry->salt, SYNC_CIPHER_SALT);
        put64(bytes + 24, generation);
        put64(bytes + 32, pages);
        uint8_t aad[SYNC_CIPHER_AAD];
        makeVersionsAAD(aad, entry, pages, generation);
        snprintf(temporary, temporarySize, "%s.%ld.tmp", path, (long)getpid());
        if (sealBytes(entry, entry->fileKey, bytes + VERSIONS_HEADER, (int)(pages * 8), aad, bytes + 40,
                      bytes + 52) == 0) {
            int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (fd >= 0) {
                saved = writeAll(fd, bytes, size) && fsync(fd) == 0;
                saved = close(fd) == 0 && saved;
                saved = saved && rename(temporary, path) == 0;
                if (!saved) unlink(temporary);
            }
        }
    }
    if (saved) {
        atomic_fetch_add(&versionsSavedCount, 1);
    } else {
        sqlite3_log(SQLITE_IOERR_WRITE, "sync cipher: the page versions of %s were not saved", entry->path);
    }
    free(temporary);
    free(path);
    free(bytes);
    pthread_mutex_lock(&entry->versionsLock);
    entry->saving = 0;
    if (!saved) entry->versionsDirty = 1;
    pthread_mutex_unlock(&entry->versionsLock);
}

/// The version of a write of page `pgno`: above every version this process knows of, the version on disk
/// (`onDisk`, unauthenticated: taken only when plausible) and the page's floor, and at least the time in
/// nanoseconds, so that another process's later writes come out higher too.
static uint64_t writeVersion(Entry *entry, int64_t pgno, uint64_t onDisk) {
    uint64_t now = clockNanos(CLOCK_REALTIME);
    pthread_mutex_lock(&entry->versionsLock);
    uint64_t version = entry->lastVersion + 1;
    if (now > version) version = now;
    if (onDisk < plausibleVersion && onDisk >= version) version = onDisk + 1;
    if (pgno <= entry->floorCount && entry->floors[pgno - 1] >= version) version = entry->floors[pgno - 1] + 1;
    entry->lastVersion = version;
    if (reserveVersions(entry, pgno)) {
        entry->written[pgno - 1] = version;
        if (entry->writtenLow > entry->writtenHigh) {
            entry->writtenLow = entry->writtenHigh = pgno;
        } else if (pgno < entry->writtenLow) {
            entry->writtenLow = pgno;
        } else if (pgno > entry->writtenHigh) {
            entry->writtenHigh = pgno;
        }
    }
    pthread_mutex_unlock(&entry->versionsLock);
    return version;
}

/// Whether page `pgno`, read with `version`, is older than its floor.
static int olderThanFloor(Entry *entry, int64_t pgno, uint64_t version) {
    pthread_mutex_lock(&entry->versionsLock);
    uint64_t floor = pgno <= entry->floorCount ? entry->floors[pgno - 1] : 0;
    if (version > entry->lastVersion && version < plausibleVersion) entry->lastVersion = version;
    pthread_mutex_unlock(&entry->versionsLock);
    return version < floor;
}

/// The main file was synced: the versions written before are on disk and become floors (saved at most once a
/// second, and when the last connection closes).
static void promoteWritten(Entry *entry) {
    pthread_mutex_lock(&entry->versionsLock);
    for (int64_t page = entry->writtenLow; page <= entry->writtenHigh; page++) {
        uint64_t version = entry->written[page - 1];
        if (!version) continue;
        entry->written[page - 1] = 0;
        if (version > entry->floors[page - 1]) {
            entry->floors[page - 1] = version;
            entry->versionsDirty = 1;
        }
        if (page > entry->floorCount) entry->floorCount = page;
    }
    entry->writtenLow = 1;
    entry->writtenHigh = 0;
    int save = entry->versionsDirty && clockNanos(CLOCK_MONOTONIC) - (uint64_t)entry->lastSave >= 1000000000ull;
    pthread_mutex_unlock(&entry->versionsLock);
    if (save) saveVersions(entry);
}

/// The main file was truncated to `pages`: the pages past it have no floor any more.
static void trimVersions(Entry *entry, int64_t pages) {
    pthread_mutex_lock(&entry->versionsLock);
    if (entry->floorCount > pages) {
        memset(entry->floors + pages, 0, (size_t)(entry->floorCount - pages) * 8);
        entry->floorCount = pages;
        entry->versionsDirty = 1;
    }
    for (int64_t page = pages + 1; page <= entry->writtenHigh; page++) entry->written[page - 1] = 0;
    if (entry->writtenHigh > pages) entry->writtenHigh = pages;
    pthread_mutex_unlock(&entry->versionsLock);
}

// MARK: - Encrypted files

typedef struct CipherFile {
    sqlite3_file base;
    sqlite3_file *real;  // the base VFS's file, in the bytes after this struct
    Entry *entry;
    int kind;
    const char *name;
    void *key;  // the file's key once known (owned by the entry)
    uint8_t *page;  // scratch for one page
    int64_t headerOffset;  // WAL: the last frame header written, and its bytes
    uint8_t header[FRAME_HEADER];
    int64_t pgnoOffset;  // journal: the last 4-byte page number written or read, and its value
    uint32_t pgno;
} CipherFile;

static uint32_t get32(const uint8_t *bytes) {
    return ((uint32_t)bytes[0] << 24) | ((uint32_t)bytes[1] << 16) | ((uint32_t)bytes[2] << 8) | bytes[3];
}

/// The file's key, the salt made now if the file has none yet (a new database's first write).
static void *cachedKey(CipherFile *file) {
    if (!file->key) file->key = fileKey(file->entry, NULL);
    return file->key;
}

/// Reads page `pgno` of the main file, decrypted, into `out` (P bytes). A page past the end reads as zeros.
static int readDatabasePage(CipherFile *file, uint8_t *out, int64_t pgno) {
    int rc = file->real->pMethods->xRead(file->real, out, P, (pgno - 1) * P);
    if (rc == SQLITE_IOERR_SHORT_READ) {
        // A page that is not all there: past the end (zeros, as SQLite expects) or torn (refused).
        int zero = 1;
        for (int i = 0; i < P && zero; i++) zero = out[i] == 0;
        return zero ? SQLITE_IOERR_SHORT_READ : SQLITE_IOERR_DATA;
    }
    if (rc != SQLITE_OK) return rc;
    void *key = file->key;
    if (!key && pgno == 1) {
        key = fileKey(file->entry, out);  // page 1 begins with the file's salt
    } else if (!key) {
        uint8_t salt[SYNC_CIPHER_SALT];
        rc = file->real->pMethods->xRead(file->real, salt, SYNC_CIPHER_SALT, 0);
        if (rc != SQLITE_OK) return rc == SQLITE_IOERR_SHORT_READ ? SQLITE_IOERR_DATA : rc;
        key = fileKey(file->entry, salt);
    }
    file->key = key;  // the entry's, for as long as the entry lives (this file holds it)
    Entry *entry = file->entry;
    loadVersions(entry, key);
    if (atomic_load(&entry->versionsState) == 2) {
        char *versions = versionsPath(entry);
        recordFailure(entry, versions, pgno, SyncCipherFailureVersionsDamaged);
        free(versions);
        return SQLITE_IOERR_DATA;
    }
    uint64_t version = 0;
    rc = openPage(entry, key, out, KIND_DB, (uint64_t)pgno, NULL, file->name, pgno, &version);
    if (rc == SQLITE_OK && olderThanFloor(entry, pgno, version)) {
        memset(out, 0, P);
        recordFailure(entry, file->name, pgno, SyncCipherFailureOlderVersion);
        return SQLITE_IOERR_DATA;
    }
    return rc;
}

static int databaseRead(CipherFile *file, uint8_t *out, int amount, int64_t offset) {
    int64_t first = offset / P + 1, last = (offset + amount - 1) / P + 1;
    int shortRead = 0;
    for (int64_t pgno = first; pgno <= last; pgno++) {
        int64_t pageStart = (pgno - 1) * P;
        int64_t from = offset > pageStart ? offset : pageStart;
        int64_t to = offset + amount < pageStart + P ? offset + amount : pageStart + P;
        int whole = from == pageStart && to == pageStart + P;
        uint8_t *target = whole ? out + (from - offset) : file->page;
        int rc = readDatabasePage(file, target, pgno);
        if (rc == SQLITE_IOERR_SHORT_READ) {
            memset(target, 0, P);
            shortRead = 1;
        } else if (rc != SQLITE_OK) {
            return rc;
        }
        if (!whole) memcpy(out + (from - offset), file->page + (from - pageStart), (size_t)(to - from));
    }
    return shortRead ? SQLITE_IOERR_SHORT_READ : SQLITE_OK;
}

static int databaseWrite(CipherFile *file, const uint8_t *data, int amount, int64_t offset) {
    if (amount != P || offset % P != 0) return SQLITE_IOERR_WRITE;  // SQLite writes whole pages
    uint64_t pgno = (uint64_t)(offset / P) + 1;
    if (pgno == 1 && (get32(data + 16) >> 16 != (P == 65536 ? 1 : P) || data[20] < R))
        return SQLITE_IOERR_WRITE;  // not this format's page size, or no room for the nonce and tag
    void *key = cachedKey(file);
    loadVersions(file->entry, key);
    // The version the page has on disk now, if it is there: the new one must be above it.
    uint8_t onDisk[8] = {0};
    if (file->real->pMethods->xRead(file->real, onDisk, 8, offset + COUNTER) != SQLITE_OK) memset(onDisk, 0, 8);
    uint64_t version = writeVersion(file->entry, (int64_t)pgno, get64(onDisk));
    memcpy(file->page, data, P);
    int rc = sealPage(file->entry, key, file->page, KIND_DB, pgno, NULL, version);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xWrite(file->real, file->page, P, offset);
}

/// WAL: frame `n` (from 0) has its header at 32 + n * (24 + P) and its page right after; its counter is n + 1.
static uint64_t walFrameNumber(int64_t frameStart) {
    return (uint64_t)((frameStart - WAL_HEADER) / (FRAME_HEADER + P)) + 1;
}

/// Whether a frame's counter puts it where it is: its own number, or 0 (sealed before frames were numbered).
static int walFrameInPlace(uint64_t counter, uint64_t frame) { return counter == 0 || counter == frame; }

static int walFrameData(int64_t offset, int64_t *frameStart) {
    if (offset < WAL_HEADER) return 0;
    int64_t relative = (offset - WAL_HEADER) % (FRAME_HEADER + P);
    *frameStart = offset - relative;
    return relative == FRAME_HEADER;
}

static int walHeader(CipherFile *file, int64_t headerOffset, uint8_t *header) {
    if (file->headerOffset == headerOffset) {
        memcpy(header, file->header, FRAME_HEADER);
        return SQLITE_OK;
    }
    return file->real->pMethods->xRead(file->real, header, FRAME_HEADER, headerOffset);
}

/// Whether frame data at `offset` (header first) carries the WAL's current salts, authenticates, and is frame
/// `number`.
static int walFrameAuthenticates(CipherFile *file, uint8_t *frame, const uint8_t *walSalts, uint64_t number) {
    if (memcmp(frame + 8, walSalts, 8) != 0) return 0;
    uint8_t *reserve = frame + FRAME_HEADER + P - R;
    uint8_t aad[SYNC_CIPHER_AAD];
    uint32_t pgno = get32(frame);
    makeAAD(aad, file->entry, KIND_WAL, pgno, frame + 8, reserve + SYNC_CIPHER_NONCE + SYNC_CIPHER_TAG);
    int start = pgno == 1 ? SYNC_CIPHER_SALT : 0;
    void *key = cachedKey(file);
    return openBytes(file->entry, key, frame + FRAME_HEADER + start, P - R - start, aad, reserve,
                     reserve + SYNC_CIPHER_NONCE) == 0 &&
           walFrameInPlace(get64(frame + FRAME_HEADER + COUNTER), number);
}

/// A whole frame, read while SQLite rebuilds the WAL's index. A frame that does not authenticate is the log's
/// end when nothing valid follows it (a write torn by a crash: SQLite's checksum then stops there, as for a
/// plaintext WAL); followed by a valid frame of the same log, it is damage in the middle: an error.
static int walRecoveryRead(CipherFile *file, uint8_t *out, int64_t offset) {
    void *key = cachedKey(file);
    int64_t frame = (int64_t)walFrameNumber(offset);
    uint64_t counter = 0;
    int rc = openPage(file->entry, key, out + FRAME_HEADER, KIND_WAL, get32(out), out + 8, NULL, 0, &counter);
    if (rc == SQLITE_OK) {
        if (walFrameInPlace(counter, (uint64_t)frame)) return rc;
        recordFailure(file->entry, file->name, frame, SyncCipherFailureAuthentication);  // a frame moved here
        return SQLITE_IOERR_DATA;
    }
    uint8_t walHeaderBytes[WAL_HEADER];
    uint8_t *next = malloc(FRAME_HEADER + P);
    int damaged = 0;
    if (next && file->real->pMethods->xRead(file->real, walHeaderBytes, WAL_HEADER, 0) == SQLITE_OK &&
        memcmp(out + 8, walHeaderBytes + 16, 8) == 0 &&
        file->real->pMethods->xRead(file->real, next, FRAME_HEADER + P, offset + FRAME_HEADER + P) == SQLITE_OK) {
        damaged = walFrameAuthenticates(file, next, walHeaderBytes + 16, (uint64_t)frame + 1);
    }
    free(next);
    if (damaged) {
        recordFailure(file->entry, file->name, frame, SyncCipherFailureAuthentication);
        return SQLITE_IOERR_DATA;
    }
    memset(out + FRAME_HEADER, 0, P);
    return SQLITE_OK;
}

static int walRead(CipherFile *file, uint8_t *out, int amount, int64_t offset) {
    int rc = file->real->pMethods->xRead(file->real, out, amount, offset);
    if (rc != SQLITE_OK) return rc;  // a short read of a WAL is its end: SQLite stops there
    int64_t frameStart;
    // A frame's page alone (reads of one page), or a header and its page (recovery).
    if (amount == P && walFrameData(offset, &frameStart)) {
        uint8_t header[FRAME_HEADER];
        rc = walHeader(file, frameStart, header);
        if (rc != SQLITE_OK) return rc;
        void *key = cachedKey(file);
        uint64_t frame = walFrameNumber(frameStart), counter = 0;
        rc = openPage(file->entry, key, out, KIND_WAL, get32(header), header + 8, file->name, (int64_t)frame,
                      &counter);
        if (rc == SQLITE_OK && !walFrameInPlace(counter, frame)) {
            memset(out, 0, P);
            recordFailure(file->entry, file->name, (int64_t)frame, SyncCipherFailureAuthentication);
            return SQLITE_IOERR_DATA;
        }
        return rc;
    }
    if (amount == FRAME_HEADER + P && walFrameData(offset + FRAME_HEADER, &frameStart)) {
        return walRecoveryRead(file, out, offset);
    }
    if (amount <= FRAME_HEADER || offset < WAL_HEADER) return SQLITE_OK;  // headers are not encrypted
    return SQLITE_IOERR_READ;  // a read shape SQLite does not make
}

static int walWrite(CipherFile *file, const uint8_t *data, int amount, int64_t offset) {
    int64_t frameStart;
    if (amount == FRAME_HEADER && offset >= WAL_HEADER && (offset - WAL_HEADER) % (FRAME_HEADER + P) == 0) {
        file->headerOffset = offset;
        memcpy(file->header, data, FRAME_HEADER);
        return file->real->pMethods->xWrite(file->real, data, amount, offset);
    }
    if (amount == P && walFrameData(offset, &frameStart)) {
        uint8_t header[FRAME_HEADER];
        int rc = walHeader(file, frameStart, header);
        if (rc != SQLITE_OK) return rc;
        void *key = cachedKey(file);
        memcpy(file->page, data, P);
        rc = sealPage(file->entry, key, file->page, KIND_WAL, get32(header), header + 8, walFrameNumber(frameStart));
        if (rc != SQLITE_OK) return rc;
        return file->real->pMethods->xWrite(file->real, file->page, P, offset);
    }
    if (offset == 0 && amount == WAL_HEADER) {
        file->headerOffset = -1;
        return file->real->pMethods->xWrite(file->real, data, amount, offset);
    }
    return SQLITE_IOERR_WRITE;  // a write shape SQLite does not make
}

/// Rollback journal: a record is a 4-byte page number, the page, a 4-byte checksum, each its own write and read.
static int journalIsPage(CipherFile *file, const uint8_t *data, int amount, int64_t offset) {
    if (amount != P || offset < 4) return 0;
    if (data && memcmp(data, journalMagic, 8) == 0) return 0;  // a journal header, written page-sized
    if (file->pgnoOffset != offset - 4) {
        uint8_t bytes[4];
        if (file->real->pMethods->xRead(file->real, bytes, 4, offset - 4) != SQLITE_OK) return 0;
        file->pgno = get32(bytes);
        file->pgnoOffset = offset - 4;
    }
    return 1;
}

static int journalRead(CipherFile *file, uint8_t *out, int amount, int64_t offset) {
    int rc = file->real->pMethods->xRead(file->real, out, amount, offset);
    if (rc != SQLITE_OK) return rc;
    if (amount == 4) {
        file->pgnoOffset = offset;
        file->pgno = get32(out);
        return SQLITE_OK;
    }
    if (amount != P || offset < 4 || memcmp(out, journalMagic, 8) == 0 || !journalIsPage(file, NULL, amount, offset))
        return SQLITE_OK;
    void *key = cachedKey(file);
    uint64_t counter = 0;
    return openPage(file->entry, key, out, KIND_JOURNAL, file->pgno, NULL, file->name, file->pgno, &counter);
}

static int journalWrite(CipherFile *file, const uint8_t *data, int amount, int64_t offset) {
    if (amount == 4) {
        file->pgnoOffset = offset;
        file->pgno = get32(data);
    } else if (journalIsPage(file, data, amount, offset)) {
        void *key = cachedKey(file);
        memcpy(file->page, data, P);
        int rc = sealPage(file->entry, key, file->page, KIND_JOURNAL, file->pgno, NULL, 0);
        if (rc != SQLITE_OK) return rc;
        return file->real->pMethods->xWrite(file->real, file->page, P, offset);
    }
    return file->real->pMethods->xWrite(file->real, data, amount, offset);
}

// MARK: - I/O methods of an encrypted file (everything but reads and writes goes to the real file)

static int cipherClose(sqlite3_file *handle) {
    CipherFile *file = (CipherFile *)handle;
    Entry *entry = file->entry;
    int last = 0, unsynced = 0;
    if (file->kind == KIND_DB) {
        pthread_mutex_lock(&entry->versionsLock);
        last = --entry->openDatabases == 0;
        unsynced = entry->writtenLow <= entry->writtenHigh;
        pthread_mutex_unlock(&entry->versionsLock);
        // The last connection's writes that SQLite did not sync (synchronous off, VACUUM INTO's copy): synced
        // here, so that their versions count.
        if (last && unsynced && file->real->pMethods &&
            file->real->pMethods->xSync(file->real, SQLITE_SYNC_NORMAL) == SQLITE_OK) {
            promoteWritten(entry);
        }
    }
    int rc = file->real->pMethods ? file->real->pMethods->xClose(file->real) : SQLITE_OK;
    if (last) saveVersions(entry);
    free(file->page);
    releaseEntry(entry);
    return rc;
}

static int cipherRead(sqlite3_file *handle, void *out, int amount, sqlite3_int64 offset) {
    CipherFile *file = (CipherFile *)handle;
    if (file->kind == KIND_DB) return databaseRead(file, out, amount, offset);
    if (file->kind == KIND_WAL) return walRead(file, out, amount, offset);
    return journalRead(file, out, amount, offset);
}

static int cipherWrite(sqlite3_file *handle, const void *data, int amount, sqlite3_int64 offset) {
    CipherFile *file = (CipherFile *)handle;
    if (file->kind == KIND_DB) return databaseWrite(file, data, amount, offset);
    if (file->kind == KIND_WAL) return walWrite(file, data, amount, offset);
    return journalWrite(file, data, amount, offset);
}

#define REAL(handle) (((CipherFile *)(handle))->real)
static int cipherTruncate(sqlite3_file *f, sqlite3_int64 size) {
    CipherFile *file = (CipherFile *)f;
    if (file->kind == KIND_WAL) file->headerOffset = -1;
    file->pgnoOffset = -1;
    int rc = REAL(f)->pMethods->xTruncate(REAL(f), size);
    if (rc == SQLITE_OK && file->kind == KIND_DB) trimVersions(file->entry, (size + P - 1) / P);
    return rc;
}
static int cipherSync(sqlite3_file *f, int flags) {
    CipherFile *file = (CipherFile *)f;
    int rc = REAL(f)->pMethods->xSync(REAL(f), flags);
    if (rc == SQLITE_OK && file->kind == KIND_DB) promoteWritten(file->entry);
    return rc;
}
static int cipherFileSize(sqlite3_file *f, sqlite3_int64 *size) {
    return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int cipherLock(sqlite3_file *f, int level) { return REAL(f)->pMethods->xLock(REAL(f), level); }
static int cipherUnlock(sqlite3_file *f, int level) { return REAL(f)->pMethods->xUnlock(REAL(f), level); }
static int cipherCheckReservedLock(sqlite3_file *f, int *out) {
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int cipherFileControl(sqlite3_file *f, int op, void *arg) {
    if (op == SQLITE_FCNTL_MMAP_SIZE) {
        *(sqlite3_int64 *)arg = 0;  // pages are decrypted on read: never mapped
        return SQLITE_OK;
    }
    return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int cipherSectorSize(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int cipherDeviceCharacteristics(sqlite3_file *f) {
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int cipherShmMap(sqlite3_file *f, int region, int size, int extend, void volatile **out) {
    return REAL(f)->pMethods->xShmMap(REAL(f), region, size, extend, out);
}
static int cipherShmLock(sqlite3_file *f, int offset, int n, int flags) {
    return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}
static void cipherShmBarrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int cipherShmUnmap(sqlite3_file *f, int delete) { return REAL(f)->pMethods->xShmUnmap(REAL(f), delete); }
static int cipherFetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **out) {
    (void)f, (void)offset, (void)amount;
    *out = NULL;
    return SQLITE_OK;
}
static int cipherUnfetch(sqlite3_file *f, sqlite3_int64 offset, void *page) {
    (void)f, (void)offset, (void)page;
    return SQLITE_OK;
}

static const sqlite3_io_methods cipherMethods = {
    3, cipherClose, cipherRead, cipherWrite, cipherTruncate, cipherSync, cipherFileSize, cipherLock, cipherUnlock,
    cipherCheckReservedLock, cipherFileControl, cipherSectorSize, cipherDeviceCharacteristics, cipherShmMap,
    cipherShmLock, cipherShmBarrier, cipherShmUnmap, cipherFetch, cipherUnfetch,
};

// MARK: - Temporary files in memory

typedef struct MemoryFile {
    sqlite3_file base;
    uint8_t *bytes;
    sqlite3_int64 size, capacity;
} MemoryFile;

static int memoryClose(sqlite3_file *f) {
    free(((MemoryFile *)f)->bytes);
    return SQLITE_OK;
}
static int memoryRead(sqlite3_file *f, void *out, int amount, sqlite3_int64 offset) {
    MemoryFile *file = (MemoryFile *)f;
    sqlite3_int64 available = file->size > offset ? file->size - offset : 0;
    if (available >= amount) {
        memcpy(out, file->bytes + offset, (size_t)amount);
        return SQLITE_OK;
    }
    if (available > 0) memcpy(out, file->bytes + offset, (size_t)available);
    memset((uint8_t *)out + available, 0, (size_t)(amount - available));
    return SQLITE_IOERR_SHORT_READ;
}
static int memoryReserve(MemoryFile *file, sqlite3_int64 size) {
    if (size <= file->capacity) return SQLITE_OK;
    sqlite3_int64 capacity = file->capacity ? file->capacity : 65536;
    while (capacity < size) capacity *= 2;
    uint8_t *bytes = realloc(file->bytes, (size_t)capacity);
    if (!bytes) return SQLITE_IOERR_NOMEM;
    memset(bytes + file->capacity, 0, (size_t)(capacity - file->capacity));
    file->bytes = bytes;
    file->capacity = capacity;
    return SQLITE_OK;
}
static int memoryWrite(sqlite3_file *f, const void *data, int amount, sqlite3_int64 offset) {
    MemoryFile *file = (MemoryFile *)f;
    int rc = memoryReserve(file, offset + amount);
    if (rc != SQLITE_OK) return rc;
    memcpy(file->bytes + offset, data, (size_t)amount);
    if (offset + amount > file->size) file->size = offset + amount;
    return SQLITE_OK;
}
static int memoryTruncate(sqlite3_file *f, sqlite3_int64 size) {
    MemoryFile *file = (MemoryFile *)f;
    if (size < file->size) {
        memset(file->bytes + size, 0, (size_t)(file->size - size));
        file->size = size;
    }
    return SQLITE_OK;
}
static int memorySync(sqlite3_file *f, int flags) { return (void)f, (void)flags, SQLITE_OK; }
static int memoryFileSize(sqlite3_file *f, sqlite3_int64 *size) {
    *size = ((MemoryFile *)f)->size;
    return SQLITE_OK;
}
static int memoryLock(sqlite3_file *f, int level) { return (void)f, (void)level, SQLITE_OK; }
static int memoryCheckReservedLock(sqlite3_file *f, int *out) {
    (void)f;
    *out = 0;
    return SQLITE_OK;
}
static int memoryFileControl(sqlite3_file *f, int op, void *arg) { return (void)f, (void)op, (void)arg, SQLITE_NOTFOUND; }
static int memorySectorSize(sqlite3_file *f) { return (void)f, 4096; }
static int memoryDeviceCharacteristics(sqlite3_file *f) { return (void)f, 0; }

static const sqlite3_io_methods memoryMethods = {
    1, memoryClose, memoryRead, memoryWrite, memoryTruncate, memorySync, memoryFileSize, memoryLock, memoryLock,
    memoryCheckReservedLock, memoryFileControl, memorySectorSize, memoryDeviceCharacteristics,
};

// MARK: - The VFS

static int cipherOpen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *handle, int flags, int *outFlags) {
    (void)vfs;
    int kind = 0;
    const char *database = NULL;
    if (flags & SQLITE_OPEN_MAIN_DB) {
        kind = KIND_DB;
        database = name;
    } else if (flags & SQLITE_OPEN_WAL) {
        kind = KIND_WAL;
        database = sqlite3_filename_database(name);
    } else if (flags & SQLITE_OPEN_MAIN_JOURNAL) {
        kind = KIND_JOURNAL;
        database = sqlite3_filename_database(name);
    } else if (atomic_load(&anyRegistered) &&
               (flags & (SQLITE_OPEN_TEMP_DB | SQLITE_OPEN_TEMP_JOURNAL | SQLITE_OPEN_TRANSIENT_DB |
                         SQLITE_OPEN_SUBJOURNAL))) {
        // Sort runs, temporary tables and statement journals of any connection: in memory, never on disk.
        MemoryFile *file = (MemoryFile *)handle;
        memset(file, 0, sizeof(*file));
        file->base.pMethods = &memoryMethods;
        if (outFlags) *outFlags = flags;
        return SQLITE_OK;
    }
    Entry *entry = NULL;
    if (kind && database && atomic_load(&anyRegistered)) {
        pthread_mutex_lock(&lock);
        entry = findLocked(database);
        if (entry) entry->references++;
        pthread_mutex_unlock(&lock);
    }
    if (!entry) return base->xOpen(base, name, handle, flags, outFlags);  // not encrypted: the base VFS's own file

    CipherFile *file = (CipherFile *)handle;
    memset(file, 0, sizeof(*file));
    file->real = (sqlite3_file *)(file + 1);
    file->entry = entry;
    file->kind = kind;
    file->name = name;
    file->headerOffset = -1;
    file->pgnoOffset = -1;
    file->page = malloc(P);
    if (!file->page) {
        releaseEntry(entry);
        return SQLITE_NOMEM;
    }
    int rc = base->xOpen(base, name, file->real, flags, outFlags);
    if (rc != SQLITE_OK) {
        free(file->page);
        releaseEntry(entry);
        file->base.pMethods = NULL;
        return rc;
    }
    file->base.pMethods = &cipherMethods;
    if (kind == KIND_DB) {
        pthread_mutex_lock(&entry->versionsLock);
        entry->openDatabases++;
        pthread_mutex_unlock(&entry->versionsLock);
    }
    return SQLITE_OK;
}

static int vfsDelete(sqlite3_vfs *v, const char *name, int sync) { return (void)v, base->xDelete(base, name, sync); }
static int vfsAccess(sqlite3_vfs *v, const char *name, int flags, int *out) {
    return (void)v, base->xAccess(base, name, flags, out);
}
static int vfsFullPathname(sqlite3_vfs *v, const char *name, int n, char *out) {
    return (void)v, base->xFullPathname(base, name, n, out);
}
static void *vfsDlOpen(sqlite3_vfs *v, const char *name) { return (void)v, base->xDlOpen(base, name); }
static void vfsDlError(sqlite3_vfs *v, int n, char *out) { (void)v, base->xDlError(base, n, out); }
static void (*vfsDlSym(sqlite3_vfs *v, void *handle, const char *symbol))(void) {
    return (void)v, base->xDlSym(base, handle, symbol);
}
static void vfsDlClose(sqlite3_vfs *v, void *handle) { (void)v, base->xDlClose(base, handle); }
static int vfsRandomness(sqlite3_vfs *v, int n, char *out) { return (void)v, base->xRandomness(base, n, out); }
static int vfsSleep(sqlite3_vfs *v, int microseconds) { return (void)v, base->xSleep(base, microseconds); }
static int vfsCurrentTime(sqlite3_vfs *v, double *out) { return (void)v, base->xCurrentTime(base, out); }
static int vfsGetLastError(sqlite3_vfs *v, int n, char *out) { return (void)v, base->xGetLastError(base, n, out); }
static int vfsCurrentTimeInt64(sqlite3_vfs *v, sqlite3_int64 *out) {
    return (void)v, base->xCurrentTimeInt64(base, out);
}

int sync_cipher_install(const SyncCipherHooks *newHooks) {
    pthread_mutex_lock(&lock);
    if (base) {
        pthread_mutex_unlock(&lock);
        return SQLITE_OK;
    }
    int rc = sqlite3_initialize();
    sqlite3_vfs *found = rc == SQLITE_OK ? sqlite3_vfs_find(NULL) : NULL;
    if (!found || found->iVersion < 2) {
        pthread_mutex_unlock(&lock);
        return rc == SQLITE_OK ? SQLITE_ERROR : rc;
    }
    hooks = *newHooks;
    base = found;
    int size = (int)sizeof(CipherFile) + found->szOsFile;
    if (size < (int)sizeof(MemoryFile)) size = (int)sizeof(MemoryFile);
    cipherVFS = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = size,
        .mxPathname = found->mxPathname,
        .zName = "sync-cipher",
        .xOpen = cipherOpen,
        .xDelete = vfsDelete,
        .xAccess = vfsAccess,
        .xFullPathname = vfsFullPathname,
        .xDlOpen = found->xDlOpen ? vfsDlOpen : NULL,
        .xDlError = found->xDlError ? vfsDlError : NULL,
        .xDlSym = found->xDlSym ? vfsDlSym : NULL,
        .xDlClose = found->xDlClose ? vfsDlClose : NULL,
        .xRandomness = vfsRandomness,
        .xSleep = vfsSleep,
        .xCurrentTime = vfsCurrentTime,
        .xGetLastError = vfsGetLastError,
        .xCurrentTimeInt64 = found->xCurrentTimeInt64 ? vfsCurrentTimeInt64 : NULL,
    };
    rc = sqlite3_vfs_register(&cipherVFS, 1);
    pthread_mutex_unlock(&lock);
    return rc;
}

static int canonical(const char *path, char *out, int capacity) {
    return base->xFullPathname(base, path, capacity, out);
}

int sync_cipher_register(const char *path, void *databaseKey) {
    if (!base) return SQLITE_MISUSE;
    int capacity = base->mxPathname + 1;
    char *full = malloc((size_t)capacity);
    if (!full) return SQLITE_NOMEM;
    int rc = canonical(path, full, capacity);
    if (rc != SQLITE_OK) {
        free(full);
        return rc;
    }
    pthread_mutex_lock(&lock);
    if (findLocked(full)) {
        pthread_mutex_unlock(&lock);
        free(full);
        return SQLITE_MISUSE;
    }
    Entry *entry = calloc(1, sizeof(Entry));
    if (!entry) {
        pthread_mutex_unlock(&lock);
        free(full);
        return SQLITE_NOMEM;
    }
    entry->path = full;
    entry->databaseKey = databaseKey;
    entry->references = 1;
    entry->registered = 1;
    pthread_mutex_init(&entry->versionsLock, NULL);
    entry->writtenLow = 1;
    entry->writtenHigh = 0;
    entry->next = entries;
    entries = entry;
    atomic_store(&anyRegistered, 1);
    pthread_mutex_unlock(&lock);
    return SQLITE_OK;
}

void sync_cipher_unregister(const char *path) {
    if (!base) return;
    int capacity = base->mxPathname + 1;
    char *full = malloc((size_t)capacity);
    if (!full || canonical(path, full, capacity) != SQLITE_OK) {
        free(full);
        return;
    }
    pthread_mutex_lock(&lock);
    for (Entry **link = &entries; *link; link = &(*link)->next) {
        Entry *entry = *link;
        if (entry->registered && strcmp(entry->path, full) == 0) {
            *link = entry->next;
            entry->registered = 0;
            releaseLocked(entry);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    free(full);
}

int64_t sync_cipher_last_failure(const char *path, char *file, int capacity, int *reason) {
    if (!base || capacity <= 0) return 0;
    int size = base->mxPathname + 1;
    char *full = malloc((size_t)size);
    int64_t page = 0;
    if (full && canonical(path, full, size) == SQLITE_OK) {
        pthread_mutex_lock(&lock);
        Entry *entry = findLocked(full);
        if (entry && entry->failedPage) {
            page = entry->failedPage;
            if (reason) *reason = entry->failedReason;
            strncpy(file, entry->failedFile, (size_t)capacity - 1);
            file[capacity - 1] = 0;
        }
        pthread_mutex_unlock(&lock);
    }
    free(full);
    return page;
}

SyncCipherCounters sync_cipher_counters(void) {
    return (SyncCipherCounters){atomic_load(&sealedCount), atomic_load(&openedCount), atomic_load(&failureCount),
                                atomic_load(&versionsSavedCount)};
}

int sync_cipher_cross_check(void *fileKey, const uint8_t *keyBytes) {
#if SYNC_CIPHER_NATIVE
    uint8_t page[P], copy[P], aad[SYNC_CIPHER_AAD], nonce[SYNC_CIPHER_NONCE], tag[SYNC_CIPHER_TAG];
    hooks.random(page, P);
    hooks.random(aad, SYNC_CIPHER_AAD);
    memcpy(copy, page, P);
    // Sealed here, opened by the hooks; then sealed by the hooks, opened here.
    if (nativeSeal(keyBytes, page, P - R, aad, SYNC_CIPHER_AAD, nonce, tag)) return 1;
    if (memcmp(page, copy, P - R) == 0) return 2;
    if (hooks.open(fileKey, page, P - R, aad, SYNC_CIPHER_AAD, nonce, tag) || memcmp(page, copy, P - R)) return 3;
    if (hooks.seal(fileKey, page, P - R, aad, SYNC_CIPHER_AAD, nonce, tag)) return 4;
    if (nativeOpen(keyBytes, page, P - R, aad, SYNC_CIPHER_AAD, nonce, tag) || memcmp(page, copy, P - R)) return 5;
    tag[0] ^= 1;
    if (hooks.seal(fileKey, page, P - R, aad, SYNC_CIPHER_AAD, nonce, tag)) return 6;
    tag[3] ^= 1;
    if (nativeOpen(keyBytes, page, P - R, aad, SYNC_CIPHER_AAD, nonce, tag) == 0) return 7;  // a wrong tag opens
    return 0;
#else
    (void)fileKey, (void)keyBytes;
    return -1;
#endif
}
