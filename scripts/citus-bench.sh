#!/usr/bin/env bash
# One PostgreSQL against a Citus cluster (a coordinator and two workers) on the same machine, in one run:
# for each round, on a fresh database of each, a sync-server (SYNC_CITUS=true on Citus) and
#   bulk   sync-bench push: 50,000 events, batches of 500, 8 in flight, 16 scopes
#   small  sync-bench push: 5,000 one-event pushes, 32 in flight, 16 scopes (and over 100 scopes: small100)
#   load   sync-load: 200 thin devices and 8 replicas in 20 scopes for 20 s, no faults, with its verdict
# alternating PostgreSQL and Citus, three rounds. Prints one line per measurement, then the medians and the
# ratios Citus / PostgreSQL. The small pushes also report the server's CPU per push and PostgreSQL's (the
# postmaster and its processes; on Citus the coordinator's and both workers' together). Needs release builds of sync-server, sync-bench and sync-load (BENCH_BIN, default
# .build/release) and Citus (scripts/citus.sh; CITUS_SOURCE to build it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bin="${BENCH_BIN:-$root/.build/release}"
rounds="${ROUNDS:-3}"
run="$root/.run/citus-bench"
mkdir -p "$run"
export SYNC_POSTGRES_DIR="$run/postgres" SYNC_CITUS_DIR="$run/citus"
postgres="$(env -u SYNC_DATABASE_URL scripts/postgres.sh start)"
scripts/citus.sh start >/dev/null
trap 'env -u SYNC_DATABASE_URL scripts/postgres.sh stop; scripts/citus.sh stop' EXIT
admin="${postgres%/*}/postgres"
SYNC_JWT_SECRET="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export SYNC_JWT_SECRET
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
token=$("$bin/sync-server" token --sub bench --scopes "$(seq -s, -f 'bench-%g' 0 99)" --ttl 86400)
results="$run/results.txt"
: >"$results"
# Lets the next target run on a quiet machine: this one's tables vacuumed and its dirty pages written now, not
# by its autovacuum and checkpointer during the next target's measurements (both PostgreSQL instances share
# the cores).
settle() {
    psql "$2" -qc "VACUUM ANALYZE" >/dev/null 2>&1 || true
    if [ "$1" = citus ]; then
        for node in coordinator worker1 worker2; do
            port="$(sed -n 4p "$SYNC_CITUS_DIR/$node/data/postmaster.pid")"
            psql "postgres://sync@127.0.0.1:$port/postgres" -qc CHECKPOINT >/dev/null 2>&1 || true
        done
    else
        psql "$admin" -qc CHECKPOINT >/dev/null 2>&1 || true
    fi
}

for round in $(seq 1 "$rounds"); do
    for target in postgres citus; do
        db="bench_${round}_${target}"
        if [ "$target" = citus ]; then
            scripts/citus.sh drop-database "$db"
            url="$(scripts/citus.sh create-database "$db")"
            citus=true
        else
            psql "$admin" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
            psql "$admin" -qc "CREATE DATABASE $db" >/dev/null
            url="${postgres%/*}/$db"
            citus=false
        fi
        port="$(free_port)"
        SYNC_DATABASE_URL="$url" SYNC_CITUS="$citus" SYNC_COMPACTION_INTERVAL_SECONDS=0 SYNC_LOG_LEVEL=warning \
            "$bin/sync-server" --port "$port" >"$run/server-$target.log" 2>&1 &
        server=$!
        for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
        base="http://127.0.0.1:$port"
        # The postmasters whose CPU counts: one PostgreSQL's, or every node of the cluster.
        pids=()
        if [ "$target" = citus ]; then
            for node in coordinator worker1 worker2; do pids+=(--postgres-pid "$(head -1 "$SYNC_CITUS_DIR/$node/data/postmaster.pid")"); done
        else
            pids+=(--postgres-pid "$(head -1 "$SYNC_POSTGRES_DIR/data/postmaster.pid")")
        fi
        bulk=$("$bin/sync-bench" push --server "$base" --token "$token" --events 50000 --batch 500 --concurrency 8 \
            --scopes 16 --json 2>/dev/null | tail -1)
        small=$("$bin/sync-bench" push --server "$base" --token "$token" --events 5000 --batch 1 --concurrency 32 \
            --scopes 16 --server-pid "$server" "${pids[@]}" --json 2>/dev/null | tail -1)
        small100=$("$bin/sync-bench" push --server "$base" --token "$token" --events 5000 --batch 1 --concurrency 32 \
            --scopes 100 --server-pid "$server" "${pids[@]}" --json 2>/dev/null | tail -1)
        rm -rf "$run/load" "$run/devices"
        "$bin/sync-load" run --server "$base" --jwt-secret "$SYNC_JWT_SECRET" --devices 200 --replicas 8 --scopes 20 \
            --duration 20 --ramp-up 2 --rate 2 --faults 0 --offline 0 --crash-interval 0 --out "$run/load" \
            --data-dir "$run/devices" >/dev/null 2>"$run/load-$target.log" || true
        python3 - "$target" "$round" "$bulk" "$small" "$run/load/report.json" "$small100" <<'EOF' | tee -a "$results"
import json, sys
target, round_, bulk, small, load, small100 = sys.argv[1:7]
b, s, h = json.loads(bulk), json.loads(small), json.loads(small100)
try:
    step = json.load(open(load))["steps"][0]
    load_text = "load %.0f ev/s write-to-visible p50 %s p99 %s ms verdict %s" % (
        step["acceptedPerSecond"], step["writeToVisibleMs"]["p50"], step["writeToVisibleMs"]["p99"],
        "pass" if step["verdict"]["passed"] else "FAIL")
except Exception as error:
    load_text = "load failed (%s)" % error
cpu = lambda r: "server %.0f us, postgres %.0f us a push" % (
    r.get("serverCPUMicrosecondsPerPush") or 0, r.get("postgresCPUMicrosecondsPerPush") or 0)
print("%s round %s: bulk %.0f ev/s p99 %.0f ms · small %.0f ev/s p50 %.1f p99 %.1f ms (%s) · small100 %.0f ev/s p99 %.1f ms (%s) · %s" % (
    target, round_, b["eventsPerSecond"], b["p99Milliseconds"], s["eventsPerSecond"], s["p50Milliseconds"],
    s["p99Milliseconds"], cpu(s), h["eventsPerSecond"], h["p99Milliseconds"], cpu(h), load_text))
EOF
        kill -TERM "$server" 2>/dev/null
        wait "$server" 2>/dev/null || true
        settle "$target" "$url"
    done
done

python3 - "$results" <<'EOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    target = line.split()[0]
    numbers = dict(bulk=r"bulk (\d+) ev/s", small=r"small (\d+) ev/s", small_p99=r"small \d+ .*? p99 ([\d.]+) ms",
                   small100=r"small100 (\d+) ev/s", small100_p99=r"small100 \d+ ev/s p99 ([\d.]+) ms",
                   small_server=r"small \d+ .*?\(server (\d+) us", small_postgres=r"small \d+ .*?postgres (\d+) us",
                   load=r"load (\d+) ev/s", visible_p99=r"write-to-visible p50 \d+ p99 (\d+)")
    for key, pattern in numbers.items():
        match = re.search(pattern, line)
        if match:
            rows.setdefault(target, {}).setdefault(key, []).append(float(match.group(1)))
print("medians:")
for target, values in rows.items():
    print("  %s: %s" % (target, ", ".join("%s %.1f" % (k, statistics.median(v)) for k, v in values.items())))
if "postgres" in rows and "citus" in rows:
    for key in ("bulk", "small", "small100", "load", "small_server", "small_postgres"):
        if key in rows["postgres"] and key in rows["citus"]:
            print("  citus / postgres, %s: %.2fx" % (
                key, statistics.median(rows["citus"][key]) / statistics.median(rows["postgres"][key])))
EOF
