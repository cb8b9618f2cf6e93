#!/usr/bin/env bash
# Push throughput of a sync-server that is watched, against the same server unwatched: the cost of the
# dashboard and of JSON access logs.
#
#   plain     SYNC_LOG_LEVEL=notice (no access log lines), no admin token, nobody polling;
#   observed  SYNC_LOG_FORMAT=json at SYNC_LOG_LEVEL=info (one JSON line per request, to a file), an admin
#             token, and a poller making the dashboard's three requests (status, the scopes page, a scope's
#             replicas) once a second, as an open /dashboard does.
#
# Each round runs both settings, alternating which goes first, each on a fresh database and a fresh server, and
# both measures with `sync-bench push`: bulk (pushes of 2,000 events, 4 in flight) and one-event pushes (32 in
# flight). Prints every run, then the medians of each setting and their ratio (observed / plain).
#
# Usage: Benchmarks/tools/observed-throughput.sh [ROUNDS]   (default 5; release binaries of sync-server and
# sync-bench must be built: swift build -c release --product sync-server --product sync-bench)
# Environment: BIN (default .build/release), BULK_EVENTS (200000), SMALL_EVENTS (6000), PORT (8097).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
rounds="${1:-5}"
bin="${BIN:-$root/.build/release}"
bulk_events="${BULK_EVENTS:-200000}"
small_events="${SMALL_EVENTS:-6000}"
port="${PORT:-8097}"
server="http://127.0.0.1:$port"
work="$root/.run/observed-throughput"
mkdir -p "$work"
for program in sync-server sync-bench; do
    [ -x "$bin/$program" ] || { echo "no $bin/$program: build it with swift build -c release" >&2; exit 1; }
done

url="$(scripts/postgres.sh start)"
admin_db="${url%/*}/postgres"
export SYNC_JWT_SECRET
SYNC_JWT_SECRET="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
admin_token="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
scopes="$(seq -s, -f 'bench-%g' 0 15)"
token="$("$bin/sync-server" token --sub bench --scopes "$scopes" --ttl 86400)"

server_pid=""
poller_pid=""
stop_all() {
    [ -n "$poller_pid" ] && kill "$poller_pid" 2>/dev/null && wait "$poller_pid" 2>/dev/null
    [ -n "$server_pid" ] && kill -INT "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    poller_pid=""
    server_pid=""
}
trap stop_all EXIT

# What an open dashboard asks once a second.
poll() {
    while true; do
        curl -sf -o /dev/null -u "admin:$admin_token" "$server/v1/admin/status" || true
        curl -sf -o /dev/null -u "admin:$admin_token" \
            "$server/v1/admin/scopes?sort=scope&order=asc&limit=50&offset=0" || true
        curl -sf -o /dev/null -u "admin:$admin_token" "$server/v1/admin/scopes/bench-0/replicas?limit=100&offset=0" || true
        sleep 1
    done
}

# start SETTING: a fresh database and a server in that setting.
start() {
    local setting="$1" database="observed_throughput"
    psql "$admin_db" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null
    psql "$admin_db" -qc "CREATE DATABASE $database" >/dev/null
    local environment=(SYNC_DATABASE_URL="${url%/*}/$database" SYNC_COMPACTION_INTERVAL_SECONDS=0)
    if [ "$setting" = observed ]; then
        environment+=(SYNC_LOG_FORMAT=json SYNC_LOG_LEVEL=info SYNC_ADMIN_TOKEN="$admin_token")
    else
        environment+=(SYNC_LOG_LEVEL=notice)
    fi
    env "${environment[@]}" "$bin/sync-server" --port "$port" >"$work/server-$setting.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 150); do
        curl -sf "$server/readyz" >/dev/null 2>&1 && break
        sleep 0.2
    done
    curl -sf "$server/readyz" >/dev/null || { echo "sync-server did not start:" >&2; tail -20 "$work/server-$setting.log" >&2; exit 1; }
    if [ "$setting" = observed ]; then
        poll &
        poller_pid=$!
    fi
}

# measure SETTING KIND: events/s of one sync-bench push run.
measure() {
    local setting="$1" kind="$2" arguments
    if [ "$kind" = bulk ]; then
        arguments=(--events "$bulk_events" --batch 2000 --concurrency 4)
    else
        arguments=(--events "$small_events" --batch 1 --concurrency 32)
    fi
    start "$setting"
    "$bin/sync-bench" push --server "$server" --token "$token" "${arguments[@]}" --json >"$work/run.json"
    stop_all
    python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["eventsPerSecond"]))' "$work/run.json"
}

declare -A results
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) -eq 1 ]; then order=(plain observed); else order=(observed plain); fi
    for kind in bulk small; do
        for setting in "${order[@]}"; do
            value="$(measure "$setting" "$kind")"
            results[$setting.$kind]="${results[$setting.$kind]:-} $value"
            echo "round $round, $kind, $setting: $value events/s"
        done
    done
done

python3 - "${results[plain.bulk]}" "${results[observed.bulk]}" "${results[plain.small]}" "${results[observed.small]}" <<'EOF'
import statistics, sys
names = ["bulk (2,000 per push, 4 in flight)", "one-event pushes (32 in flight)"]
for i, name in enumerate(names):
    plain = [int(v) for v in sys.argv[1 + 2 * i].split()]
    observed = [int(v) for v in sys.argv[2 + 2 * i].split()]
    p, o = statistics.median(plain), statistics.median(observed)
    print(f"{name}: plain {plain} median {p:,.0f}; observed {observed} median {o:,.0f}; ratio {o / p:.2f}x")
EOF
