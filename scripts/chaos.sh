#!/usr/bin/env bash
# `make chaos`: faults under load, each scenario ending in sync-load's verdict, and the table of
# docs/RELIABILITY.md regenerated from the results.
#
# The stack: a PostgreSQL cluster of its own (.run/chaos/postgres, so that stopping and killing it touches no
# other), two sync-server processes on one database, nginx in front of them (deploy/nginx/sync.conf), and
# sync-load's devices going through nginx. In each scenario the devices write for a while, a fault is
# injected a third of the way in and lifted, and the devices write on; sync-load then settles every device
# and checks: nothing lost, nothing duplicated, every device equal to a fresh bootstrap, seqs gap-free.
# A probe asks /readyz through nginx every 200 ms; the longest stretch it got no 200 within 1 s is the
# scenario's time to recover.
#
# Network scenarios (net-*) put sync-fault-proxy (Apps/SyncFaultProxy) between the devices and nginx, since
# the kernel's netem is not available here: the devices and the probe go through the proxy, and the fault is
# set and lifted through its control endpoint (POST /fault). It draws (jitter, which connections are reset and
# where) from the scenario's seed. Its statistics (GET /stats, kept as SCENARIO/proxy-stats.json) fill the
# "faults injected" column. A full run of every scenario takes about 10 minutes.
#
# Environment:
#   CHAOS_SCENARIOS  scenarios to run, space-separated (default: all of them, in this order):
#                    server-kill-one  kill -9 one of the two servers, restart it 5 s later
#                    server-kill-only kill -9 the only server running (the other stopped), restart it 3 s later
#                    server-pause     SIGSTOP one of the two servers for 10 s, then SIGCONT
#                    postgres-stop    stop PostgreSQL (fast shutdown), start it again 5 s later
#                    postgres-kill    kill -9 PostgreSQL's postmaster, start it again 3 s later (crash recovery)
#                    clock-skew       no process fault: 1 device in 5 has its clock an hour ahead, 1 in 5 an hour
#                                     behind, for the whole run (the HLC clamps what is too far ahead)
#                    net-latency      through the proxy: 300 ms ± 100 ms added each way for 15 s
#                    net-bandwidth    through the proxy: 64 KiB/s per connection and direction for 15 s
#                    net-reset        through the proxy: 1 connection in 5 reset (RST) mid-response for 15 s,
#                                     after the server answered
#                    net-blackhole    through the proxy: a black hole for 10 s (connections accepted, nothing
#                                     forwarded, open ones stall), then lifted
#                    (in quick runs every network fault lasts 5 s)
#   CHAOS_QUICK=1    short runs (the CI version): 12 s of writing, 20 devices
#   CHAOS_BIN        folder with sync-server, sync-load and sync-fault-proxy (default: a release build, built here)
#   CHAOS_OUT        where results go (default .run/chaos/results); the table is written there as
#                    RELIABILITY.md and, unless CHAOS_QUICK, copied into docs/RELIABILITY.md
#   CHAOS_SEED       the first scenario's seed (default 1; each next scenario adds 1)
# Exit status: 0 when every verdict passed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

quick="${CHAOS_QUICK:-0}"
all_scenarios="server-kill-one server-kill-only server-pause postgres-stop postgres-kill clock-skew"
all_scenarios="$all_scenarios net-latency net-bandwidth net-reset net-blackhole"
scenarios="${CHAOS_SCENARIOS:-$all_scenarios}"
seed="${CHAOS_SEED:-1}"
run="$root/.run/chaos"
out="${CHAOS_OUT:-$run/results}"
if [ "$quick" = 1 ]; then
    # The quick run's reset window is short: one connection in two, so that some connection carries a
    # response through it even on a loaded machine.
    devices=20 scopes=4 duration=12 ramp=2 net_window=8 blackhole_window=5 reset_odds=2
else
    devices=60 scopes=6 duration=40 ramp=5 net_window=15 blackhole_window=10 reset_odds=5
fi
mkdir -p "$run" "$out"
rm -f "$out"/*.json
rm -rf "$out"/*.devices

command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || "$root/scripts/bootstrap.sh"
nginx_bin="$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)"

if [ -n "${CHAOS_BIN:-}" ]; then
    bin="$CHAOS_BIN"
else
    echo "chaos: building sync-server, sync-load and sync-fault-proxy (release)…" >&2
    swift build -c release --product sync-server >/dev/null
    swift build -c release --product sync-load >/dev/null
    swift build -c release --product sync-fault-proxy >/dev/null
    bin="$(swift build -c release --show-bin-path)"
fi

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# PostgreSQL of its own: SYNC_DATABASE_URL (a user's server, or the tests') is never stopped or killed.
export SYNC_POSTGRES_DIR="$run/postgres"
pg() { env -u SYNC_DATABASE_URL "$root/scripts/postgres.sh" "$@"; }
postmaster_pid() { head -1 "$SYNC_POSTGRES_DIR/data/postmaster.pid" 2>/dev/null || true; }

server_pids=("" "")
ports=()
nginx_pid=""
probe_pid=""
proxy_pid=""
# Servers restarted by a fault run in the injector's subshell, not as this shell's children: they are
# found by their port. SIGTERM, since a background job of a script starts with SIGINT ignored.
cleanup() {
    touch "$run/probe.stop"
    [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null || true
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
    for port in "${ports[@]}"; do
        for pid in $(pgrep -f "sync-server --port $port" || true); do
            kill -CONT "$pid" 2>/dev/null || true
            kill -TERM "$pid" 2>/dev/null || true
        done
    done
    for _ in $(seq 1 50); do
        alive=""
        for port in "${ports[@]}"; do pgrep -f "sync-server --port $port" >/dev/null && alive=1; done
        [ -z "$alive" ] && break
        sleep 0.2
    done
    for port in "${ports[@]}"; do pkill -KILL -f "sync-server --port $port" 2>/dev/null || true; done
    pg stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

url="$(pg start)"
admin="${url%/*}/postgres"
psql "$admin" -qc "DROP DATABASE IF EXISTS sync_chaos WITH (FORCE)" >/dev/null
psql "$admin" -qc "CREATE DATABASE sync_chaos" >/dev/null
# The database's URL names the cluster's port, which a restart keeps (postgres.sh reuses a running
# cluster's port file only while it runs, so restarts below go through pg_ctl with the same port).
pg_port="$(cat "$SYNC_POSTGRES_DIR/port")"
database_url="postgres://sync@127.0.0.1:$pg_port/sync_chaos"

SYNC_JWT_SECRET="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export SYNC_JWT_SECRET
SYNC_ADMIN_TOKEN="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export SYNC_ADMIN_TOKEN
ports=("$(free_port)" "$(free_port)")
lb_port="$(free_port)"
proxy_port="$(free_port)"
control_port="$(free_port)"

start_server() {
    local index="$1"
    SYNC_DATABASE_URL="$database_url" SYNC_COMPACTION_INTERVAL_SECONDS=0 SYNC_LOG_LEVEL=warning \
        SYNC_STARTUP_TIMEOUT_SECONDS=120 \
        "$bin/sync-server" --port "${ports[$index]}" >>"$run/server-$index.log" 2>&1 &
    server_pids[index]=$!
    for _ in $(seq 1 300); do
        curl -sf "http://127.0.0.1:${ports[$index]}/healthz" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "chaos: server $index did not start" >&2
    tail -20 "$run/server-$index.log" >&2
    return 1
}

# PostgreSQL again on the same port (the servers' URL names it).
pg_ctl_bin="$(ls /usr/lib/postgresql/*/bin/pg_ctl | tail -1)"
as_postgres() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_restart() {
    as_postgres "$pg_ctl_bin" -D "$SYNC_POSTGRES_DIR/data" -l "$SYNC_POSTGRES_DIR/postgres.log" -w -t 120 start -o \
        "-p $pg_port -c listen_addresses=127.0.0.1 -c unix_socket_directories='$SYNC_POSTGRES_DIR' -c max_connections=300 -c shared_buffers=256MB" \
        >/dev/null
}
pg_stop_fast() { as_postgres "$pg_ctl_bin" -D "$SYNC_POSTGRES_DIR/data" -m fast -w stop >/dev/null; }

start_server 0
start_server 1
mkdir -p "$run/nginx"
servers=""
for port in "${ports[@]}"; do servers="${servers}server 127.0.0.1:$port max_fails=1 fail_timeout=2s; "; done
sed -e "s|@RUN@|$run/nginx|g" -e "s|@PORT@|$lb_port|g" -e "s|@SERVERS@|$servers|" \
    "$root/deploy/nginx/sync.conf" >"$run/nginx/nginx.conf"
"$nginx_bin" -p "$run/nginx" -c "$run/nginx/nginx.conf" -e "$run/nginx/error.log" &
nginx_pid=$!
for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$lb_port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -sf "http://127.0.0.1:$lb_port/readyz" >/dev/null || { echo "chaos: nginx does not answer" >&2; exit 1; }
echo "chaos: PostgreSQL :$pg_port, sync-server :${ports[0]} and :${ports[1]}, nginx :$lb_port" >&2
echo "chaos: dashboards while it runs (each server shows its own): http://admin:$SYNC_ADMIN_TOKEN@127.0.0.1:${ports[0]}/dashboard and :${ports[1]}/dashboard" >&2

# The fault proxy, for a network scenario: between the devices (and the probe) and nginx, with no fault
# until the injector sets one. Stopped after the scenario, its statistics kept first.
start_proxy() {
    local scenario="$1" scenario_seed="$2"
    "$bin/sync-fault-proxy" --port "$proxy_port" --control-port "$control_port" --upstream "127.0.0.1:$lb_port" \
        --seed "$scenario_seed" >"$out/$scenario.proxy.log" 2>&1 &
    proxy_pid=$!
    for _ in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$control_port/fault" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "chaos: sync-fault-proxy did not start" >&2
    cat "$out/$scenario.proxy.log" >&2
    return 1
}
stop_proxy() {
    local scenario="$1"
    mkdir -p "$out/$scenario"
    curl -sf "http://127.0.0.1:$control_port/stats" >"$out/$scenario/proxy-stats.json" ||
        echo "chaos: no statistics from sync-fault-proxy" >&2
    kill -TERM "$proxy_pid" 2>/dev/null || true
    wait "$proxy_pid" 2>/dev/null || true
    proxy_pid=""
}
# Sets the proxy's faults (a spec, `none` lifts them).
proxy_fault() { curl -sf -d "$1" "http://127.0.0.1:$control_port/fault" >/dev/null; }

# The probe: one line per answer, "<unix ms> <status>" (000: none within 1 s). It stops when its stop file
# appears (no signals: a subshell carries this script's traps). It asks the address the devices use.
start_probe() {
    local file="$1" port="$2"
    rm -f "$run/probe.stop"
    (
        trap - EXIT
        while [ ! -f "$run/probe.stop" ]; do
            code="$(curl -s -o /dev/null -m 1 -w '%{http_code}' "http://127.0.0.1:$port/readyz" || true)"
            echo "$(date +%s%3N) ${code:-000}"
            sleep 0.2
        done
    ) >"$file" 2>/dev/null &
    probe_pid=$!
}
stop_probe() {
    touch "$run/probe.stop"
    wait "$probe_pid" 2>/dev/null || true
    probe_pid=""
}

# inject SCENARIO: runs in the background during the load; writes what it did to $out/SCENARIO.fault.
inject() {
    local scenario="$1" at="$2" note="$out/$scenario.fault"
    trap - EXIT
    sleep "$at"
    case "$scenario" in
        server-kill-one)
            kill -9 "${server_pids[0]}"
            echo "kill -9 of sync-server 1 of 2, restarted after 5 s" >"$note"
            sleep 5
            start_server 0
            ;;
        server-kill-only)
            kill -9 "${server_pids[0]}"
            echo "kill -9 of the only sync-server running, restarted after 3 s" >"$note"
            sleep 3
            start_server 0
            ;;
        server-pause)
            kill -STOP "${server_pids[0]}"
            echo "SIGSTOP of sync-server 1 of 2 for 10 s, then SIGCONT" >"$note"
            sleep 10
            kill -CONT "${server_pids[0]}"
            ;;
        postgres-stop)
            pg_stop_fast
            echo "PostgreSQL stopped (fast shutdown), started again after 5 s" >"$note"
            sleep 5
            pg_restart
            ;;
        postgres-kill)
            kill -9 "$(postmaster_pid)"
            echo "kill -9 of PostgreSQL's postmaster, started again after 3 s (crash recovery)" >"$note"
            sleep 3
            # The killed postmaster's backends exit on their own, and until they have, a new postmaster
            # refuses the data folder (its shared memory is still in use): retry.
            for attempt in $(seq 1 30); do
                pg_restart 2>/dev/null && break
                [ "$attempt" -eq 30 ] && { echo "chaos: PostgreSQL did not restart" >&2; return 1; }
                sleep 1
            done
            ;;
        clock-skew)
            echo "device clocks wrong all run: 1 in 5 an hour ahead, 1 in 5 an hour behind" >"$note"
            ;;
        net-latency)
            proxy_fault "latency=300ms jitter=100ms"
            echo "300 ms ± 100 ms added each way by the proxy for $net_window s" >"$note"
            sleep "$net_window"
            proxy_fault none
            ;;
        net-bandwidth)
            proxy_fault "bandwidth=64KiB"
            echo "64 KiB/s per connection and direction through the proxy for $net_window s" >"$note"
            sleep "$net_window"
            proxy_fault none
            ;;
        net-reset)
            proxy_fault "reset=$(python3 -c "print(1 / $reset_odds)")"
            echo "1 connection in $reset_odds reset (RST) by the proxy mid-response for $net_window s" >"$note"
            sleep "$net_window"
            proxy_fault none
            ;;
        net-blackhole)
            proxy_fault "blackhole=on"
            echo "black hole in the proxy for $blackhole_window s (nothing forwarded either way), then lifted" \
                >"$note"
            sleep "$blackhole_window"
            proxy_fault none
            ;;
    esac
}

status=0
for scenario in $scenarios; do
    case "$scenario" in
        server-kill-one | server-kill-only | server-pause | postgres-stop | postgres-kill | clock-skew) ;;
        net-latency | net-bandwidth | net-reset | net-blackhole) ;;
        *) echo "chaos: unknown scenario $scenario" >&2; exit 2 ;;
    esac
    echo "chaos: $scenario (seed $seed)…" >&2
    # "the only server": the second one is stopped for this scenario.
    if [ "$scenario" = server-kill-only ]; then
        kill -TERM "${server_pids[1]}"
        # Killed outright if its graceful shutdown takes longer than 10 s.
        (sleep 10 && kill -KILL "${server_pids[1]}" 2>/dev/null) &
        watchdog=$!
        wait "${server_pids[1]}" 2>/dev/null || true
        kill "$watchdog" 2>/dev/null || true
        server_pids[1]=""
    fi
    # Network scenarios: the devices and the probe go through the fault proxy.
    target_port="$lb_port"
    case "$scenario" in
        net-*)
            start_proxy "$scenario" "$seed"
            target_port="$proxy_port"
            ;;
    esac
    start_probe "$out/$scenario.probe" "$target_port"
    started=$(date +%s%3N)
    inject "$scenario" "$(python3 -c "print($ramp + $duration / 3)")" &
    injector=$!
    skew=0
    [ "$scenario" = clock-skew ] && skew=3600
    set +e
    "$bin/sync-load" --clock-skew "$skew" --server "http://127.0.0.1:$target_port" --devices 0 --replicas "$devices" --scopes "$scopes" \
        --duration "$duration" --ramp-up "$ramp" --rate 2 --offline 0.1 --faults 0.02 --crash-interval 60 \
        --seed "$seed" --scope-prefix "chaos-$scenario-$seed" --settle-timeout 180 --out "$out/$scenario" \
        --data-dir "$out/$scenario.devices" >"$out/$scenario.log" 2>&1
    result=$?
    set -e
    # The devices' files are kept beside the results when the verdict fails (`sync-load verify` reopens
    # them), in this run's own folder: a failed run must not leave a folder that stops the next one.
    [ "$result" -ne 0 ] || rm -rf "$out/$scenario.devices"
    wait "$injector" || { echo "chaos: injecting $scenario failed" >&2; result=1; }
    finished=$(date +%s%3N)
    stop_probe
    [ -n "$proxy_pid" ] && stop_proxy "$scenario"
    # The fault's own processes, restarted in the injector's subshell, are not this shell's children:
    # find them by port for the next scenario and for cleanup.
    for index in 0 1; do
        pid="$(pgrep -f "sync-server --port ${ports[$index]}" | head -1 || true)"
        server_pids[index]="$pid"
    done
    if [ "$scenario" = server-kill-only ] && [ -z "${server_pids[1]}" ]; then start_server 1; fi
    python3 - "$scenario" "$seed" "$started" "$finished" "$result" "$out" "$devices" <<'PY'
import json, sys
scenario, seed, started, finished, result, out, devices = sys.argv[1:]
report = json.load(open(f"{out}/{scenario}/report.json"))
step = report["steps"][0]
verdict = step["verdict"]
# The longest stretch of the probe without a 200.
longest, down_since = 0, None
for line in open(f"{out}/{scenario}.probe"):
    at, code = line.split()
    at = int(at)
    if code != "200":
        down_since = at if down_since is None else down_since
    elif down_since is not None:
        longest = max(longest, at - down_since)
        down_since = None
try:
    fault = open(f"{out}/{scenario}.fault").read().strip()
except FileNotFoundError:
    fault = "not injected"
# A network scenario's faults, counted by the proxy: the one its fault injects.
proxy_faults, proxy_text = None, None
try:
    stats = json.load(open(f"{out}/{scenario}/proxy-stats.json"))
    key, unit = {
        "net-latency": ("bytesDelayed", "bytes delayed"), "net-bandwidth": ("bytesThrottled", "bytes throttled"),
        "net-reset": ("connectionsReset", "connections reset"),
        "net-blackhole": ("connectionsBlackholed", "connections black-holed"),
    }[scenario]
    proxy_faults, proxy_text = stats[key], f"{stats[key]:,} {unit}"
except (FileNotFoundError, KeyError, ValueError):
    pass
row = {
    "scenario": scenario, "seed": int(seed), "seconds": round((int(finished) - int(started)) / 1000, 1),
    "devices": int(devices), "events": step["accepted"], "fault": fault,
    "transportFaults": sum(step.get("faults", {}).values()), "crashes": step.get("crashes", 0),
    "lost": verdict["lost"], "duplicated": verdict["duplicated"], "diverged": verdict["diverged"],
    "gaps": verdict["gaps"], "passed": bool(verdict["passed"]) and result == "0",
    # Why a verdict failed when nothing was lost: devices that never settled, events the server holds
    # though it rejected them, scopes a fresh device could not bootstrap, the first findings of each kind,
    # sync-load's exit status.
    "unsettled": verdict.get("unsettled", 0), "rejectedOnServer": verdict.get("rejectedOnServer", 0),
    "bootstrapFailures": verdict.get("bootstrap", 0),
    "findings": {kind: [f.get("detail", "") for f in found[:2]] for kind, found in verdict.get("findings", {}).items()},
    "exitStatus": int(result),
    "longestOutageSeconds": round(longest / 1000, 1),
    "proxyFaults": proxy_faults, "proxyFaultsText": proxy_text,
}
json.dump(row, open(f"{out}/{scenario}.json", "w"))
print(f"chaos: {scenario}: {'passed' if row['passed'] else 'FAILED'}; lost {row['lost']}, duplicated "
      f"{row['duplicated']}, diverged {row['diverged']}, gaps {row['gaps']}; outage {row['longestOutageSeconds']} s",
      file=sys.stderr)
PY
    [ "$result" -eq 0 ] || status=1
    seed=$((seed + 1))
done

commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
python3 - "$out" "$commit" "$quick" <<'PY' >"$out/RELIABILITY.md"
import json, sys, glob, datetime
out, commit, quick = sys.argv[1:]
rows = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/*.json"), key=lambda f: __import__("os").path.getmtime(f))]
print("| scenario | fault | seed | seconds | devices | events | faults injected | lost | duplicated | diverged | gaps | longest time to recover | verdict |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    injected = r.get("proxyFaultsText") or "1"
    faults = f"{injected} + {r['transportFaults']} in transport, {r['crashes']} device crashes"
    print(f"| {r['scenario']} | {r['fault']} | {r['seed']} | {r['seconds']} | {r['devices']} | {r['events']:,} | {faults} | "
          f"{r['lost']} | {r['duplicated']} | {r['diverged']} | {r['gaps']} | {r['longestOutageSeconds']} s | "
          f"{'pass' if r['passed'] else 'FAIL'} |")
print()
print(f"Measured {datetime.date.today().isoformat()} at {commit}{' (quick runs)' if quick == '1' else ''}.")
PY
cat "$out/RELIABILITY.md"
if [ "$quick" != 1 ]; then
    python3 - "$root/docs/RELIABILITY.md" "$out/RELIABILITY.md" <<'PY'
import sys
doc, table = sys.argv[1:]
text = open(doc).read()
start, end = "<!-- chaos:begin -->", "<!-- chaos:end -->"
before, rest = text.split(start, 1)
_, after = rest.split(end, 1)
open(doc, "w").write(before + start + "\n" + open(table).read() + end + after)
PY
fi
exit "$status"
