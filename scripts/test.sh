#!/usr/bin/env bash
# `make test`: every test of every package (`swift test`, extra arguments passed on) with a throwaway
# PostgreSQL (scripts/with-postgres.sh). The whole output is kept in .run/test-output.txt; when the run
# fails, a recap at the end repeats the failed tests and, if the test process crashed, the crashed thread's
# first frames, so that the last lines of a long log (all a CI summary may show) say what went wrong.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
mkdir -p .run
log=.run/test-output.txt

# A crash report without registers and the list of loaded images: the frames are what matters.
export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=yes,interactive=no,color=no,threads=crashed,registers=none,images=none}"

scripts/with-postgres.sh "${SWIFT:-swift}" test "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
    {
        echo
        echo "==== make test failed (exit $status); recap of $log ===="
        grep -E '^✘|: error: ' "$log" | head -40
        # The crash header, then the crashed thread's frames (the top of its stack).
        awk '/Program crashed/ { show = 1; left = 40 } show && left-- > 0 { print }' "$log" | head -60
        echo "==== end of recap ===="
    } >&2
fi
exit "$status"
