#!/usr/bin/env bash
# Measure neardup over HTTP on this machine: ingest docs/s, /similar and
# /healthz throughput and latency percentiles, memory per document (the
# server's own estimate from /stats, and RSS growth from /proc).
#
#   scripts/measure.sh                          # 200,000 documents
#   DOCS=50000 CONCURRENCY=8 scripts/measure.sh
#
# Builds release, starts target/release/neardup ($SERVER_BIN) on 127.0.0.1:$PORT with JSON
# logs in $OUT/server.log and a throwaway data directory (write-ahead log
# fsync mode $WAL_FSYNC, the server's default "always" unless set), runs
# examples/loadgen (ingest, then RSS and disk use are read, then queries),
# stops the server gracefully (it writes a final snapshot), prints a
# summary. The load generator runs on the same
# machine and competes with the server for CPU: on a 2-core machine read
# every figure as a lower bound for the server alone.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${PORT:-18080}"
DOCS="${DOCS:-200000}"
BATCH="${BATCH:-1000}"
CONCURRENCY="${CONCURRENCY:-4}"
QUERIES="${QUERIES:-20000}"
CLIENT_THREADS="${CLIENT_THREADS:-1}"
SEED="${SEED:-1}"
OUT="${OUT:-target/measure}"
WAL_FSYNC="${WAL_FSYNC:-always}"
# The server binary to measure: another build (e.g. the previous release's)
# can be compared with the same load generator.
# SERVER_DIR is its working directory (where it reads config/default.toml),
# e.g. that release's source tree.
SERVER_BIN="$(realpath "${SERVER_BIN:-target/release/neardup}")"
SERVER_DIR="${SERVER_DIR:-.}"

mkdir -p "$OUT"
echo "building release ..."
cargo build --release --quiet --bin neardup --example loadgen

data_dir="$(mktemp -d "${TMPDIR:-/tmp}/neardup-measure.XXXXXX")"
log="$OUT/server.log"
NEARDUP_SERVER__BIND="127.0.0.1:$PORT" \
NEARDUP_LOG__FORMAT=json \
NEARDUP_STORAGE__DATA_DIR="$data_dir" \
NEARDUP_STORAGE__WAL_FSYNC="$WAL_FSYNC" \
    sh -c 'cd "$1" && exec "$2"' sh "$SERVER_DIR" "$SERVER_BIN" >"$log" 2>&1 &
pid=$!
cleanup() {
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$data_dir"
}
trap cleanup EXIT

# Wait until this process (not some other server on the port) is ready.
for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || { echo "neardup exited; see $log" >&2; cat "$log" >&2; exit 1; }
    grep -q '"neardup listening"' "$log" 2>/dev/null &&
        curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done

status_kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/status"; }
# Server CPU time so far, in seconds (utime + stime).
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$pid/stat"; }

loadgen=(target/release/examples/loadgen --url "http://127.0.0.1:$PORT" --docs "$DOCS"
    --batch "$BATCH" --concurrency "$CONCURRENCY" --queries "$QUERIES" --seed "$SEED"
    --client-threads "$CLIENT_THREADS")

rss0=$(status_kb VmRSS)
cpu0=$(cpu_s)
"${loadgen[@]}" --phase ingest | tee "$OUT/ingest.txt"
rss1=$(status_kb VmRSS)
hwm1=$(status_kb VmHWM)
cpu1=$(cpu_s)
disk1=$(du -sk "$data_dir" | cut -f1)
"${loadgen[@]}" --phase query | tee "$OUT/query.txt"
rss2=$(status_kb VmRSS)
cpu2=$(cpu_s)

# Graceful stop: drains, then writes a final snapshot.
t0=$(date +%s.%N)
kill -TERM "$pid"
wait "$pid" || true
stop_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
disk2=$(du -sk "$data_dir" | cut -f1)

per_doc=$(( (rss1 - rss0) * 1024 / DOCS ))
{
    echo
    echo "== neardup measurement: $DOCS documents, batch $BATCH, concurrency $CONCURRENCY," \
         "$QUERIES queries, wal_fsync=$WAL_FSYNC"
    echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo);" \
         "loadgen on the same machine with $CLIENT_THREADS worker thread(s)"
    grep -h '^ingest:' "$OUT/ingest.txt"
    grep -h '^query   \|^query:\|^probe ' "$OUT/query.txt"
    grep -h '^stats:' "$OUT/query.txt"
    echo "server RSS: ${rss0} kB at start, ${rss1} kB after ingest (peak ${hwm1} kB), ${rss2} kB after queries"
    echo "RSS growth per document: ${per_doc} bytes"
    echo "server CPU: ingest ${cpu0}→${cpu1} s, queries ${cpu1}→${cpu2} s"
    echo "data dir: ${disk1} kB after ingest (write-ahead log), ${disk2} kB after the" \
         "graceful stop (final snapshot), which took ${stop_s} s"
} | tee "$OUT/summary.txt"

{
    printf '{"rss_kb":{"start":%s,"after_ingest":%s,"peak_after_ingest":%s,"after_queries":%s},' \
        "$rss0" "$rss1" "$hwm1" "$rss2"
    printf '"rss_growth_bytes_per_doc":%s,"server_cpu_s":{"start":%s,"after_ingest":%s,"after_queries":%s},' \
        "$per_doc" "$cpu0" "$cpu1" "$cpu2"
    printf '"wal_fsync":"%s","disk_kb":{"after_ingest":%s,"after_stop":%s},"stop_s":%s,' \
        "$WAL_FSYNC" "$disk1" "$disk2" "$stop_s"
    printf '"ingest":%s,"query":%s}\n' \
        "$(sed -n 's/^summary: //p' "$OUT/ingest.txt")" "$(sed -n 's/^summary: //p' "$OUT/query.txt")"
} >"$OUT/summary.json"
echo "(details: $OUT/summary.json, server log: $log)"
