#!/usr/bin/env bash
# What counting document frequency (index.boilerplate.enabled) costs the
# shipped server's ingest with both cores saturated (issue 44: "ingest
# slows by <= 25%"):
#
#   scripts/counts-ingest-bench.sh FILE.jsonl [ROUNDS]    # default 6 rounds
#   PASSAGES=true scripts/counts-ingest-bench.sh FILE.jsonl   # beside the passage index
#
# Each round starts the release `neardup` binary twice, as its own process
# with its own allocator (counts off, counts on; the order alternating by
# round), on a throwaway data dir (fsync=never, no periodic snapshot), and
# loads FILE through `POST /documents/batch` with examples/loadgen (1,000
# documents a request, 4 connections; bodies serialized before the clock
# starts). Prints each round's documents a second and its ratio on/off,
# then the median ratio. The in-process figure (`examples/similar_http_bench
# --ingest-only`) also pays its client's JSON encoding inside every round,
# which dilutes the ratio: this is the one to quote.
set -euo pipefail
cd "$(dirname "$0")/.."

corpus="${1:?usage: scripts/counts-ingest-bench.sh FILE.jsonl [ROUNDS]}"
rounds="${2:-6}"
passages="${PASSAGES:-false}"
cargo build --release --quiet --bin neardup --example loadgen

# One load of the corpus into a fresh server; prints documents a second.
load() {
    local counts="$1" dir pid addr=""
    dir="$(mktemp -d "${TMPDIR:-/tmp}/neardup-counts-bench.XXXXXX")"
    NEARDUP_SERVER__BIND=127.0.0.1:0 NEARDUP_LOG__FORMAT=json \
    NEARDUP_STORAGE__DATA_DIR="$dir" NEARDUP_STORAGE__WAL_FSYNC=never \
    NEARDUP_STORAGE__SNAPSHOT_INTERVAL_SECS=0 \
    NEARDUP_INDEX__PASSAGE_INDEX="$passages" NEARDUP_INDEX__BOILERPLATE__ENABLED="$counts" \
        target/release/neardup >"$dir/server.log" 2>&1 &
    pid=$!
    while [ -z "$addr" ]; do
        kill -0 "$pid" 2>/dev/null || { cat "$dir/server.log" >&2; exit 1; }
        sleep 0.1
        addr="$(grep -o '"addr":"[^"]*"' "$dir/server.log" | head -1 | cut -d'"' -f4 || true)"
    done
    until curl -fsS "http://$addr/readyz" >/dev/null 2>&1; do sleep 0.1; done
    target/release/examples/loadgen --url "http://$addr" --corpus "$corpus" \
        --phase ingest --batch 1000 --concurrency 4 2>/dev/null |
        sed -n 's/^summary: //p' |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["ingest"]["docs_per_s"])'
    kill -INT "$pid"
    wait "$pid" || true
    rm -rf "$dir"
}

ratios=()
for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 1 ]; then off=$(load false); on=$(load true); else on=$(load true); off=$(load false); fi
    ratio=$(python3 -c "print(f'{$on / $off:.3f}')")
    ratios+=("$ratio")
    printf 'round %d: counts off %.0f docs/s, on %.0f docs/s, ratio %s\n' "$r" "$off" "$on" "$ratio"
done
python3 -c "import statistics, sys; print('median ratio', statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}"
