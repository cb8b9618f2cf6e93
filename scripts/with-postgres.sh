#!/usr/bin/env bash
# Runs a command with a PostgreSQL server available in SYNC_DATABASE_URL: the user's own when the variable
# is already set, otherwise a throwaway cluster (scripts/postgres.sh) started before and stopped after,
# whatever way the command ends.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

if [ -z "${SYNC_DATABASE_URL:-}" ]; then
    # Stopped as the cluster this script started: with SYNC_DATABASE_URL set, postgres.sh takes it for the
    # user's own server and leaves it running.
    trap 'SYNC_DATABASE_URL= "$root/scripts/postgres.sh" stop' EXIT INT TERM
    SYNC_DATABASE_URL="$("$root/scripts/postgres.sh" start)"
    export SYNC_DATABASE_URL
fi
echo "PostgreSQL: $SYNC_DATABASE_URL" >&2
"$@"
