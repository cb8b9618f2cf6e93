#!/usr/bin/env bash
# A throwaway Citus cluster for development and tests, under .run/citus in the repository: a coordinator and
# two workers, each a PostgreSQL with the Citus extension, on free loopback ports.
#
#   scripts/citus.sh install        build and install Citus from CITUS_SOURCE when it is not installed (exit 3:
#                                   the packages the build needs cannot be installed here)
#   scripts/citus.sh available      exit 0 when Citus is installed or CITUS_SOURCE names an archive
#   scripts/citus.sh start          install (if needed), initdb (first time), start the three nodes, join them,
#                                   print the coordinator's URL
#   scripts/citus.sh url            print the coordinator's URL
#   scripts/citus.sh create-database NAME
#                                   a new database on every node, with the extension, its workers added:
#                                   print its URL (Citus keeps its nodes per database; tests make one each)
#   scripts/citus.sh drop-database NAME
#   scripts/citus.sh stop-worker N  stop worker N (1 or 2) at once (`-m immediate`: as a crash would)
#   scripts/citus.sh start-worker N start worker N again on its port
#   scripts/citus.sh stop           stop every node (the data stays until `destroy`)
#   scripts/citus.sh destroy        stop them and delete their files
#
# CITUS_SOURCE: a Citus release archive (citus-13.2.x.tar.gz, as released by citusdata/citus). Building it
# needs PostgreSQL's server headers and a few -dev packages, installed with apt-get as the build needs them
# (as root, or with sudo); about 4 minutes on 2 cores. Installing postgresql-server-dev-NN may move the
# PostgreSQL server to its minor version: restart clusters started before.
# The nodes run as the `postgres` user (via runuser) when invoked as root, as the current user otherwise.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
run_dir="${SYNC_CITUS_DIR:-$root/.run/citus}"
case "$run_dir" in /*) ;; *) run_dir="$PWD/$run_dir" ;; esac
database="sync"
user="sync"
nodes=(coordinator worker1 worker2)

# shellcheck source=lib/postgres-common.sh
. "$root/scripts/lib/postgres-common.sh"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo "$@"
    else
        echo "citus.sh: needs root for: $*" >&2
        return 1
    fi
}

# The major version of the PostgreSQL whose binaries the clusters use (the newest installed).
pg_major() {
    local initdb
    initdb="$(find_bin initdb)" || { echo "citus.sh: no PostgreSQL server binaries; run scripts/bootstrap.sh" >&2; exit 1; }
    "$initdb" --version | sed -n 's/.* \([0-9][0-9]*\)\.[0-9].*/\1/p'
}

installed() {
    [ -f "/usr/lib/postgresql/$(pg_major)/lib/citus.so" ]
}

install() {
    installed && return 0
    if [ -z "${CITUS_SOURCE:-}" ] || [ ! -f "$CITUS_SOURCE" ]; then
        echo "citus.sh: Citus is not installed and CITUS_SOURCE names no archive (${CITUS_SOURCE:-unset})" >&2
        exit 1
    fi
    local major packages=() package
    major="$(pg_major)"
    for package in "postgresql-server-dev-$major" libzstd-dev liblz4-dev libkrb5-dev libselinux1-dev libxslt1-dev \
        libpam0g-dev libreadline-dev libssl-dev make gcc; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep "install ok installed" >/dev/null || packages+=("$package")
    done
    if [ ${#packages[@]} -gt 0 ]; then
        echo "citus.sh: installing ${packages[*]}" >&2
        # Exit 3: this machine cannot get them (no root, no package repository), which scripts/citus-test.sh
        # reports as a skip rather than a failure.
        # The package lists first, as scripts/bootstrap.sh does: a machine that had nothing to install for
        # bootstrap may have none, and apt-get then finds no package at all.
        { as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
            && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -qq -y --no-install-recommends \
                "${packages[@]}"; } >/dev/null || {
            echo "citus.sh: apt-get failed; install these yourself, then retry: ${packages[*]}" >&2
            exit 3
        }
    fi
    local build="$root/.run/citus-build"
    rm -rf "$build"
    mkdir -p "$build"
    tar -xzf "$CITUS_SOURCE" -C "$build"
    local source
    source="$(find "$build" -mindepth 1 -maxdepth 1 -type d | head -1)"
    # Citus 13.2 defines have_createdb_privilege() for PostgreSQL 15 releases that did not export it; 15.20
    # does, and the two definitions clash. Keep Citus's only when the headers lack it.
    local compat="$source/src/include/pg_version_compat.h"
    if grep -q "have_createdb_privilege" "/usr/include/postgresql/$major/server/commands/dbcommands.h" 2>/dev/null; then
        python3 - "$compat" <<'EOF'
import re, sys
path = sys.argv[1]
text = open(path).read()
text = re.sub(r"static inline bool\s+have_createdb_privilege\(void\)\s*\{.*?\n\}\n", "", text, count=1, flags=re.S)
open(path, "w").write(text)
EOF
    fi
    echo "citus.sh: building Citus from $CITUS_SOURCE (a few minutes)" >&2
    (
        cd "$source"
        ./configure --without-libcurl PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config" >"$build/configure.log" 2>&1 \
            || { tail -30 "$build/configure.log" >&2; exit 1; }
        make -j"$(nproc)" >"$build/make.log" 2>&1 || { grep -E "error:|Error [0-9]" "$build/make.log" | head -30 >&2; exit 1; }
        as_root make install >"$build/install.log" 2>&1 || { tail -30 "$build/install.log" >&2; exit 1; }
    )
    installed || { echo "citus.sh: the build finished but citus.so is not installed" >&2; exit 1; }
    echo "citus.sh: installed Citus for PostgreSQL $major" >&2
}

port_of() { cat "$run_dir/$1/port"; }

url() {
    echo "postgres://$user@127.0.0.1:$(port_of coordinator)/$database"
}

is_running() {
    local node="$1"
    [ -f "$run_dir/$node/data/postmaster.pid" ] && [ -f "$run_dir/$node/port" ] \
        && "$(find_bin pg_isready)" -q -h 127.0.0.1 -p "$(port_of "$node")" 2>/dev/null
}

psql_at() {
    local port="$1"
    shift
    PGOPTIONS="-c client_min_messages=warning" "$(find_bin psql)" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U "$user" "$@"
}

# Starts one node (initdb the first time), on the port it had if any.
start_node() {
    local node="$1" dir="$run_dir/$1"
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
    if is_running "$node"; then return 0; fi
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        rm -rf "$dir/data"
        as_owner "$(find_bin initdb)" -D "$dir/data" -U "$user" --auth=trust --encoding=UTF8 --no-locale \
            >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    # PostgreSQL releases that restrict logical decoding's output plugins (output_plugin_libraries) must allow
    # Citus's, which splitting a shard (isolate_tenant_to_new_shard) uses.
    local plugins=""
    # grep reads the whole list: with `grep -q` quitting early, postgres got SIGPIPE and pipefail made the
    # test fail at random (a worker of CI's cluster started without the setting).
    if as_owner "$(find_bin postgres)" --describe-config 2>/dev/null | grep "^output_plugin_libraries" >/dev/null; then
        plugins="-c output_plugin_libraries='pgoutput,test_decoding,citus'"
    fi
    local port attempt durability
    durability="$(durability_options)"
    for attempt in 1 2 3 4 5; do
        if [ -f "$dir/port" ] && [ "$attempt" -eq 1 ]; then port="$(cat "$dir/port")"; else port="$(free_port)"; fi
        if without_inherited_files as_owner "$(find_bin pg_ctl)" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start -o \
            "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories='$dir' -c max_connections=1000 -c shared_buffers=128MB -c shared_preload_libraries=citus -c max_prepared_transactions=100 -c max_worker_processes=64 -c wal_level=logical -c log_line_prefix='%m [%p] %d ' $plugins $durability" \
            >/dev/null 2>&1; then
            echo "$port" >"$dir/port"
            break
        fi
        [ "$attempt" -eq 5 ] && { echo "citus.sh: could not start $node; see $dir/postgres.log" >&2; tail -20 "$dir/postgres.log" >&2; exit 1; }
    done
    local port_now
    port_now="$(port_of "$node")"
    if ! psql_at "$port_now" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$database'" | grep 1 >/dev/null; then
        psql_at "$port_now" -d postgres -c "CREATE DATABASE $database" >/dev/null
    fi
    psql_at "$port_now" -d "$database" -c "CREATE EXTENSION IF NOT EXISTS citus" >/dev/null
}

start() {
    install
    mkdir -p "$run_dir"
    open_to_owner "$run_dir"
    local node
    for node in "${nodes[@]}"; do start_node "$node"; done
    local coordinator
    coordinator="$(port_of coordinator)"
    psql_at "$coordinator" -d "$database" -c "SELECT citus_set_coordinator_host('127.0.0.1', $coordinator)" >/dev/null
    for node in worker1 worker2; do
        local port
        port="$(port_of "$node")"
        if ! psql_at "$coordinator" -d "$database" -tAc \
            "SELECT 1 FROM pg_dist_node WHERE nodename = '127.0.0.1' AND nodeport = $port" | grep 1 >/dev/null; then
            psql_at "$coordinator" -d "$database" -c "SELECT citus_add_node('127.0.0.1', $port)" >/dev/null
        fi
    done
    url
}

# One at a time (a lock in the cluster's folder): adding a node updates catalogs that every database of the
# worker shares (its roles), and two databases doing it at once fail with "tuple concurrently updated".
create_database() {
    local name="$1" node port coordinator
    case "$name" in "" | *[!a-z0-9_]*) echo "citus.sh: a database name is [a-z0-9_]+" >&2; exit 2 ;; esac
    [ -f "$run_dir/coordinator/port" ] || { echo "citus.sh: not started" >&2; exit 1; }
    exec 9>"$run_dir/lock"
    flock 9
    for node in "${nodes[@]}"; do
        port="$(port_of "$node")"
        psql_at "$port" -d postgres -c "CREATE DATABASE $name" >/dev/null
        psql_at "$port" -d "$name" -c "CREATE EXTENSION citus" >/dev/null
    done
    coordinator="$(port_of coordinator)"
    psql_at "$coordinator" -d "$name" -c "SELECT citus_set_coordinator_host('127.0.0.1', $coordinator)" >/dev/null
    for node in worker1 worker2; do
        psql_at "$coordinator" -d "$name" -c "SELECT citus_add_node('127.0.0.1', $(port_of "$node"))" >/dev/null
    done
    flock -u 9
    echo "postgres://$user@127.0.0.1:$coordinator/$name"
}

drop_database() {
    local name="$1" node
    case "$name" in "" | *[!a-z0-9_]*) echo "citus.sh: a database name is [a-z0-9_]+" >&2; exit 2 ;; esac
    for node in coordinator worker1 worker2; do
        is_running "$node" || continue
        psql_at "$(port_of "$node")" -d postgres -c "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null
    done
}

worker_name() {
    case "${1:-}" in
        1 | 2) echo "worker$1" ;;
        *) echo "citus.sh: a worker is 1 or 2" >&2; exit 2 ;;
    esac
}

stop_node() {
    local node="$1" mode="${2:-fast}"
    [ -f "$run_dir/$node/data/postmaster.pid" ] || return 0
    as_owner "$(find_bin pg_ctl)" -D "$run_dir/$node/data" -m "$mode" -w stop >/dev/null 2>&1 || true
}

stop() {
    local node
    for node in worker1 worker2 coordinator; do stop_node "$node"; done
}

case "${1:-}" in
    install) install ;;
    available)
        installed 2>/dev/null && exit 0
        [ -n "${CITUS_SOURCE:-}" ] && [ -f "$CITUS_SOURCE" ] && exit 0
        exit 1
        ;;
    start) start ;;
    url)
        [ -f "$run_dir/coordinator/port" ] || { echo "citus.sh: not started" >&2; exit 1; }
        url
        ;;
    create-database) create_database "${2:-}" ;;
    drop-database) drop_database "${2:-}" ;;
    stop-worker) stop_node "$(worker_name "${2:-}")" immediate ;;
    start-worker) start_node "$(worker_name "${2:-}")" ;;
    stop) stop ;;
    destroy)
        stop
        rm -rf "$run_dir"
        ;;
    *)
        echo "usage: $0 install|available|start|url|create-database NAME|drop-database NAME|stop-worker N|start-worker N|stop|destroy" >&2
        exit 2
        ;;
esac
