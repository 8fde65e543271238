#!/usr/bin/env bash
# The redis backend beside the memory backend, in one run on this machine:
# Redis used_memory growth per document (one copy: a cluster of 3 primaries
# without replicas), ingest docs/s, and GET /similar p50/p99 through a second
# neardup node (written on one node, read on the other), then the same
# documents and queries on the memory backend (RSS growth per document).
#
#   DOCS=100000 QUERIES=20000 scripts/redis-bench.sh
#
# Needs Debian's redis-server (apt-get install -y redis-server). Builds
# release; everything runs on 127.0.0.1 and is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
DOCS="${DOCS:-100000}"
QUERIES="${QUERIES:-20000}"
OUT="${OUT:-target/redis-bench}"
# shellcheck source=scripts/redis-cluster.sh
source scripts/redis-cluster.sh

start() { # NAME PORT ENV... -> sets pid
    local name=$1 port=$2; shift 2
    local dir; dir=$(mktemp -d "${TMPDIR:-/tmp}/neardup-rb.XXXXXX")
    dirs+=("$dir")
    env NEARDUP_SERVER__BIND="127.0.0.1:$port" NEARDUP_STORAGE__DATA_DIR="$dir" \
        NEARDUP_STORAGE__SNAPSHOT_INTERVAL_SECS=0 NEARDUP_STORAGE__WAL_FSYNC=never \
        NEARDUP_LOG__LEVEL=warn "$@" target/release/neardup >"$OUT/$name.log" 2>&1 &
    pid=$!; pids+=("$pid")
    for _ in $(seq 1 300); do curl -fsS "127.0.0.1:$port/readyz" >/dev/null 2>&1 && return; sleep 0.1; done
    echo "$name did not start; see $OUT/$name.log" >&2; exit 1
}
summary() { sed -n 's/^summary: //p'; }

pa=$(free_port); pb=$(free_port); pm=$(free_port)
redis_env=(NEARDUP_STORAGE__BACKEND=redis "NEARDUP_STORAGE__REDIS__NODES=$nodes_json"
    NEARDUP_STORAGE__REDIS__KEY_PREFIX=bench NEARDUP_STORAGE__REDIS__EXPECTED_DOCUMENTS="${EXPECTED:-$DOCS}"
    NEARDUP_STORAGE__REDIS__COMMAND_TIMEOUT_MS="${COMMAND_TIMEOUT_MS:-1000}")
start redis-a "$pa" "${redis_env[@]}"; start redis-b "$pb" "${redis_env[@]}"
u0=$(used)
target/release/examples/loadgen --url "http://127.0.0.1:$pa" --docs "$DOCS" --phase ingest | summary >"$OUT/redis-ingest.json"
u1=$(used)
target/release/examples/loadgen --url "http://127.0.0.1:$pb" --docs "$DOCS" --queries "$QUERIES" --phase query | summary >"$OUT/redis-query.json"

start memory "$pm"
rss() { awk '$1=="VmRSS:"{print $2}' "/proc/$pid/status"; }
r0=$(rss)
target/release/examples/loadgen --url "http://127.0.0.1:$pm" --docs "$DOCS" --phase ingest | summary >"$OUT/memory-ingest.json"
r1=$(rss)
target/release/examples/loadgen --url "http://127.0.0.1:$pm" --docs "$DOCS" --queries "$QUERIES" --phase query | summary >"$OUT/memory-query.json"

python3 - "$OUT" "$DOCS" "$u0" "$u1" "$r0" "$r1" <<'PY'
import json, sys
out, n, u0, u1, r0, r1 = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:])
load = lambda f: json.load(open(f"{out}/{f}.json"))
ri, rq, mi, mq = load("redis-ingest"), load("redis-query"), load("memory-ingest"), load("memory-query")
print(f"documents: {n:,} (generated ~130-word articles), 3 Redis primaries, no replicas")
print(f"| backend | memory per document | ingest docs/s | /similar req/s | p50 ms | p99 ms | planted found |")
print(f"|---|---:|---:|---:|---:|---:|---:|")
for name, mem, i, q in [("redis (written on node A, read on node B)", f"{(u1-u0)/n:,.0f} B used_memory", ri, rq),
                        ("memory", f"{(r1-r0)*1024/n:,.0f} B RSS", mi, mq)]:
    s = q["similar"]
    print(f"| {name} | {mem} | {i['ingest']['docs_per_s']:,.0f} | {s['queries_per_s']:,.0f} | {s['p50_ms']:.3f} | {s['p99_ms']:.3f} | {s['planted_found']}/{s['planted_checked']} |")
PY
