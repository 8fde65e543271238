#!/bin/sh
# redis-cluster-init: creates the Redis Cluster of compose.cluster.yml, once.
# Waits (bounded) until every node answers PING, then:
#   - the first node says cluster_state:ok: nothing to do (already created);
#   - some node already has slots: the cluster was created before (e.g. the
#     containers were restarted) and is still converging: waits for ok;
#   - every node is empty: `redis-cli --cluster create` with
#     REDIS_CLUSTER_REPLICAS replicas per primary, then waits until every node
#     says cluster_state:ok.
# Exit 0 once the cluster is ok, 1 on a timeout or a failed create.
# Env: REDIS_CLUSTER_NODES (host:port ..., required), REDIS_CLUSTER_REPLICAS
#      (1), REDIS_CLUSTER_INIT_TIMEOUT (seconds, 120).
set -eu
nodes=${REDIS_CLUSTER_NODES:?set REDIS_CLUSTER_NODES to "host:port host:port ..."}
replicas=${REDIS_CLUSTER_REPLICAS:-1}
limit=${REDIS_CLUSTER_INIT_TIMEOUT:-120}
deadline=$(( $(date +%s) + limit ))

say() { echo "redis-cluster-init: $*"; }
# cli host:port args...: one redis-cli call, bounded, CRs stripped.
cli() {
  hp=$1; shift
  timeout 5 redis-cli -h "${hp%:*}" -p "${hp##*:}" "$@" 2>/dev/null | tr -d '\r'
}
# info host:port field: a field of CLUSTER INFO.
info() { cli "$1" cluster info | sed -n "s/^$2://p"; }
expired() { [ "$(date +%s)" -ge "$deadline" ]; }

for n in $nodes; do
  until [ "$(cli "$n" ping)" = PONG ]; do
    expired && { say "no PONG from $n within ${limit}s"; exit 1; }
    sleep 1
  done
done
say "all nodes answer PING: $nodes"

# all_ok: every node says cluster_state:ok.
all_ok() {
  for n in $nodes; do [ "$(info "$n" cluster_state)" = ok ] || return 1; done
}
wait_ok() {
  until all_ok; do
    expired && { say "cluster_state not ok on every node within ${limit}s"; exit 1; }
    sleep 1
  done
  say "cluster_state:ok on every node"
}

first=${nodes%% *}
if [ "$(info "$first" cluster_state)" = ok ]; then
  say "cluster already created ($first says cluster_state:ok); nothing to do"
  exit 0
fi
for n in $nodes; do
  assigned=$(info "$n" cluster_slots_assigned)
  if [ "${assigned:-0}" -gt 0 ]; then
    say "$n already has $assigned slots: the cluster exists, waiting for it to converge"
    wait_ok
    exit 0
  fi
done

say "creating the cluster: $nodes, $replicas replica(s) per primary"
# shellcheck disable=SC2086 # one argument per node
redis-cli --cluster create $nodes --cluster-replicas "$replicas" --cluster-yes
wait_ok
