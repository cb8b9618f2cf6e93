#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for development and tests, under .run/postgres in the repository.
#
#   scripts/postgres.sh start   initdb (first time), start on a free loopback port, print the URL
#   scripts/postgres.sh url     print the URL of the running cluster
#   scripts/postgres.sh stop    stop it (the data stays until `destroy`)
#   scripts/postgres.sh destroy stop it and delete its files
#
# If SYNC_DATABASE_URL is set, the user has their own server: `start` and `url` print it and touch nothing,
# `stop` does nothing. Runs the server as the `postgres` user (via runuser) when invoked as root, as the
# current user otherwise.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
# SYNC_POSTGRES_DIR: another cluster's folder (`make chaos` stops and kills its own, beside the tests').
run_dir="${SYNC_POSTGRES_DIR:-$root/.run/postgres}"
case "$run_dir" in /*) ;; *) run_dir="$PWD/$run_dir" ;; esac
data_dir="$run_dir/data"
port_file="$run_dir/port"
log_file="$run_dir/postgres.log"
database="sync"
user="sync"

# shellcheck source=lib/postgres-common.sh
. "$root/scripts/lib/postgres-common.sh"

if [ -n "${SYNC_DATABASE_URL:-}" ]; then
    case "${1:-}" in
        start | url) echo "$SYNC_DATABASE_URL" ;;
    esac
    exit 0
fi

url() {
    echo "postgres://$user@127.0.0.1:$(cat "$port_file")/$database"
}

is_running() {
    [ -f "$data_dir/postmaster.pid" ] && [ -f "$port_file" ] \
        && "$pg_isready" -q -h 127.0.0.1 -p "$(cat "$port_file")" 2>/dev/null
}

resolve_binaries() {
    if ! initdb="$(find_bin initdb)" || ! pg_ctl="$(find_bin pg_ctl)" || ! pg_isready="$(find_bin pg_isready)"; then
        "$root/scripts/bootstrap.sh" >&2
        initdb="$(find_bin initdb)"
        pg_ctl="$(find_bin pg_ctl)"
        pg_isready="$(find_bin pg_isready)"
    fi
    psql="$(find_bin psql)"
}

start() {
    resolve_binaries
    mkdir -p "$run_dir"
    # The server runs as postgres and must be able to reach its directory.
    open_to_owner "$run_dir"
    if is_running; then
        url
        return
    fi
    if [ ! -f "$data_dir/PG_VERSION" ]; then
        rm -rf "$data_dir"
        as_owner "$initdb" -D "$data_dir" -U "$user" --auth=trust --encoding=UTF8 --no-locale >"$run_dir/initdb.log" 2>&1 \
            || { cat "$run_dir/initdb.log" >&2; exit 1; }
    fi
    local port attempt durability
    durability="$(durability_options)"
    # A thousand connections: the test suites run their tests at once, each with a server whose event loops'
    # pools keep their connections open (SYNC_REQUESTS_ON_THEIR_LOOPS), and 300 were reached.
    for attempt in 1 2 3 4 5; do
        port="$(free_port)"
        if without_inherited_files as_owner "$pg_ctl" -D "$data_dir" -l "$log_file" -w -t 60 start -o \
            "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories='$run_dir' -c max_connections=1000 -c shared_buffers=256MB $durability" \
            >/dev/null 2>&1; then
            echo "$port" >"$port_file"
            break
        fi
        [ "$attempt" -eq 5 ] && { echo "postgres.sh: could not start PostgreSQL; see $log_file" >&2; tail -20 "$log_file" >&2; exit 1; }
    done
    if ! "$psql" -h 127.0.0.1 -p "$port" -U "$user" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$database'" | grep -q 1; then
        "$psql" -h 127.0.0.1 -p "$port" -U "$user" -d postgres -qc "CREATE DATABASE $database" >/dev/null
    fi
    url
}

stop() {
    [ -f "$data_dir/postmaster.pid" ] || return 0
    resolve_binaries
    as_owner "$pg_ctl" -D "$data_dir" -m fast -w stop >/dev/null 2>&1 || true
}

case "${1:-}" in
    start) start ;;
    url)
        [ -f "$port_file" ] || { echo "postgres.sh: not started" >&2; exit 1; }
        url
        ;;
    stop) stop ;;
    destroy)
        stop
        rm -rf "$run_dir"
        ;;
    *)
        echo "usage: $0 start|url|stop|destroy" >&2
        exit 2
        ;;
esac
