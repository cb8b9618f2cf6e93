#!/usr/bin/env bash
# Encryption at rest against plaintext on one device file: the rebuild of the notes projection and the rekey.
#
# 1. `sync-bench rebuild --events N` builds a notes store of N events (plaintext) and keeps it;
# 2. a copy of it is encrypted in place (`sync-agent encrypt --key-file`);
# 3. ROUNDS rounds, alternating which goes first: `sync-bench rebuild --existing` on each (the encrypted one with
#    SYNC_STORAGE_KEY_FILE), each the median of 3 rebuilds;
# 4. ROUNDS rounds of `sync-agent rekey` of the encrypted file against `VACUUM INTO` a copy of the plaintext one
#    (sqlite3), each timed whole.
# Prints every run, the medians and the ratios (encrypted rebuild speed / plaintext; rekey time / VACUUM INTO).
#
# Usage: Benchmarks/tools/encryption-rebuild-rekey.sh [EVENTS] [ROUNDS]   (default 1000000 and 3; release
# sync-bench and sync-agent built: swift build -c release --product sync-bench --product sync-agent)
# Environment: BIN (default .build/release), WORK (default .run/encryption-ab).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
events="${1:-1000000}"
rounds="${2:-3}"
bin="${BIN:-$root/.build/release}"
work="${WORK:-$root/.run/encryption-ab}"
for program in sync-bench sync-agent; do
    [ -x "$bin/$program" ] || { echo "no $bin/$program: build it with swift build -c release" >&2; exit 1; }
done
command -v sqlite3 >/dev/null || { echo "sqlite3 is needed for the VACUUM INTO baseline" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work"

echo "building a notes store of $events events…"
"$bin/sync-bench" rebuild --events "$events" --runs 1 --directory "$work/build" >/dev/null
plain="$work/plain.sqlite"
encrypted="$work/encrypted.sqlite"
key="$work/key"
mv "$work/build/rebuild.sqlite" "$plain"
rm -rf "$work/build"
cp "$plain" "$encrypted"
"$bin/sync-agent" encrypt --db "$encrypted" --key-file "$key"
echo "files: plaintext $(stat -c %s "$plain") bytes, encrypted $(stat -c %s "$encrypted") bytes"

# rebuild FILE [KEY]: the median of 3 rebuilds, in ms.
rebuild() {
    local file="$1" line
    if [ -n "${2:-}" ]; then
        line="$(SYNC_STORAGE_KEY_FILE="$2" "$bin/sync-bench" rebuild --existing "$file" --runs 3)"
    else
        line="$(env -u SYNC_STORAGE_KEY_FILE "$bin/sync-bench" rebuild --existing "$file" --runs 3)"
    fi
    sed -E 's/.*: ([0-9.]+) ms median.*/\1/' <<<"$line"
}
seconds() {
    local start end
    start=$(date +%s.%N)
    "$@" >/dev/null
    end=$(date +%s.%N)
    python3 -c "print(f'{$end - $start:.3f}')"
}

plain_rebuilds=() encrypted_rebuilds=() vacuums=() rekeys=()
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) -eq 1 ]; then
        p="$(rebuild "$plain")"
        e="$(rebuild "$encrypted" "$key")"
    else
        e="$(rebuild "$encrypted" "$key")"
        p="$(rebuild "$plain")"
    fi
    plain_rebuilds+=("$p") encrypted_rebuilds+=("$e")
    echo "round $round, rebuild: plaintext $p ms, encrypted $e ms"
done
for round in $(seq 1 "$rounds"); do
    rm -f "$work/copy.sqlite"
    v="$(seconds sqlite3 "$plain" "VACUUM INTO '$work/copy.sqlite'")"
    r="$(seconds "$bin/sync-agent" rekey --db "$encrypted" --key-file "$key")"
    vacuums+=("$v") rekeys+=("$r")
    echo "round $round: VACUUM INTO $v s, rekey $r s"
done
rm -f "$work/copy.sqlite"

python3 - "${plain_rebuilds[*]}" "${encrypted_rebuilds[*]}" "${vacuums[*]}" "${rekeys[*]}" <<'EOF'
import statistics, sys
plain, encrypted, vacuums, rekeys = ([float(v) for v in a.split()] for a in sys.argv[1:5])
p, e = statistics.median(plain), statistics.median(encrypted)
print(f"rebuild: plaintext {p:,.0f} ms, encrypted {e:,.0f} ms (medians): encrypted at {p / e:.2f}x the speed")
v, r = statistics.median(vacuums), statistics.median(rekeys)
print(f"rekey {r:.2f} s against VACUUM INTO {v:.2f} s (medians): {r / v:.2f}x the time")
EOF
