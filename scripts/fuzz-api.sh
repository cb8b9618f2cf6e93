#!/usr/bin/env bash
# Fuzzes the HTTP API against its own OpenAPI document: schemathesis (PyPI) reads GET /openapi.json from a
# sync-server on a database of its own and sends it requests the document allows and requests it forbids,
# seeded, with every check on (`--checks all`: no 5xx, answers and headers as documented, requests the schemas
# allow accepted and those they forbid refused, 405 with Allow, 401 without a token, …). Schemathesis's phases
# run in turn: the coverage phase (each parameter's boundaries and types), then fuzzing. Run by `make test`
# through Tests/EndToEndTests/FuzzAPITests.swift.
#
# What a schema cannot say is in scripts/fuzz/: hooks.py (cursors the server issued, a checksum range within
# the head, and a check that each pushed event that breaks the envelope's rules is rejected in its result)
# and schemathesis.toml (how much of the live stream to read, the longest long-poll, 413 as a refusal). The
# server runs with the defaults the document states, but for SYNC_BLOB_QUOTA_BYTES: the fuzzer's upload
# sessions would otherwise fill a scope's quota, a refusal that depends on what came before. Its token
# names the scopes `0` (the name the coverage phase draws first for a scope) and `team-1`;
# scripts/fuzz/traffic.py pushes 50 events into each first, opens an upload session and commits a blob (whose
# ids and hash the fuzzer uses in half its cases of the blob routes), then pushes an event into each scope
# every half second while the fuzzer runs (so that a long-poll or a quiet live stream ends soon, as other
# devices' writes would end it).
#
# Environment:
#   FUZZ_SEED      the seed (default 1): the same seed generates the same requests
#   FUZZ_EXAMPLES  test cases per operation in the fuzzing phase (default 30)
#   FUZZ_BIN       folder with a built sync-server (default: `swift build --product sync-server` here)
#   FUZZ_OUT       where the report and the server's log go (default .run/fuzz)
#   FUZZ_ARGS      more options for `schemathesis run`, e.g. `--include-path /v1/pull` (words, split on spaces)
# PostgreSQL: scripts/with-postgres.sh's: SYNC_DATABASE_URL's server when it is set (as under make test), else
# a throwaway cluster of its own in FUZZ_OUT/postgres (SYNC_POSTGRES_DIR), started and stopped around the run.
# The fuzzer's database is created on it and dropped afterwards.
# Exit status: 0 when schemathesis found nothing; 1 when it did (its report says what, with a curl command
# per failure; the run is reproduced by running this script again with the same FUZZ_SEED and FUZZ_EXAMPLES);
# 2 when schemathesis is not installed (scripts/bootstrap.sh installs it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

seed="${FUZZ_SEED:-1}"
examples="${FUZZ_EXAMPLES:-30}"
out="${FUZZ_OUT:-$root/.run/fuzz}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
scopes="0,team-1"
seeded=50
mkdir -p "$out"

if ! python3 -c 'import schemathesis' 2>/dev/null; then
    echo "fuzz-api: schemathesis is not installed; scripts/bootstrap.sh installs it (python3 -m pip install schemathesis)" >&2
    exit 2
fi

if [ -n "${FUZZ_BIN:-}" ]; then
    bin="$FUZZ_BIN"
else
    echo "fuzz-api: building sync-server…" >&2
    # shellcheck disable=SC2086 # the flags are words
    swift build --product sync-server ${SYNC_BUILD_FLAGS--debug-info-format none} >/dev/null
    bin="$(swift build --show-bin-path)"
fi

# scripts/fuzz/schemathesis.toml, then values of this run that the fuzzer could not guess, each used in half the
# test cases of the parameters named (the other half are generated): the token's scopes, an upload session
# left open and one committed, and the committed blob's hash.
write_config() {
    local open committed hash
    read -r open committed hash <<<"$1"
    cat "$root/scripts/fuzz/schemathesis.toml"
    cat <<EOF

[dictionaries.scopes]
values = ["${scopes//,/\", \"}"]

[dictionaries.uploads]
values = ["$open", "$committed"]

[dictionaries.blobs]
values = ["$hash"]

[parameters]
"query.scope" = { dictionary = "scopes", probability = 0.5 }
"body.events[*].scope" = { dictionary = "scopes", probability = 0.5 }

[[operations]]
include-name = ["GET /v1/uploads/{id}", "POST /v1/uploads/{id}/commit"]
parameters = { "path.id" = { dictionary = "uploads", probability = 0.5 } }

[[operations]]
include-name = ["GET /v1/blobs/{hash}", "HEAD /v1/blobs/{hash}"]
parameters = { "path.hash" = { dictionary = "blobs", probability = 0.5 } }
EOF
}

# What the run started, stopped when the shell exits, however it ends (global: the EXIT trap runs after the
# function has returned).
server_pid="" traffic_pid="" admin="" database=""
cleanup() {
    [ -n "$traffic_pid" ] && kill "$traffic_pid" 2>/dev/null
    if [ -n "$server_pid" ]; then
        # SIGTERM, its graceful shutdown; SIGKILL if it is still there 10 s later.
        kill "$server_pid" 2>/dev/null
        for _ in $(seq 1 100); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$server_pid" 2>/dev/null
        wait "$server_pid" 2>/dev/null
    fi
    [ -n "$database" ] && psql "$admin" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1
    return 0
}

fuzz() {
    local port secret token status=0
    admin="${SYNC_DATABASE_URL%/*}/postgres"
    database="fuzz_$$_$RANDOM"
    trap cleanup EXIT
    psql "$admin" -qc "CREATE DATABASE $database" >/dev/null || return 1
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
    secret="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    SYNC_DATABASE_URL="${SYNC_DATABASE_URL%/*}/$database" SYNC_JWT_SECRET="$secret" SYNC_LOG_LEVEL=warning \
        SYNC_BLOB_QUOTA_BYTES=$((1 << 50)) "$bin/sync-server" --port "$port" >"$out/server.log" 2>&1 &
    server_pid=$!
    local base="http://127.0.0.1:$port"
    for _ in $(seq 1 300); do
        curl -sf "$base/readyz" >/dev/null 2>&1 && break
        kill -0 "$server_pid" 2>/dev/null || { echo "fuzz-api: sync-server exited" >&2; tail -20 "$out/server.log" >&2; return 1; }
        sleep 0.1
    done
    curl -sf "$base/readyz" >/dev/null || { echo "fuzz-api: sync-server is not ready" >&2; return 1; }
    token="$(SYNC_JWT_SECRET="$secret" "$bin/sync-server" token --sub fuzzer --scopes "$scopes" --ttl 3600)" || return 1
    python3 scripts/fuzz/traffic.py seed "$base" "$token" "$scopes" "$seeded" || return 1
    local sessions
    sessions="$(python3 scripts/fuzz/traffic.py blobs "$base" "$token" "$scopes")" || return 1
    # Its output to a file: nothing started here may hold the caller's pipes open after the run.
    python3 scripts/fuzz/traffic.py tick "$base" "$token" "$scopes" 0.5 "$seeded" >"$out/traffic.log" 2>&1 &
    traffic_pid=$!
    write_config "$sessions" >"$out/schemathesis.toml"

    local command=(
        schemathesis --config-file "$out/schemathesis.toml" run "$base/openapi.json"
        --checks all --seed "$seed" --max-examples "$examples" --no-color
        --report junit --report-junit-path "$out/junit.xml"
    )
    # shellcheck disable=SC2206 # FUZZ_ARGS is words
    command+=(${FUZZ_ARGS:-})
    echo "fuzz-api: ${command[*]} -H 'Authorization: Bearer …'" >&2
    local started=$SECONDS
    # From the output folder: nothing schemathesis writes lands in the repository.
    (cd "$out" && FUZZ_SCOPES="$scopes" FUZZ_SEEDED_EVENTS="$seeded" SCHEMATHESIS_HOOKS="$root/scripts/fuzz/hooks.py" \
        "${command[@]}" -H "Authorization: Bearer $token") || status=$?
    echo "fuzz-api: schemathesis took $((SECONDS - started)) s (exit $status)" >&2
    if [ "$status" -ne 0 ]; then
        echo "fuzz-api: FAILED. Reproduce: FUZZ_SEED=$seed FUZZ_EXAMPLES=$examples${FUZZ_ARGS:+ FUZZ_ARGS=\"$FUZZ_ARGS\"} scripts/fuzz-api.sh" >&2
        echo "  (the curl commands above name this run's server, which is gone; the server's log is $out/server.log)" >&2
        return 1
    fi
}

export -f fuzz write_config cleanup
export root bin out seed examples scopes seeded FUZZ_ARGS server_pid traffic_pid admin database
export SYNC_POSTGRES_DIR="${SYNC_POSTGRES_DIR:-$out/postgres}" SYNC_POSTGRES_DURABLE="${SYNC_POSTGRES_DURABLE-no}"
scripts/with-postgres.sh bash -c fuzz
