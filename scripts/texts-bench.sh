#!/usr/bin/env bash
# Stored texts (store_text) on this machine: RSS per document with texts off
# and on, disk bytes per document (log, text tail, snapshot and its text
# segment), and the reindex rate.
#
#   scripts/texts-bench.sh                 # 20,000 documents
#   DOCS=100000 scripts/texts-bench.sh
#
# Builds release, then for store_text = false and true starts
# target/release/neardup on 127.0.0.1:$PORT with a throwaway data directory,
# ingests $DOCS generated documents (~130 words, examples/loadgen) into the
# default collection, reads RSS growth and /stats, snapshots, stops. Then,
# texts on, ingests into a collection "r" with "store_text": true and
# reindexes it to word 2-shingles, timing it from the progress in its stats.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${PORT:-18081}"
DOCS="${DOCS:-20000}"
OUT="${OUT:-target/texts-bench}"
mkdir -p "$OUT"
echo "building release ..."
cargo build --release --quiet --bin neardup --example loadgen
B="http://127.0.0.1:$PORT"

start() { # $1: store_text; $2: the data directory (default: a new one)
    data_dir="${2:-$(mktemp -d "${TMPDIR:-/tmp}/neardup-texts.XXXXXX")}"
    NEARDUP_SERVER__BIND="127.0.0.1:$PORT" NEARDUP_LOG__FORMAT=json \
    NEARDUP_STORAGE__DATA_DIR="$data_dir" NEARDUP_STORAGE__STORE_TEXT="$1" \
    NEARDUP_STORAGE__SNAPSHOT_INTERVAL_SECS=0 \
        target/release/neardup >"$OUT/server-$1.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do
        curl -fsS "$B/readyz" >/dev/null 2>&1 && return
        sleep 0.1
    done
    echo "the server did not start; see $OUT/server-$1.log" >&2
    exit 1
}
stop() { # $1: keep the data directory
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
    [ -n "${1:-}" ] || rm -rf "$data_dir"
}
trap 'kill -TERM "$pid" 2>/dev/null || true' EXIT
rss_kb() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$pid/status"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
loadgen() { target/release/examples/loadgen --url "$B" --docs "$DOCS" --phase ingest "$@" >/dev/null; }

for texts in false true; do
    start "$texts"
    rss0=$(rss_kb)
    loadgen
    rss1=$(rss_kb)
    stats=$(curl -fsS "$B/stats")
    wal=$(echo "$stats" | json 'd["storage"]["wal_bytes"]')
    tail=$(echo "$stats" | json 'd["storage"]["text_bytes"]')
    mem=$(echo "$stats" | json 'd["memory"]["bytes_per_document"]')
    curl -fsS -XPOST "$B/admin/snapshot" >/dev/null
    snap=$(curl -fsS "$B/stats" | json 'd["storage"]["last_snapshot"]["bytes"]')
    segment=$(curl -fsS "$B/stats" | json 'd["storage"]["last_snapshot"]["text_bytes"]')
    # RSS of the same index restored from its snapshot (no ingest buffers'
    # allocator slack), above the fresh process's.
    stop keep
    start "$texts" "$data_dir"
    rss2=$(rss_kb)
    echo "store_text=$texts: RSS growth $(( (rss1 - rss0) * 1024 / DOCS )) B/doc after ingest (${rss0} → ${rss1} kB)," \
         "$(( (rss2 - rss0) * 1024 / DOCS )) B/doc after a restart (${rss2} kB);" \
         "/stats bytes_per_document $mem; log $(( wal / DOCS )) B/doc, text tail $(( tail / DOCS )) B/doc;" \
         "snapshot $(( snap / DOCS )) B/doc + text segment $(( segment / DOCS )) B/doc" | tee -a "$OUT/summary.txt"
    if [ "$texts" = true ]; then
        curl -fsS -XPUT "$B/collections/r" -H 'content-type: application/json' -d '{"store_text":true}' >/dev/null
        loadgen --collection r
        curl -fsS -XPOST "$B/collections/r/reindex" -H 'content-type: application/json' \
            -d '{"shingle":{"k":2}}' >/dev/null
        t0=$(date +%s.%N)
        while [ "$(curl -fsS "$B/collections/r/stats" | json 'd["reindex"]["state"]')" = running ]; do
            sleep 0.05
        done
        t1=$(date +%s.%N)
        r=$(curl -fsS "$B/collections/r/stats")
        echo "reindex of $DOCS documents to word 2-shingles: $(echo "$r" | json 'd["reindex"]["state"]')," \
             "$(awk -v a="$t0" -v b="$t1" -v n="$DOCS" 'BEGIN { printf "%.2f s, %.0f docs/s", b - a, n / (b - a) }')" \
             "(polled every 50 ms; the switch's snapshot included)" | tee -a "$OUT/summary.txt"
    fi
    stop
done
