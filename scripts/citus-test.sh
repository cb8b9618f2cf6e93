#!/usr/bin/env bash
# The tests on a real Citus cluster (`make citus`, and the last step of `make test`): when Citus is installed or
# CITUS_SOURCE names its source archive, builds it if needed and starts a coordinator with two workers
# (scripts/citus.sh), then runs on it
#   - CitusTests: sync-server with its tables distributed by scope, through sync-agent, sync-bench and
#     sync-load, a worker restarted under load;
#   - every suite of the server and of the Notes domain's server (SYNC_TEST_ON_CITUS: each test server on a
#     database of the cluster, distributed at start-up).
# Otherwise it says that it skipped them and exits 0. Runs on the build that is there (`swift build
# --build-tests` first); stops the cluster afterwards.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
swift="${SWIFT:-swift}"

if ! scripts/citus.sh available; then
    echo "==== Citus: SKIPPED: Citus is not installed and CITUS_SOURCE names no source archive;"
    echo "     set CITUS_SOURCE=path/to/citus-13.2.x.tar.gz (released by citusdata/citus) to run the tests on a Citus cluster ===="
    exit 0
fi
scripts/citus.sh install
case $? in
    0) ;;
    3)
        echo "==== Citus: SKIPPED: the packages its build needs cannot be installed on this machine (see above) ===="
        exit 0
        ;;
    *)
        echo "==== Citus: the build from ${CITUS_SOURCE:-} failed (logs in .run/citus-build/) ====" >&2
        exit 1
        ;;
esac
trap 'scripts/citus.sh stop' EXIT INT TERM
SYNC_CITUS_URL="$(scripts/citus.sh start)" || { echo "==== Citus: the cluster did not start ====" >&2; exit 1; }
export SYNC_CITUS_URL
echo "Citus coordinator: $SYNC_CITUS_URL" >&2

# CitusTests' stacks make their own databases on the cluster; the plain PostgreSQL is there for what else
# the end-to-end target's set-up asks.
scripts/with-postgres.sh "$swift" test --skip-build --filter 'EndToEndTests.CitusTests'
end_to_end=$?
SYNC_TEST_ON_CITUS=1 SYNC_DATABASE_URL="$SYNC_CITUS_URL" \
    "$swift" test --skip-build --filter '^(SyncServerTests|NotesServerTests)\.'
suites=$?
[ "$end_to_end" -eq 0 ] && [ "$suites" -eq 0 ]
