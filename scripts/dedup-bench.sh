#!/usr/bin/env bash
# Time and peak memory of deduplicating a large corpus, offline and online:
#
#   scripts/dedup-bench.sh              # 1,000,000 documents
#   N=100000 scripts/dedup-bench.sh
#
# 1. generates a deterministic corpus with planted near-duplicate families
#    (scripts/dedup_corpus.py; cached in $OUT),
# 2. `neardup dedup FILE` under /usr/bin/time -v: wall time, peak RSS,
# 3. a release server on 127.0.0.1:$PORT (throwaway data dir, fsync=never
#    for a quick load): ingests the file (examples/loadgen --corpus), then `GET /duplicates` streamed
#    as NDJSON and a first JSON page, each timed, with the server's peak RSS
#    during the scan (VmHWM, reset through /proc/PID/clear_refs first).
# Figures are printed as they come and summarized at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

N="${N:-1000000}"
PORT="${PORT:-18391}"
OUT="${OUT:-target/dedup-bench}"
mkdir -p "$OUT"
corpus="$OUT/corpus-$N.jsonl"

echo "== building release"
cargo build --release --quiet --bin neardup --example loadgen
if [ ! -s "$corpus" ]; then
    echo "== generating $corpus"
    python3 scripts/dedup_corpus.py "$N" "$corpus.tmp" && mv "$corpus.tmp" "$corpus"
fi
echo "corpus: $(wc -l <"$corpus") lines, $(du -h "$corpus" | cut -f1)"

echo "== neardup dedup (offline)"
/usr/bin/time -v target/release/neardup dedup "$corpus" >"$OUT/groups-cli.jsonl" 2>"$OUT/cli.err"
grep -E "^neardup dedup:" "$OUT/cli.err" | tail -1
cli_wall=$(grep "Elapsed (wall clock)" "$OUT/cli.err" | awk '{print $NF}')
cli_rss_kb=$(grep "Maximum resident set size" "$OUT/cli.err" | awk '{print $NF}')
cli_cpu=$(grep "Percent of CPU" "$OUT/cli.err" | awk '{print $NF}')
echo "wall $cli_wall, peak RSS $((cli_rss_kb / 1024)) MiB, CPU $cli_cpu"

echo "== server"
data_dir="$(mktemp -d "${TMPDIR:-/tmp}/neardup-dedup-bench.XXXXXX")"
NEARDUP_SERVER__BIND="127.0.0.1:$PORT" NEARDUP_LOG__FORMAT=json \
NEARDUP_STORAGE__DATA_DIR="$data_dir" NEARDUP_STORAGE__WAL_FSYNC=never \
NEARDUP_STORAGE__SNAPSHOT_INTERVAL_SECS=0 \
    target/release/neardup >"$OUT/server.log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data_dir"; }
trap cleanup EXIT
B="http://127.0.0.1:$PORT"
until curl -fsS "$B/readyz" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { echo "the server exited; see $OUT/server.log" >&2; exit 1; }
    sleep 0.2
done
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$pid/status"; }
rss0=$(rss)
target/release/examples/loadgen --url "$B" --corpus "$corpus" --phase ingest --batch 1000 --concurrency 4 | tee "$OUT/ingest.log"
rss1=$(rss)
docs=$(curl -fsS "$B/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["documents"])')
echo "indexed $docs documents; RSS $((rss1 / 1024)) MiB ($(( (rss1 - rss0) * 1024 / docs )) bytes/doc growth)"

echo 5 >"/proc/$pid/clear_refs"  # reset VmHWM to the current RSS
start=$(date +%s.%N)
curl -fsS -H 'accept: application/x-ndjson' "$B/duplicates" >"$OUT/groups-api.jsonl"
end=$(date +%s.%N)
api_secs=$(echo "$end - $start" | bc)
api_hwm=$(hwm)
echo "GET /duplicates (NDJSON): $(wc -l <"$OUT/groups-api.jsonl") groups in ${api_secs}s; server peak RSS $((api_hwm / 1024)) MiB (+$(( (api_hwm - rss1) / 1024 )) MiB over the index)"
if cmp -s "$OUT/groups-api.jsonl" "$OUT/groups-cli.jsonl"; then
    echo "the server's groups equal the offline command's, byte for byte"
else
    echo "NOTE: server and offline groups differ (see $OUT/groups-*.jsonl)"
fi
start=$(date +%s.%N)
curl -fsS -H "accept: application/x-ndjson" "$B/duplicates/pairs" >"$OUT/pairs-api.jsonl"
end=$(date +%s.%N)
echo "GET /duplicates/pairs: $(wc -l <"$OUT/pairs-api.jsonl") pairs in $(echo "$end - $start" | bc)s"
# A first JSON page after a write (so the cache cannot answer it).
curl -fsS -XPOST "$B/documents" -H 'content-type: application/json' -d '{"text":"one more document to invalidate the cache"}' >/dev/null
start=$(date +%s.%N)
curl -fsS "$B/duplicates?limit=100" >"$OUT/page1.json"
end=$(date +%s.%N)
echo "GET /duplicates?limit=100 (fresh computation): $(echo "$end - $start" | bc)s"
cursor=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["next_cursor"])' "$OUT/page1.json")
start=$(date +%s.%N)
curl -fsS "$B/duplicates?limit=100&cursor=$cursor" >/dev/null
end=$(date +%s.%N)
echo "next page (cached): $(echo "$end - $start" | bc)s"
