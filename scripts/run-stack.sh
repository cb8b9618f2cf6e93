#!/usr/bin/env bash
# `make run`: the whole stack on this machine, from local binaries. Stops everything on Ctrl-C.
#
# What runs today: PostgreSQL (throwaway cluster, or SYNC_DATABASE_URL) and a release build of every
# product. The sync server and agents join here as they land; this script says plainly what it started.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

url="$(scripts/postgres.sh start)"
trap 'echo; echo "stopping PostgreSQL"; scripts/postgres.sh stop' EXIT
echo "PostgreSQL is up: $url"
echo "building release products…"
swift build -c release
echo
echo "Running: PostgreSQL only. No sync server exists yet, so nothing else was started."
echo "Press Ctrl-C to stop."
while true; do sleep 3600; done
