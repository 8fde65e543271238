#!/usr/bin/env bash
# What collections cost on this machine, with the release build:
#
#   1. empty collections: RSS, open file descriptors and disk per collection
#      ($EMPTY of them, created over HTTP), measured while they are created
#      and again after a restart restored them; then the time to delete them;
#   2. restore: $COLLS collections of $DOCS generated documents each
#      (examples/loadgen --collection), the RSS per document they hold, then
#      the time until /readyz after a graceful restart (from snapshots) and
#      after kill -9 (from the write-ahead logs), as documents per second.
#
#   scripts/collections-bench.sh                  # 500 empty; 10 x 100,000
#   EMPTY=100 COLLS=4 DOCS=20000 scripts/collections-bench.sh
#
# Server and load generator share the machine: read rates as lower bounds.
# Output: a summary on stdout; server logs in $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${PORT:-18090}"
EMPTY="${EMPTY:-500}"
COLLS="${COLLS:-10}"
DOCS="${DOCS:-100000}"
OUT="${OUT:-target/collections-bench}"
BASE="http://127.0.0.1:$PORT"

mkdir -p "$OUT"
echo "building release ..."
cargo build --release --quiet --bin neardup --example loadgen

data_dir="$(mktemp -d "${TMPDIR:-/tmp}/neardup-collections.XXXXXX")"
PID=
cleanup() {
  [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null || true
  rm -rf "$data_dir"
}
trap cleanup EXIT

# Start the server; sets PID and STARTED (epoch seconds, fractional).
start() {
  STARTED=$(date +%s.%N)
  NEARDUP_SERVER__BIND="127.0.0.1:$PORT" NEARDUP_LOG__FORMAT=json \
    NEARDUP_STORAGE__DATA_DIR="$data_dir" NEARDUP_STORAGE__SNAPSHOT_INTERVAL_SECS=0 \
    NEARDUP_LIMITS__MAX_COLLECTIONS=$((EMPTY + COLLS + 1)) \
    target/release/neardup >>"$OUT/server.log" 2>&1 &
  PID=$!
  until curl -fsS -o /dev/null "$BASE/readyz" 2>/dev/null; do
    kill -0 "$PID" 2>/dev/null || { echo "server exited; see $OUT/server.log" >&2; exit 1; }
    sleep 0.02
  done
  READY=$(date +%s.%N)
}
stop_gracefully() { kill -TERM "$PID"; wait "$PID" || true; PID=; }
kill9() { kill -9 "$PID"; wait "$PID" 2>/dev/null || true; PID=; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
fds() { ls "/proc/$PID/fd" | wc -l; }
put() { curl -fsS -o /dev/null -X PUT -H 'content-type: application/json' -d "${2:-{\}}" "$BASE/collections/$1"; }
calc() { python3 -c "print($1)"; }

: >"$OUT/server.log"

# -- 1. empty collections ---------------------------------------------------
start
sleep 1
rss0=$(rss_kb); fds0=$(fds)
t0=$(date +%s.%N)
for i in $(seq 1 "$EMPTY"); do put "e$i"; done
t1=$(date +%s.%N)
sleep 1
rss1=$(rss_kb); fds1=$(fds)
disk=$(du -sb "$data_dir/collections" | cut -f1)
stop_gracefully
start
sleep 1
rss_restored=$(rss_kb)
# A fresh server without them, for the restored figure's baseline.
stop_gracefully
mv "$data_dir" "$data_dir.full"
mkdir "$data_dir"
start
sleep 1
rss_fresh=$(rss_kb)
stop_gracefully
rm -rf "$data_dir"
mv "$data_dir.full" "$data_dir"
start
t2=$(date +%s.%N)
for i in $(seq 1 "$EMPTY"); do curl -fsS -o /dev/null -X DELETE "$BASE/collections/e$i"; done
t3=$(date +%s.%N)
left=$(find "$data_dir/collections" -mindepth 1 -maxdepth 1 | wc -l)
echo "== $EMPTY empty collections"
echo "create: $(calc "round(($t1 - $t0) * 1000 / $EMPTY, 2)") ms each (fsyncs included)"
echo "RSS: $(calc "round(($rss1 - $rss0) * 1024 / $EMPTY)") B each while created; $(calc "round(($rss_restored - $rss_fresh) * 1024 / $EMPTY)") B each after a restart (fresh server $rss_fresh kB)"
echo "file descriptors: $(calc "round(($fds1 - $fds0) / $EMPTY, 2)") each"
echo "disk: $(calc "round($disk / $EMPTY)") B each"
echo "delete: $(calc "round(($t3 - $t2) * 1000 / $EMPTY, 2)") ms each; directories left: $left"

# -- 2. restore ---------------------------------------------------------------
rss_before=$(rss_kb)
for c in $(seq 1 "$COLLS"); do
  put "c$c"
  target/release/examples/loadgen --url "$BASE" --collection "c$c" --phase ingest \
    --docs "$DOCS" --seed "$c" >"$OUT/loadgen-c$c.json"
done
sleep 2
rss_after=$(rss_kb)
total=$((COLLS * DOCS))
echo "== $COLLS collections of $DOCS documents"
echo "RSS: $(calc "round(($rss_after - $rss_before) * 1024 / $total)") B per document"
stop_gracefully
start
snap_s=$(calc "round($READY - $STARTED, 2)")
echo "restart from snapshots: ready in $snap_s s, $(calc "round($total / ($READY - $STARTED))") documents/s"
curl -fsS "$BASE/collections/c1/stats" | python3 -c 'import json,sys; r=json.load(sys.stdin)["storage"]["recovery"]; print("  c1:", r)'
# Writes after the snapshots, then kill -9: the next start replays the logs.
for c in $(seq 1 "$COLLS"); do
  target/release/examples/loadgen --url "$BASE" --collection "c$c" --phase ingest \
    --docs "$DOCS" --seed "$((c + 100))" >"$OUT/loadgen-replay-c$c.json"
done
kill9
start
echo "restart after kill -9 ($total documents in snapshots, $total in the logs): ready in $(calc "round($READY - $STARTED, 2)") s, $(calc "round(2 * $total / ($READY - $STARTED))") documents/s"
curl -fsS "$BASE/collections/c1/stats" | python3 -c 'import json,sys; r=json.load(sys.stdin)["storage"]["recovery"]; print("  c1:", r)'
stop_gracefully
