#!/usr/bin/env bash
# Scale-out in one run: events/s accepted through nginx (deploy/nginx/sync.conf) from `sync-bench push`
# (100,000 events, batches of 500, 8 in flight, 16 scopes) with one sync-server behind it and with two on the
# same PostgreSQL, alternating 1, 2, 1, 2, 1, 2, each on a fresh database. Prints one line per run.
# Needs release builds of sync-server and sync-bench (`swift build -c release --product …`).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export SYNC_POSTGRES_DIR="$root/.run/scaleout/postgres"
run="$root/.run/scaleout"; mkdir -p $run/nginx
url="$(env -u SYNC_DATABASE_URL scripts/postgres.sh start)"
admin="${url%/*}/postgres"
bin=.build/release
SYNC_JWT_SECRET="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export SYNC_JWT_SECRET
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
p1=$(free_port); p2=$(free_port); lb=$(free_port)
token=$($bin/sync-server token --sub bench --scopes "$(seq -s, -f 'bench-%g' 0 15)" --ttl 86400)
for round in 1 2 3; do
  for n in 1 2; do
    db="scaleout_${round}_$n"
    psql "$admin" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null; psql "$admin" -qc "CREATE DATABASE $db" >/dev/null
    dburl="${url%/*}/$db"
    SYNC_DATABASE_URL=$dburl SYNC_COMPACTION_INTERVAL_SECONDS=0 SYNC_LOG_LEVEL=warning $bin/sync-server --port $p1 > $run/s1.log 2>&1 & s1=$!
    servers="server 127.0.0.1:$p1;"
    s2=""
    if [ $n = 2 ]; then
      sleep 1
      SYNC_DATABASE_URL=$dburl SYNC_COMPACTION_INTERVAL_SECONDS=0 SYNC_LOG_LEVEL=warning $bin/sync-server --port $p2 > $run/s2.log 2>&1 & s2=$!
      servers="server 127.0.0.1:$p1; server 127.0.0.1:$p2;"
    fi
    for i in $(seq 1 100); do curl -sf http://127.0.0.1:$p1/readyz >/dev/null && { [ $n = 1 ] || curl -sf http://127.0.0.1:$p2/readyz >/dev/null; } && break; sleep 0.1; done
    sed -e "s|@RUN@|$run/nginx|g" -e "s|@PORT@|$lb|g" -e "s|@SERVERS@|$servers|" deploy/nginx/sync.conf > $run/nginx/nginx.conf
    /usr/sbin/nginx -p $run/nginx -c $run/nginx/nginx.conf -e $run/nginx/error.log & ng=$!
    sleep 0.5
    out=$($bin/sync-bench push --server http://127.0.0.1:$lb --token "$token" --events 100000 --batch 500 --concurrency 8 --json 2>/dev/null | tail -1)
    echo "servers=$n round=$round $out" | python3 -c "import sys,json; l=sys.stdin.read(); h,j=l.split(' {',1); d=json.loads('{'+j); print(h, 'ev/s', round(d.get('eventsPerSecond',0)), 'p50', d.get('latencyP50Milliseconds', d.get('p50Milliseconds')), 'p99', d.get('latencyP99Milliseconds', d.get('p99Milliseconds')))" || echo "servers=$n round=$round $out"
    kill $ng; kill -TERM $s1 ${s2:-} 2>/dev/null; wait $ng $s1 ${s2:-} 2>/dev/null || true
  done
done
env -u SYNC_DATABASE_URL scripts/postgres.sh stop
