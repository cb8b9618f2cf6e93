#!/usr/bin/env bash
# `make test-encrypted`: the store, projection and engine suites again, every database they open encrypted at
# rest (SYNC_STORAGE_KEY_FILE: StorageConfiguration's default then encrypts under a fresh key file), so that
# both ways are tested. Extra arguments go to `swift test`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
mkdir -p .run
key_dir="$(mktemp -d "${TMPDIR:-/tmp}/sync-test-keys.XXXXXX")"
trap 'rm -rf "$key_dir"' EXIT
export SYNC_STORAGE_KEY_FILE="$key_dir/keys"
export SYNC_POSTGRES_DURABLE="${SYNC_POSTGRES_DURABLE-no}"
swift build --build-tests ${SYNC_BUILD_FLAGS--debug-info-format none}
scripts/with-postgres.sh swift test --skip-build \
    --filter 'SyncStorageTests|SyncEventStoreTests|NotesDomainTests|SyncEngineTests' "$@"
# The first encrypted open made the key file: without it, nothing ran encrypted.
if [ ! -s "$SYNC_STORAGE_KEY_FILE" ]; then
    echo "test-encrypted: no database was opened encrypted (no key file at $SYNC_STORAGE_KEY_FILE)" >&2
    exit 1
fi
