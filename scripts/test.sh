#!/usr/bin/env bash
# `make test`: every test of every package (`swift test`, extra arguments passed on) with a throwaway
# PostgreSQL (scripts/with-postgres.sh). Without arguments it runs in four steps on one build: every test
# but ConsumerPackageTests, then the store, projection and engine suites with every database encrypted at rest,
# then the tests on a Citus cluster (scripts/citus-test.sh: when Citus is installed or
# CITUS_SOURCE names its source; it says so when it skips them), then ConsumerPackageTests alone (an app
# outside the repository builds against it by URL: a build of its own, in this repository's .build so that it
# compiles the dependencies both share only once; it runs last because it replaces the stack's compiled
# modules there with those of its checkout); any failing fails the run. The whole output is kept in .run/test-output.txt; when the run fails, a recap at the end repeats
# the failed tests and, if the test process crashed, the crashed thread's first frames, so that the last
# lines of a long log (all a CI summary may show) say what went wrong.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
mkdir -p .run
log=.run/test-output.txt

# A crash report without registers and the list of loaded images: the frames are what matters.
export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=yes,interactive=no,color=no,threads=crashed,registers=none,images=none}"

swift="${SWIFT:-swift}"
# The debug build's flags (the Makefile's SYNC_BUILD_FLAGS: no debug information unless set empty).
export SYNC_BUILD_FLAGS="${SYNC_BUILD_FLAGS--debug-info-format none}"
# The throwaway clusters without fsync (scripts/lib/postgres-common.sh says what that does and does not risk):
# a test never survives an operating-system crash, and a hundred tests' checkpoints queued on the disk stalled
# the suite for seconds at a time.
export SYNC_POSTGRES_DURABLE="${SYNC_POSTGRES_DURABLE-no}"
# At most this many tests at a time (Swift Testing otherwise starts every test at once: six hundred on two
# cores, where a test that waits for something within a bound, a token's expiry or a NOTIFY, saw minutes go
# by). The tests of a slot that waits on a server or a child process leave the cores to the others.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH-24}"
# The main suite's step, when it prints nothing for this long, has hung: it is stopped, so that the recap
# below names the tests still running, instead of a CI job's own time limit killing the whole run without a
# word. Far above the longest quiet stretch of a healthy run (a test that captures a child's output, alone at
# the end: about 2.5 minutes here).
export quiet_limit="${SYNC_TEST_QUIET_LIMIT:-300}"
watched() {
    local fifo fd line rc pid
    fifo=$(mktemp -u)
    mkfifo "$fifo"
    setsid "$@" >"$fifo" 2>&1 &
    pid=$!
    exec {fd}<"$fifo"
    rm -f "$fifo"
    while true; do
        IFS= read -r -t "$quiet_limit" -u "$fd" line
        rc=$?
        if [ "$rc" -eq 0 ]; then
            printf '%s\n' "$line"
            continue
        fi
        [ -n "$line" ] && printf '%s\n' "$line"
        if [ "$rc" -gt 128 ]; then
            echo "==== make test: no output for $quiet_limit s (SYNC_TEST_QUIET_LIMIT): stopping the step as hung: $* ===="
            kill -TERM -- "-$pid" 2>/dev/null
            sleep 10
            kill -KILL -- "-$pid" 2>/dev/null
        fi
        break
    done
    wait "$pid"
    rc=$?
    exec {fd}<&-
    return "$rc"
}
# Runs a step and says how long it took, so that a CI log tells where its time went.
timed() {
    local name="$1" started=$SECONDS rc
    shift
    "$@"
    rc=$?
    echo "==== make test: $name took $((SECONDS - started)) s (exit $rc) ===="
    return "$rc"
}
run_in_two_steps() {
    # shellcheck disable=SC2086 # the flags are words
    timed "the build" "$swift" build --build-tests $SYNC_BUILD_FLAGS || return $?
    local tests
    tests="$("$swift" build --show-bin-path)/offline-syncPackageTests.xctest"
    timed "the main suite" watched "$swift" test --skip-build --skip ConsumerPackageTests
    local rest=$?
    # The store, projection and engine suites again with every database encrypted at rest (as
    # scripts/test-encrypted.sh runs them): both ways, every time.
    local keys
    keys="$(mktemp -d "${TMPDIR:-/tmp}/sync-test-keys.XXXXXX")"
    timed "the store suites encrypted" watched env SYNC_STORAGE_KEY_FILE="$keys/keys" "$swift" test --skip-build \
        --filter 'SyncStorageTests|SyncEventStoreTests|NotesDomainTests|SyncEngineTests'
    local encrypted=$?
    if [ "$encrypted" -eq 0 ] && [ ! -s "$keys/keys" ]; then
        echo "make test: no database was opened encrypted (no key file at $keys/keys)"
        encrypted=1
    fi
    rm -rf "$keys"
    # Not watched: a machine without Citus builds it first (scripts/citus.sh install), minutes of a quiet
    # build log.
    timed "the Citus suite" env SWIFT="$swift" scripts/citus-test.sh
    local citus=$?
    # The test binary run as `swift test` runs it on Linux, without SwiftPM: `swift test` would hold .build,
    # where the app builds. Where the tests are a bundle rather than an executable (macOS), through `swift
    # test`, the app then building in a scratch of its own.
    if [ -f "$tests" ] && [ -x "$tests" ]; then
        timed "the consumer app" env SYNC_CONSUMER_SCRATCH="$root/.build" \
            "$tests" --testing-library swift-testing --filter ConsumerPackageTests
    else
        timed "the consumer app" "$swift" test --skip-build --filter ConsumerPackageTests
    fi
    local consumer=$?
    [ "$consumer" -eq 0 ] && [ "$rest" -eq 0 ] && [ "$encrypted" -eq 0 ] && [ "$citus" -eq 0 ]
}
if [ "$#" -eq 0 ]; then
    export swift root
    export -f run_in_two_steps watched timed
    scripts/with-postgres.sh bash -c run_in_two_steps 2>&1 | tee "$log"
else
    scripts/with-postgres.sh "$swift" test "$@" 2>&1 | tee "$log"
fi
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
    {
        echo
        echo "==== make test failed (exit $status); recap of $log ===="
        grep -E '^✘|: error: ' "$log" | head -40
        # The crash header, then the crashed thread's frames (the top of its stack).
        awk '/Program crashed/ { show = 1; left = 24 } show && left-- > 0 { print }' "$log" | head -30
        # The tests that had started and not ended when the process stopped: the crash is in one of them.
        running=$(awk '
            /^◇ Test .* started\.$/ && !/^◇ Test (run|case passing) / {
                name = $0; sub(/^◇ Test /, "", name); sub(/ started\.$/, "", name); running[name] = 1
            }
            /^(✔|✘|➜) Test .* (passed|failed|skipped)/ {
                name = $0; sub(/^(✔|✘|➜) Test /, "", name)
                sub(/ (with [0-9]+ test cases? )?(passed|failed|skipped).*$/, "", name); delete running[name]
            }
            END { for (name in running) print "  " name }' "$log")
        if [ -n "$running" ]; then
            echo "Tests started and not ended when the run stopped:"
            echo "$running" | head -20
        fi
        echo "==== end of recap ===="
    } >&2
fi
exit "$status"
