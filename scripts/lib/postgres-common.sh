# Helpers shared by scripts/postgres.sh and scripts/citus.sh (sourced, not run).

# The path of a PostgreSQL program: the newest installed server's, else the one on PATH.
find_bin() {
    local name="$1" candidate
    for candidate in /usr/lib/postgresql/*/bin/"$name"; do
        [ -x "$candidate" ] && { echo "$candidate"; return 0; }
    done
    command -v "$name" 2>/dev/null && return 0
    return 1
}

# Runs a command as the owner of the clusters: `postgres` when invoked as root, the current user otherwise.
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

# Runs a command with only standard input, output and error open: the server it starts outlives the script,
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

# Lets the `postgres` user reach `$1` (a cluster's folder) when invoked as root: it owns the folder, and every
# folder above it can be traversed.
open_to_owner() {
    [ "$(id -u)" -eq 0 ] || return 0
    id postgres >/dev/null 2>&1 || { echo "$(basename "$0"): no 'postgres' user; run scripts/bootstrap.sh" >&2; exit 1; }
    chown postgres "$1"
    local dir="$1"
    while [ "$dir" != "/" ]; do
        dir="$(dirname "$dir")"
        chmod o+x "$dir" 2>/dev/null || true
    done
}

# The server options of SYNC_POSTGRES_DURABLE: `no` (what `make test` sets) turns off what protects committed
# data from an operating-system crash or a power cut, and only that: `fsync` and `full_page_writes`. A killed
# PostgreSQL, the only crash a test makes, still loses nothing committed: its writes are in the kernel's
# cache. The test suite creates and drops a database per test, and PostgreSQL 15 answers every DROP DATABASE
# with an immediate checkpoint: with fsync on, those flushes queued behind one another took the disk for up to
# 24 s at a time while a hundred tests ran (commits waiting, connections not made, requests answered 503).
# Benchmarks, `make run` and `make load` keep the default (`yes`): their numbers are of a durable database.
durability_options() {
    case "${SYNC_POSTGRES_DURABLE:-yes}" in
        no) echo "-c fsync=off -c full_page_writes=off" ;;
        yes) ;;
        *) echo "SYNC_POSTGRES_DURABLE must be yes or no, not '$SYNC_POSTGRES_DURABLE'" >&2; return 1 ;;
    esac
}
