# Sourced by the redis bench scripts (after they set OUT): builds the release
# binaries they run (neardup, loadgen, redis_cluster), starts a local Redis
# Cluster of 3 primaries without replicas (examples/redis_cluster, kept up
# while fd 3 holds its stdin open) and stops it, and any pid added to `pids`,
# when the script exits (and removes any directory added to `dirs`). Sets
# `ports` (the primaries'), `nodes_json` (for NEARDUP_STORAGE__REDIS__NODES);
# defines `free_port` and `used` (the primaries' used_memory, summed).
mkdir -p "$OUT"
cargo build --release --quiet --bin neardup --example loadgen --example redis_cluster
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
pids=()
dirs=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    # End of its stdin: the cluster stops and removes its own directory.
    exec 3>&- 2>/dev/null || true
    wait 2>/dev/null || true
    for d in "${dirs[@]}"; do rm -rf "$d"; done
}
trap cleanup EXIT

fifo="$OUT/cluster.in"
rm -f "$fifo" && mkfifo "$fifo"
target/release/examples/redis_cluster 3 0 <"$fifo" >"$OUT/cluster.out" 2>&1 &
exec 3>"$fifo"
for _ in $(seq 1 300); do grep -q '^nodes ' "$OUT/cluster.out" 2>/dev/null && break; sleep 0.1; done
read -r -a urls <<<"$(sed -n 's/^nodes //p' "$OUT/cluster.out")"
ports=(); for u in "${urls[@]}"; do ports+=("${u##*:}"); done
nodes_json=$(printf '"%s",' "${urls[@]}"); nodes_json="[${nodes_json%,}]"
used() { local t=0; for p in "${ports[@]}"; do
    t=$((t + $(redis-cli -p "$p" INFO memory | tr -d '\r' | sed -n 's/^used_memory://p'))); done; echo "$t"; }
