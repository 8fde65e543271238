#!/usr/bin/env bash
# The redis backend's retention sweep and write path, round by round: each
# round starts one neardup node (a given binary) on a fresh key prefix of one
# local cluster (3 primaries, no replicas), ingests DOCS generated articles
# (docs/s, Redis used_memory growth per document), waits for the node's first
# sweep (a walk of every record), then leaves it idle for WIN seconds with a
# sweep every 10 s and reports the node's and the primaries' CPU seconds.
# Give several binaries, alternating, to compare two builds in one run:
#
#   DOCS=100000 WIN=40 scripts/redis-sweep-bench.sh old/neardup new/neardup old/neardup new/neardup
#
# With no binary, 2 rounds of this checkout's release build. Needs Debian's
# redis-server; everything runs on 127.0.0.1 and is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
DOCS="${DOCS:-100000}"
WIN="${WIN:-40}"
OUT="${OUT:-target/redis-sweep-bench}"
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(target/release/neardup target/release/neardup)
# shellcheck source=scripts/redis-cluster.sh
source scripts/redis-cluster.sh
redis_cpu() { for p in "${ports[@]}"; do redis-cli -p "$p" INFO cpu | tr -d '\r'; done |
    awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.3f", s }'; }
clk_tck=$(getconf CLK_TCK)
node_cpu() { awk -v hz="$clk_tck" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$1/stat"; }

: >"$OUT/rounds"
round=0
for bin in "${bins[@]}"; do
    round=$((round + 1))
    port=$(free_port)
    dir=$(mktemp -d "${TMPDIR:-/tmp}/neardup-sweep.XXXXXX")
    dirs+=("$dir")
    env NEARDUP_SERVER__BIND="127.0.0.1:$port" NEARDUP_STORAGE__DATA_DIR="$dir" NEARDUP_LOG__LEVEL=warn \
        NEARDUP_STORAGE__BACKEND=redis "NEARDUP_STORAGE__REDIS__NODES=$nodes_json" \
        NEARDUP_STORAGE__REDIS__KEY_PREFIX="sweep$round" NEARDUP_STORAGE__REDIS__EXPECTED_DOCUMENTS="$DOCS" \
        NEARDUP_STORAGE__PURGE_INTERVAL_SECS=10 "$bin" >"$OUT/node$round.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 300); do curl -fsS "127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
    u0=$(used)
    target/release/examples/loadgen --url "http://127.0.0.1:$port" --docs "$DOCS" --phase ingest |
        sed -n 's/^summary: //p' >"$OUT/ingest$round.json"
    u1=$(used)
    sleep 12
    c0=$(node_cpu "$pid"); r0=$(redis_cpu)
    sleep "$WIN"
    c1=$(node_cpu "$pid"); r1=$(redis_cpu)
    kill "$pid"; wait "$pid" 2>/dev/null || true
    echo "$round $bin $u0 $u1 $c0 $c1 $r0 $r1" >>"$OUT/rounds"
done

python3 - "$OUT" "$DOCS" "$WIN" <<'PY'
import json, sys
out, docs, win = sys.argv[1], int(sys.argv[2]), sys.argv[3]
print(f"{docs:,} generated articles a round; idle window {win} s, a sweep every 10 s")
print(f"| round | binary | ingest docs/s | used_memory / doc | node CPU s (idle) | primaries CPU s (idle) |")
print(f"|---:|---|---:|---:|---:|---:|")
for line in open(f"{out}/rounds"):
    r, b, u0, u1, c0, c1, r0, r1 = line.split()
    rate = json.load(open(f"{out}/ingest{r}.json"))["ingest"]["docs_per_s"]
    print(f"| {r} | {b} | {rate:,.0f} | {(int(u1) - int(u0)) / docs:,.0f} B | {float(c1) - float(c0):.2f} | {float(r1) - float(r0):.2f} |")
PY
