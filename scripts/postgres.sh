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

if [ -n "${SYNC_DATABASE_URL:-}" ]; then
    case "${1:-}" in
        start | url) echo "$SYNC_DATABASE_URL" ;;
    esac
    exit 0
fi

find_bin() {
    local name="$1" candidate
    for candidate in /usr/lib/postgresql/*/bin/"$name"; do
        [ -x "$candidate" ] && { echo "$candidate"; return 0; }
    done
    command -v "$name" 2>/dev/null && return 0
    return 1
}

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

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

# Runs a command with only standard input, output and error open: the server it starts outlives this script,
# and must not keep open what the caller had (a pipe a test waits on to close, a lock such as
# `flock LOCK scripts/with-postgres.sh …` holds).
without_inherited_files() {
    (
        local fd
        for fd in /proc/$BASHPID/fd/*; do
            fd="${fd##*/}"
            [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-"
        done
        "$@"
    )
}

start() {
    resolve_binaries
    mkdir -p "$run_dir"
    if [ "$(id -u)" -eq 0 ]; then
        id postgres >/dev/null 2>&1 || { echo "postgres.sh: no 'postgres' user; run scripts/bootstrap.sh" >&2; exit 1; }
        chown postgres "$run_dir"
        # The server runs as postgres and must be able to reach its directory.
        dir="$run_dir"
        while [ "$dir" != "/" ]; do
            dir="$(dirname "$dir")"
            chmod o+x "$dir" 2>/dev/null || true
        done
    fi
    if is_running; then
        url
        return
    fi
    if [ ! -f "$data_dir/PG_VERSION" ]; then
        rm -rf "$data_dir"
        as_owner "$initdb" -D "$data_dir" -U "$user" --auth=trust --encoding=UTF8 --no-locale >"$run_dir/initdb.log" 2>&1 \
            || { cat "$run_dir/initdb.log" >&2; exit 1; }
    fi
    local port attempt
    for attempt in 1 2 3 4 5; do
        port="$(free_port)"
        if without_inherited_files as_owner "$pg_ctl" -D "$data_dir" -l "$log_file" -w -t 60 start -o \
            "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories='$run_dir' -c max_connections=300 -c shared_buffers=256MB" \
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
