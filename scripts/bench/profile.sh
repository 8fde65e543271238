#!/usr/bin/env bash
# Where the time goes, by perf sampling the release server: during the
# ingest of CORPUS (JSONL), during wrk on GET /similar, and during a restart
# that restores the snapshot. Run scripts/bench.sh once first (it builds and
# caches the corpora). Prints perf's top symbols (self time, and inclusive
# time with call graphs) for each phase into $OUT/*.txt.
#
#   scripts/bench/profile.sh [CORPUS]    # default: the cached 1,000,000-doc corpus
set -euo pipefail
cd "$(dirname "$0")/../.."
CORPUS="${1:-target/bench/corpus/articles-n1000000-s6.jsonl}"
PORT="${PORT:-18091}"
OUT="${OUT:-target/bench/profile}"
FREQ="${FREQ:-99}"
URL="http://127.0.0.1:$PORT"
command -v perf >/dev/null || { echo "perf not found (apt-get install linux-perf)" >&2; exit 1; }
[[ -s "$CORPUS" ]] || { echo "$CORPUS missing: run scripts/bench.sh first" >&2; exit 1; }
ids="${CORPUS%.jsonl}.ids"
[[ -s "$ids" ]] || target/bench/venv/bin/python scripts/bench/ids.py "$CORPUS" "$ids"
mkdir -p "$OUT"
data_dir="$(mktemp -d "${TMPDIR:-/tmp}/neardup-profile.XXXXXX")"
pid="" perf_pid=""
cleanup() {
    [[ -z "$perf_pid" ]] || kill -INT "$perf_pid" 2>/dev/null || true
    [[ -z "$pid" ]] || kill -TERM "$pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$data_dir"
}
trap cleanup EXIT
serve() {
    NEARDUP_SERVER__BIND="127.0.0.1:$PORT" NEARDUP_LOG__FORMAT=json \
    NEARDUP_STORAGE__DATA_DIR="$data_dir" NEARDUP_STORAGE__WAL_FSYNC=never \
    NEARDUP_STORAGE__SNAPSHOT_INTERVAL_SECS=0 "$@" >>"$OUT/server.log" 2>&1 &
}
ready() { until [[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/readyz")" == 200 ]]; do sleep 0.05; done; }
record() { perf record -q -F "$FREQ" --call-graph dwarf,16384 -o "$OUT/$1.data" -p "$pid" & perf_pid=$!; sleep 0.5; }
stop_record() { kill -INT "$perf_pid"; wait "$perf_pid" || true; perf_pid=""; }
# report PHASE: self time by symbol, then inclusive time of the crate's own
# functions and the libraries doing real work (runtime frames left out).
report() {
    local tidy='s/[[:space:]]+-[[:space:]]+-[[:space:]]*$//; s/[[:space:]]+$//'
    {
        echo "== $1: self time"
        perf report -i "$OUT/$1.data" --stdio --no-children --sort symbol -g none --percent-limit 1.5 2>/dev/null |
            grep -v '^#' | grep -v '^$' | sed -E "$tidy"
        echo "== $1: inclusive time (neardup and the libraries doing the work)"
        perf report -i "$OUT/$1.data" --stdio --children --sort symbol -g none --percent-limit 2 2>/dev/null |
            grep -v '^#' | sed -E "$tidy" | grep -v 'inlined)' |
            grep -E 'neardup::|serde_json|bincode|dashmap|hyper::proto|writev|malloc|_int_free' || true
    } >"$OUT/$1.txt"
    cut -c1-160 "$OUT/$1.txt"
}

cargo build --release --quiet --bin neardup --example loadgen
serve target/release/neardup
pid=$!
ready
record ingest
target/release/examples/loadgen --url "$URL" --corpus "$CORPUS" --batch 1000 --concurrency 4 --phase ingest | tail -3
stop_record
record similar
wrk -t1 -c8 -d15s -s scripts/bench/similar.lua "$URL" -- "$ids" 1 | grep -v WRK_JSON | tail -3
stop_record
curl -fsS -X POST "$URL/admin/snapshot"; echo
kill -TERM "$pid"; wait "$pid" || true
# The restart runs under perf from its first instruction until /readyz.
perf record -q -F "$FREQ" --call-graph dwarf,16384 -o "$OUT/restore.data" -- \
    env NEARDUP_SERVER__BIND="127.0.0.1:$PORT" NEARDUP_LOG__FORMAT=json \
    NEARDUP_STORAGE__DATA_DIR="$data_dir" NEARDUP_STORAGE__WAL_FSYNC=never \
    NEARDUP_STORAGE__SNAPSHOT_INTERVAL_SECS=0 target/release/neardup >>"$OUT/server.log" 2>&1 &
perf_pid=$!
ready
pid=$(pgrep -P "$perf_pid" -x neardup || true)
# SIGKILL: a graceful stop would write a final snapshot inside the profile.
kill -KILL "${pid:-$perf_pid}"; wait "$perf_pid" || true; perf_pid="" pid=""
for phase in ingest similar restore; do report "$phase"; done
echo "(perf data and reports in $OUT)"
