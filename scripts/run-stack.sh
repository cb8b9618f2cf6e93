#!/usr/bin/env bash
# `make run`: the whole stack on this machine from local binaries — PostgreSQL, sync-server, and two
# sync-agent replicas (alice and bob) that edit notes like users (in bursts: 20 s of edits, 10 s quiet) and
# sync continuously. Every 5 seconds it checks whether the two replicas hold identical state; they do in the
# quiet spells. Ctrl-C stops everything cleanly.
#
# Environment: SYNC_PORT (default 8080), SYNC_DATABASE_URL (default: a throwaway cluster), RATE (simulated
# edits per second per agent, default 2).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

port="${SYNC_PORT:-8080}"
rate="${RATE:-2}"
run_dir="$root/.run/stack"
mkdir -p "$run_dir"
pids=()

stop() {
    trap - EXIT
    echo
    echo "stopping…"
    for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    scripts/postgres.sh stop
    echo "stopped. Replicas stay in $run_dir (delete the folder to start afresh)."
}
trap stop EXIT
# A signal interrupts `wait` at once; exiting (a requested stop is a success) runs `stop` through the EXIT trap.
trap 'exit 0' INT TERM

url="$(scripts/postgres.sh start)"
echo "PostgreSQL:  $url"
echo "building (release)…"
swift build -c release --product sync-server >/dev/null
swift build -c release --product sync-agent >/dev/null
bin="$(swift build -c release --show-bin-path)"

secret_file="$run_dir/jwt-secret"
[ -f "$secret_file" ] || head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret_file"
export SYNC_JWT_SECRET="$(cat "$secret_file")"
# The dashboard's credential (docs/PROTOCOL.md, "Admin API"): a fresh one each run.
SYNC_ADMIN_TOKEN="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export SYNC_ADMIN_TOKEN
SYNC_DATABASE_URL="$url" "$bin/sync-server" --port "$port" 2>&1 | sed -u 's/^/[server] /' &
pids+=($!)
for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.2
done
echo "sync-server: http://127.0.0.1:$port  (metrics: /metrics, API: /openapi.json)"
echo "dashboard:   http://admin:$SYNC_ADMIN_TOKEN@127.0.0.1:$port/dashboard  (or give $SYNC_ADMIN_TOKEN as the password)"

token="$("$bin/sync-server" token --sub demo --scopes demo --ttl 86400)"
for name in alice bob; do
    "$bin/sync-agent" --db "$run_dir/$name.sqlite" --key-file "$run_dir/$name.key" --server "http://127.0.0.1:$port" --token "$token" \
        run --simulate "$rate" --scope demo 2>&1 | sed -u "s/^/[$name] /" &
    pids+=($!)
done
echo "agents:      alice and bob, $rate edits/s each, replicas in $run_dir (encrypted at rest: *.key)"
echo "Press Ctrl-C to stop."

while true; do
    sleep 5 &
    wait $!
    a="$("$bin/sync-agent" --db "$run_dir/alice.sqlite" --key-file "$run_dir/alice.key" export --state 2>/dev/null | sha256sum | cut -c1-12)" || a="?"
    b="$("$bin/sync-agent" --db "$run_dir/bob.sqlite" --key-file "$run_dir/bob.key" export --state 2>/dev/null | sha256sum | cut -c1-12)" || b="?"
    notes="$("$bin/sync-agent" --db "$run_dir/alice.sqlite" --key-file "$run_dir/alice.key" export --state 2>/dev/null | grep -o '"title"' | wc -l)" || notes="?"
    if [ "$a" = "$b" ]; then
        echo "[check] alice and bob hold identical state ($notes notes, $a)"
    else
        echo "[check] alice $a, bob $b: still converging (edits in flight)"
    fi
done
