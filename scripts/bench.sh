#!/usr/bin/env bash
# `make bench` / `make bench-quick`: the performance suite. Builds the release binaries, starts PostgreSQL (a
# throwaway cluster, or SYNC_DATABASE_URL's server), runs every scenario against real processes — sync-server
# on a fresh database per scenario, sync-bench's clients, sync-load's devices, a sync-agent — each with its
# baseline in the same run, then `sync-bench report` writes the report: report.md, report.html (charts inline),
# results.json, a CSV per scenario and SVG charts (gnuplot), compared with Benchmarks/results/baseline.json.
#
# Scenarios (BENCH_SCENARIOS, space-separated; default all, in this order):
#   throughput  events/s accepted from bulk clients (3 runs, each against a raw COPY of as many rows), from
#               one-event pushes 1 and 32 in flight (against pgbench running the same insert, with the server's
#               and PostgreSQL's CPU time per push) and from device-like clients (sync-load devices writing as fast
#               as they can)
#   latency     the sync-load sweep over full replicas: push and write-to-visible p50/p99,
#               healthy/degraded/collapsed; then thin devices on the live stream (a thousand and more) beside
#               a few replicas
#   rebuild     projection rebuild after N events against a plain SQLite insert, and +10 events incremental
#   storage     the churn workload with compaction and without: server and device bytes against operations,
#               against the live state alone; a fresh device's bootstrap of each history
#   bootstrap   a fresh device pulling and applying a long history, against a plain HTTP client; a fresh
#               sync-agent process doing the same
#   blobs       one large attachment up and down through the blob routes (the PostgreSQL store, then the
#               directory store), against curl putting and getting the same file on nginx's static route;
#               the device's and the server's memory growth
#   crdt        the editing traces of Packages/SyncCRDT/Data/editing-traces replayed, against a plain array
#
# Environment:
#   BENCH_QUICK=1     every scenario at small size (about 3 minutes): proves the suite works end to end
#   BENCH_QUICK=smoke the quick suite at a third of its sizes, which still runs every scenario's code and
#                     draws every chart: what the test suite runs, on debug builds and beside other tests
#   BENCH_BIN         folder with release (or any) builds of sync-server, sync-bench, sync-load, sync-agent
#                     (default: built here with -c release)
#   BENCH_OUT         the run's folder (default Benchmarks/results/<date>-<commit>, or .run/bench/… when quick)
#   BENCH_BASELINE    results.json to compare with (default Benchmarks/results/baseline.json)
#   BENCH_TRACES      folder of the editing traces (default Packages/SyncCRDT/Data/editing-traces)
#   BENCH_CHURN_WARM_UP  operations of the storage scenario made before the counted ones (default 0), so that
#                     the notes have the ages the workload settles at (a note lives about 33 operations)
# Exit status: 0 when every scenario ran, every verdict passed and every chart was drawn.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

quick="${BENCH_QUICK:-0}"
smoke=0
if [ "$quick" = smoke ]; then quick=1 smoke=1; fi
scenarios="${BENCH_SCENARIOS:-throughput latency rebuild storage bootstrap blobs crdt}"
commit="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
# "-dirty" when the code measured differs from the commit (documentation and other scripts do not count).
if [ -n "$(git status --porcelain --untracked-files=no -- Packages Apps Benchmarks/SyncBench Package.swift \
    Package.resolved scripts/bench.sh 2>/dev/null || true)" ]; then commit="$commit-dirty"; fi
stamp="$(date -u +%Y-%m-%d)"
mode=full
[ "$quick" = 1 ] && mode=quick
if [ "$quick" = 1 ]; then
    default_out="$root/.run/bench/$stamp-${commit:0:10}-quick"
else
    default_out="$root/Benchmarks/results/$stamp-${commit:0:10}"
fi
out="${BENCH_OUT:-$default_out}"
baseline="${BENCH_BASELINE:-$root/Benchmarks/results/baseline.json}"
traces="${BENCH_TRACES:-$root/Packages/SyncCRDT/Data/editing-traces}"
work="$root/.run/bench/work-$$"
rm -rf "$out/raw" "$work"
mkdir -p "$out/raw" "$work"

# Sizes: the full suite takes about 25 minutes here; the quick one about 3.
if [ "$quick" = 1 ]; then
    push_events=20000 push_runs=2 load_devices=10 load_scopes=2 load_seconds=8 one_push_events=1000 pgbench_seconds=2
    sweep="devices=4,16" sweep_seconds=8 sweep_ramp=2
    thin_sweep="devices=10" thin_replicas=1 thin_scopes=1
    rebuild_sizes="1000 5000 20000" rebuild_runs=3
    churn_notes=500 churn_operations=10000 churn_checkpoints="2500,5000,10000" churn_cost=0
    bootstrap_events=10000 records_events=10000
    blob_mib=16 blob_runs=1
    trace_runs=1
    if [ "$smoke" = 1 ]; then
        push_events=5000 push_runs=2 load_seconds=4 sweep_seconds=4 sweep_ramp=1 one_push_events=300 pgbench_seconds=1
        rebuild_sizes="500 2000 5000" rebuild_runs=2
        churn_notes=200 churn_operations=3000 churn_checkpoints="750,1500,3000"
        bootstrap_events=3000 records_events=3000
        blob_mib=4
    fi
else
    push_events=200000 push_runs=3 load_devices=100 load_scopes=20 load_seconds=30 one_push_events=3000 pgbench_seconds=5
    sweep="devices=10,100,1000" sweep_seconds=45 sweep_ramp=15
    thin_sweep="devices=1000,3000" thin_replicas=10 thin_scopes=300
    rebuild_sizes="5000 100000 1000000" rebuild_runs=3
    churn_notes=10000 churn_operations=1000000 churn_checkpoints="100000,250000,500000,1000000" churn_cost=100000
    bootstrap_events=1000000 records_events=200000
    blob_mib=100 blob_runs=3
    trace_runs=5
fi

churn_warm_up="${BENCH_CHURN_WARM_UP:-0}"

# Progress: which scenario, how far, time left (from each scenario's expected share, scaled by how the
# finished ones compared with their expectation).
declare -A expected
if [ "$quick" = 1 ]; then
    expected=([throughput]=25 [latency]=80 [rebuild]=15 [storage]=30 [bootstrap]=35 [blobs]=15 [crdt]=25)
else
    expected=([throughput]=60 [latency]=420 [rebuild]=150 [storage]=780 [bootstrap]=260 [blobs]=60 [crdt]=10)
fi
suite_start=$(date +%s)
done_expected=0
done_actual=0
scenario_index=0
scenario_count=$(wc -w <<<"$scenarios")
progress() {
    local now elapsed remaining=0 s scale
    now=$(date +%s)
    elapsed=$((now - suite_start))
    for s in $scenarios; do
        [ -f "$work/done-$s" ] || remaining=$((remaining + ${expected[$s]:-60}))
    done
    # The running scenario's part already spent (at most its whole expectation).
    local spent=$((now - ${scenario_started:-$now}))
    [ "$spent" -gt "${expected[${scenario_running:-none}]:-0}" ] && spent=${expected[${scenario_running:-none}]:-0}
    [ -f "$work/done-${scenario_running:-none}" ] && spent=0
    remaining=$((remaining - spent))
    scale=100
    [ "$done_expected" -gt 0 ] && scale=$((done_actual * 100 / done_expected))
    [ "$scale" -lt 50 ] && scale=50
    printf '[bench %d/%d · %dm%02ds elapsed · about %d min left] %s\n' "$scenario_index" "$scenario_count" \
        $((elapsed / 60)) $((elapsed % 60)) $(((remaining * scale / 100 + 59) / 60)) "$*" >&2
}

if [ -n "${BENCH_BIN:-}" ]; then
    bin="$BENCH_BIN"
else
    echo "bench: building sync-server, sync-bench, sync-load and sync-agent (release)…" >&2
    for product in sync-server sync-bench sync-load sync-agent; do
        swift build -c release --product "$product" >/dev/null
    done
    bin="$(swift build -c release --show-bin-path)"
fi
command -v gnuplot >/dev/null 2>&1 || "$root/scripts/bootstrap.sh"

# psql's NOTICEs (a database that does not exist yet) are noise here.
export PGOPTIONS="-c client_min_messages=warning"
url="$(scripts/postgres.sh start)"
admin="${url%/*}/postgres"
postmaster="$(head -1 "${SYNC_POSTGRES_DIR:-$root/.run/postgres}/data/postmaster.pid" 2>/dev/null || true)"
SYNC_JWT_SECRET="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export SYNC_JWT_SECRET
port="${BENCH_PORT:-18090}"
server_pid=""
database_url=""

stop_server() {
    if [ -n "$server_pid" ]; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}
cleanup() {
    stop_server
    [ -n "${static_pid:-}" ] && kill -TERM "$static_pid" 2>/dev/null || true
    [ "${status:-1}" = 0 ] && rm -rf "$work"
    for database in $(psql "$admin" -Atc "SELECT datname FROM pg_database WHERE datname LIKE 'bench\_%'" 2>/dev/null); do
        psql "$admin" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
    done
}
trap cleanup EXIT

# A fresh database and a sync-server on it (compaction off: the scenarios that fold do it themselves).
start_server() {
    local name="bench_$1" quota="${2:-5000}"
    stop_server
    psql "$admin" -qc "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null
    psql "$admin" -qc "CREATE DATABASE $name" >/dev/null
    database_url="${url%/*}/$name"
    SYNC_DATABASE_URL="$database_url" SYNC_COMPACTION_INTERVAL_SECONDS=0 SYNC_LOG_LEVEL=warning \
        "$bin/sync-server" --port "$port" --note-quota "$quota" >"$work/server-$1.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 150); do
        curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "bench: sync-server did not start:" >&2
    tail -20 "$work/server-$1.log" >&2
    exit 1
}
server="http://127.0.0.1:$port"
token() { "$bin/sync-server" token --sub bench --scopes "$1" --ttl 86400; }
scope_list() { seq -s, -f "$1-%g" 0 $(($2 - 1)); }
watch_args() {
    local args=(--watch "server=$server_pid")
    [ -n "$postmaster" ] && args+=(--watch "postgres=$postmaster")
    echo "${args[@]}"
}

scenario_throughput() {
    start_server throughput
    local token_value
    token_value="$(token "$(scope_list bench 16)")"
    for run in $(seq 1 "$push_runs"); do
        progress "throughput: bulk push run $run of $push_runs ($push_events events, then a COPY of as many rows)"
        "$bin/sync-bench" push --server "$server" --token "$token_value" --events "$push_events" --batch 1000 \
            --concurrency 4 --database-url "$database_url" --json >"$out/raw/push-$run.json"
    done
    # One-event pushes over 100 scopes, one at a time and 32 in flight (four times as many): events/s, and the
    # CPU time per push of the server and of PostgreSQL (from /proc, when the cluster is the throwaway one),
    # against pgbench running the same insert with as many clients, in the same database, and the server's CPU
    # against a bare server of the same parts pushed the same bodies (sync-bench bare-server).
    local in_flight events
    for in_flight in 1 32; do
        events=$((in_flight == 1 ? one_push_events : one_push_events * 4))
        progress "throughput: $events one-event pushes, $in_flight in flight, then pgbench with $in_flight clients"
        # shellcheck disable=SC2046
        "$bin/sync-bench" push --server "$server" --token "$(token "$(scope_list bench 100)")" --events "$events" \
            --batch 1 --concurrency "$in_flight" --scopes 100 --server-pid "$server_pid" \
            $([ -n "$postmaster" ] && echo --postgres-pid "$postmaster") --database-url "$database_url" \
            --baseline pgbench --pgbench-clients "$in_flight" --pgbench-seconds "$pgbench_seconds" --bare-server --json \
            >"$out/raw/onepush-$in_flight.json"
    done
    progress "throughput: $load_devices sync-load devices writing as fast as they can for $load_seconds s"
    # shellcheck disable=SC2046
    "$bin/sync-load" --server "$server" --devices 0 --replicas "$load_devices" --scopes "$load_scopes" --duration "$load_seconds" \
        --ramp-up 2 --rate 20 --offline 0 --faults 0 --crash-interval 0 --seed 1 --out "$work/throughput-devices" \
        --data-dir "$work/throughput-devices/devices" $(watch_args) >"$work/throughput-devices.log" 2>&1
    cp "$work/throughput-devices/report.json" "$out/raw/throughput-devices.json"
}

scenario_latency() {
    start_server latency
    progress "latency: sync-load sweep $sweep, $sweep_seconds s of writing per step"
    # shellcheck disable=SC2046
    "$bin/sync-load" --server "$server" --sweep "${sweep/devices=/replicas=}" --devices 0 --replicas 10 --scopes 1 --duration "$sweep_seconds" \
        --ramp-up "$sweep_ramp" --rate 2 --seed 1 --out "$work/latency" --data-dir "$work/latency/devices" \
        $(watch_args) >"$work/latency.log" 2>&1 || true
    [ -f "$work/latency/report.json" ] && cp "$work/latency/report.json" "$out/raw/latency-sweep.json"
    [ -f "$work/latency/report.md" ] && cp "$work/latency/report.md" "$out/raw/latency-sweep.md"

    # Thin devices (each a connection and a live stream, no file) beside a few full replicas, one scope per
    # ten devices, editing at half an action a second: how many one server keeps live.
    start_server latency_thin
    progress "latency: thin devices on the live stream, sweep $thin_sweep beside $thin_replicas replicas"
    "$bin/sync-load" --server "$server" --sweep "$thin_sweep" --devices "${thin_sweep##*[=,]}" \
        --replicas "$thin_replicas" --scopes "$thin_scopes" --duration "$sweep_seconds" --ramp-up "$sweep_ramp" \
        --rate 0.5 --seed 1 --out "$work/latency-thin" --data-dir "$work/latency-thin/devices" \
        $(watch_args) >"$work/latency-thin.log" 2>&1 || true
    [ -f "$work/latency-thin/report.json" ] && cp "$work/latency-thin/report.json" "$out/raw/latency-thin.json"
    [ -f "$work/latency-thin/report.md" ] && cp "$work/latency-thin/report.md" "$out/raw/latency-thin.md"
}

scenario_rebuild() {
    stop_server
    for events in $rebuild_sizes; do
        progress "rebuild: $events events, $rebuild_runs timed rebuilds and as many plain inserts"
        "$bin/sync-bench" rebuild --events "$events" --runs "$rebuild_runs" --directory "$work/rebuild" \
            >"$out/raw/rebuild-$(printf '%08d' "$events").json"
        rm -rf "$work/rebuild"
    done
}

scenario_storage() {
    local flag label
    for label in compaction none; do
        start_server "churn_$label"
        flag=""
        [ "$label" = none ] && flag="--no-compaction"
        progress "storage: churn, $churn_operations operations, $([ "$label" = none ] && echo without || echo with) compaction"
        # shellcheck disable=SC2086
        "$bin/sync-bench" churn --server "$server" --token "$(token "$(scope_list churn 10)")" \
            --database-url "$database_url" --notes "$churn_notes" --operations "$churn_operations" \
            --checkpoints "$churn_checkpoints" --warm-up "$churn_warm_up" --cost-operations "$([ "$label" = compaction ] && echo "$churn_cost" || echo 0)" \
            $flag --directory "$work/churn-$label" --json >"$out/raw/churn-$label.json" 2>"$work/churn-$label.log"
        rm -rf "$work/churn-$label"
    done
}

scenario_bootstrap() {
    start_server bootstrap
    progress "bootstrap: $bootstrap_events events pushed, then a fresh device pulls them (and a plain HTTP client)"
    "$bin/sync-bench" bootstrap --server "$server" --token "$(token "$(scope_list bench 16),bench-outbox")" \
        --events "$bootstrap_events" --directory "$work/bootstrap" --json >"$out/raw/bootstrap.json" \
        2>"$work/bootstrap.log"
    progress "bootstrap: a fresh sync-agent process syncs the same $bootstrap_events events"
    local start end
    start=$(date +%s.%N)
    SYNC_TOKEN="$(token "$(scope_list bench 16)")" "$bin/sync-agent" --db "$work/agent.sqlite" --server "$server" \
        sync >"$work/agent.log" 2>&1
    end=$(date +%s.%N)
    printf '{"events": %d, "seconds": %s, "databaseBytes": %d}\n' "$bootstrap_events" \
        "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')" "$(stat -c %s "$work/agent.sqlite")" >"$out/raw/bootstrap-agent.json"
    # Many records rather than many events: every event a note of its own, then a long tail (most notes with
    # one event, a few with thousands). The quota lets a scope hold them all.
    local shape
    for shape in records long-tail; do
        start_server "bootstrap_${shape/-/_}" $((records_events / 16 + 1000))
        progress "bootstrap: $records_events events of the $shape shape pushed, then a fresh device pulls them (and a plain HTTP client)"
        "$bin/sync-bench" bootstrap --server "$server" --token "$(token "$(scope_list bench 16)")" --shape "$shape" \
            --events "$records_events" --directory "$work/bootstrap-$shape" --json \
            >"$out/raw/bootstrap-$shape.json" 2>"$work/bootstrap-$shape.log"
        rm -rf "$work/bootstrap-$shape"
    done
}

# nginx serving a folder on loopback, accepting PUT (its dav module): the static route curl moves the
# blob scenario's bytes to and from. Its folder is world-writable, for nginx's worker user when run as root.
static_pid=""
start_static() {
    local dir="$work/static"
    mkdir -p "$dir/files" "$dir/tmp" "$dir/logs"
    chmod 777 "$dir/files" "$dir/tmp"
    # A port nobody holds now (the server's port plus one may be another program's, as a test's beside it).
    static_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
    cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/logs/error.log;
events { worker_connections 64; }
http {
    access_log off;
    sendfile on;
    client_body_temp_path $dir/tmp;
    proxy_temp_path $dir/tmp;
    fastcgi_temp_path $dir/tmp;
    uwsgi_temp_path $dir/tmp;
    scgi_temp_path $dir/tmp;
    server {
        listen 127.0.0.1:$static_port;
        location /static/ {
            root $dir/files;
            dav_methods PUT;
            create_full_put_path on;
            client_max_body_size 0;
        }
    }
}
EOF
    nginx -c "$dir/nginx.conf" -p "$dir" >"$work/nginx.log" 2>&1 &
    static_pid=$!
    for _ in $(seq 1 50); do
        curl -s -o /dev/null "http://127.0.0.1:$static_port/static/" && return 0
        sleep 0.1
    done
    echo "bench: nginx did not start:" >&2
    cat "$work/nginx.log" >&2
    exit 1
}

scenario_blobs() {
    start_static
    # The PostgreSQL store (the default), then the directory store.
    local store file
    for store in postgres directory; do
        file=blobs
        if [ "$store" = directory ]; then
            file=blobs-directory
            export SYNC_BLOB_STORE="directory:$work/blob-store"
        fi
        start_server blobs
        progress "blobs: a $blob_mib MiB attachment up and down ($blob_runs runs, $store store), and curl on nginx's static route"
        "$bin/sync-bench" blobs --server "$server" --token "$(token bench-blobs)" --mib "$blob_mib" --runs "$blob_runs" \
            --server-pid "$server_pid" --baseline-url "http://127.0.0.1:$static_port/static/" --store "$store" \
            --directory "$work/blobs" --json >"$out/raw/$file.json" 2>"$work/$file.log"
        unset SYNC_BLOB_STORE
        # The devices' files too: the next store's run starts from fresh devices.
        rm -rf "$work/blob-store" "$work/blobs"
    done
    stop_server
    kill -TERM "$static_pid" 2>/dev/null || true
    wait "$static_pid" 2>/dev/null || true
    static_pid=""
    rm -rf "$work/blobs" "$work/static/files"
}

scenario_crdt() {
    stop_server
    local file kind name
    for kind in sequential concurrent; do
        for file in "$traces/$kind"/*.json.gz "$traces/$kind"/*.json; do
            [ -f "$file" ] || continue
            name="$(basename "$file")"
            name="${name%.gz}"
            name="${name%.json}"
            # Quick: the smallest trace of each kind only.
            if [ "$quick" = 1 ] && [ "$file" != "$(ls -S "$traces/$kind"/*.json* | tail -1)" ]; then continue; fi
            progress "crdt: $kind trace $name"
            local flag=""
            [ "$kind" = concurrent ] && flag="--concurrent"
            # shellcheck disable=SC2086
            "$bin/sync-bench" trace "$file" $flag --runs "$trace_runs" >"$out/raw/trace-$kind-$name.json"
        done
    done
}

cpu="$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ *//' || echo unknown)"
memory="$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null || echo unknown)"
os="$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME" || uname -sr)"
# The command that reproduces this run: the make target with the variables that change what is measured.
invocation="make bench"
[ "$quick" = 1 ] && invocation="make bench-quick"
[ "$churn_warm_up" != 0 ] && invocation="BENCH_CHURN_WARM_UP=$churn_warm_up $invocation"
[ -n "${BENCH_SCENARIOS:-}" ] && invocation="BENCH_SCENARIOS='$scenarios' $invocation"
cat >"$out/raw/run.json" <<EOF
{
  "commit": "$commit",
  "startedAt": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "mode": "$mode",
  "machine": {"cpu": "$cpu", "cores": "$(nproc) cores", "memory": "$memory", "os": "$os",
              "postgres": "$(psql "$admin" -Atc 'SHOW server_version' 2>/dev/null || echo unknown)"},
  "configuration": {
    "command": "$invocation",
    "throughput": "sync-bench push --events $push_events --batch 1000 --concurrency 4 ($push_runs runs, COPY baseline each); sync-load --devices $load_devices --scopes $load_scopes --duration $load_seconds --rate 20 --offline 0 --faults 0 --crash-interval 0",
    "latency": "sync-load --sweep $sweep --duration $sweep_seconds --ramp-up $sweep_ramp --rate 2 --seed 1 (defaults: 10% offline, 5% faults, crashes); thin devices: sync-load --sweep $thin_sweep --replicas $thin_replicas --rate 0.5",
    "rebuild": "sync-bench rebuild --events {$rebuild_sizes} --runs $rebuild_runs",
    "storage": "sync-bench churn --notes $churn_notes --warm-up $churn_warm_up --operations $churn_operations --checkpoints $churn_checkpoints, with and without --no-compaction",
    "bootstrap": "sync-bench bootstrap --events $bootstrap_events (16 scopes); sync-agent sync of the same; sync-bench bootstrap --shape {records,long-tail} --events $records_events",
    "blobs": "sync-bench blobs --mib $blob_mib --runs $blob_runs (4 MiB chunks, two in flight, the PostgreSQL blob store and the directory store), curl -T and curl -o (into a file and into /dev/null) on nginx's static route",
    "crdt": "sync-bench trace --runs $trace_runs on every trace of editing-traces/{sequential,concurrent}",
    "server": "sync-server --note-quota 5000, SYNC_COMPACTION_INTERVAL_SECONDS=0, one fresh database per scenario"
  }
}
EOF

failed=""
for scenario in $scenarios; do
    scenario_index=$((scenario_index + 1))
    started=$(date +%s)
    scenario_started=$started
    scenario_running=$scenario
    # A subshell per scenario, so that set -e stops the scenario at its first failure (and stops its server)
    # without stopping the suite.
    set +e
    (
        set -e
        trap stop_server EXIT
        "scenario_$scenario"
    )
    rc=$?
    set -e
    if [ "$rc" != 0 ]; then
        echo "bench: scenario $scenario failed (its logs are in $work)" >&2
        failed="$failed $scenario"
    fi
    took=$(($(date +%s) - started))
    printf '%s\t%d\n' "$scenario" "$took" >>"$out/raw/timings.tsv"
    touch "$work/done-$scenario"
    done_expected=$((done_expected + ${expected[$scenario]:-60}))
    done_actual=$((done_actual + took))
done

progress "report"
status=0
report_args=(--directory "$out" --require-complete --scenarios "$scenarios")
[ -f "$baseline" ] && report_args+=(--baseline "$baseline")
"$bin/sync-bench" report "${report_args[@]}" || status=$?
[ -n "$failed" ] && status=1
echo "bench: $out/report.md (and report.html)" >&2
exit "$status"
