#!/usr/bin/env bash
# `make load`: the stack under load on this machine — PostgreSQL (a throwaway cluster, or SYNC_DATABASE_URL's
# server), a fresh database, sync-server and sync-load built in release mode, and the default scenario:
# 100 devices in 10 scopes for 60 seconds with offline spells, injected faults and crashes, then the verdict
# (nothing lost, duplicated or diverged). The report goes to .run/load/report.md and report.json; the exit
# status is sync-load's.
#
# Environment: LOAD_ARGS (extra sync-load options, e.g. "--devices 10000 --replicas 50 --scopes 1000 --rate 0.5" or
# "--sweep devices=100,1000,3000,10000"), SYNC_PORT (default 8090).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

port="${SYNC_PORT:-8090}"
run_dir="$root/.run/load"
mkdir -p "$run_dir"
# Device files of an earlier run belong to an earlier database.
rm -rf "$run_dir/devices"
server_pid=""
stop() {
    [ -n "$server_pid" ] && kill -INT "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
}
trap stop EXIT

url="$(scripts/postgres.sh start)"
admin="${url%/*}/postgres"
database="sync_load"
psql "$admin" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null
psql "$admin" -qc "CREATE DATABASE $database" >/dev/null
database_url="${url%/*}/$database"

echo "building sync-server and sync-load (release)…"
swift build -c release --product sync-server >/dev/null
swift build -c release --product sync-load >/dev/null
bin="$(swift build -c release --show-bin-path)"

SYNC_JWT_SECRET="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export SYNC_JWT_SECRET
SYNC_ADMIN_TOKEN="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export SYNC_ADMIN_TOKEN
# Compaction off: the verdict reads the whole log back and checks every event the devices made.
SYNC_DATABASE_URL="$database_url" SYNC_COMPACTION_INTERVAL_SECONDS=0 SYNC_LOG_LEVEL=warning \
    "$bin/sync-server" --port "$port" >"$run_dir/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 150); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.2
done
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { echo "sync-server did not start:"; tail -20 "$run_dir/server.log"; exit 1; }
echo "dashboard while it runs: http://admin:$SYNC_ADMIN_TOKEN@127.0.0.1:$port/dashboard"

postmaster="$(head -1 "$root/.run/postgres/data/postmaster.pid" 2>/dev/null || true)"
watch=(--watch "server=$server_pid")
[ -n "$postmaster" ] && watch+=(--watch "postgres=$postmaster")

# shellcheck disable=SC2086
# Once everything has settled and the log has been checked, the verdict folds and collects (sync-server compact,
# blobs collected at once) and checks that no unreferenced blob is left and no referenced one is gone.
collect="SYNC_DATABASE_URL='$database_url' SYNC_BLOB_COLLECT_AFTER_SECONDS=0 SYNC_EVICTION_HORIZON_SECONDS=1 SYNC_LOG_LEVEL=error '$bin/sync-server' compact >/dev/null"
"$bin/sync-load" --server "http://127.0.0.1:$port" --devices 100 --scopes 10 --duration 60 --ramp-up 10 \
    --out "$run_dir" --data-dir "$run_dir/devices" --collect-command "$collect" "${watch[@]}" ${LOAD_ARGS:-}
