#!/bin/sh
# redis-cluster-init: creates the Redis Cluster of compose.cluster.yml, once.
# Waits (bounded) until every node answers PING, then:
#   - the first node says cluster_state:ok: nothing to do (already created);
#   - some node already has slots: the cluster was created before (e.g. the
#     containers were restarted) and is still converging: waits for ok;
#   - every node is empty: `redis-cli --cluster create` with
#     REDIS_CLUSTER_REPLICAS replicas per primary, then waits until the
#     cluster is formed: every node says cluster_state:ok and every replica has
#     its primary's data (master_link_status:up). Nodes say ok before the
#     replicas are attached and synced: a client that connects then sees the
#     topology change under it, and a primary lost before its replica synced
#     cannot fail over. compose.cluster.yml starts the neardup nodes only once
#     this exits 0.
# Exit 0 once the cluster is formed, 1 on a timeout or a failed create.
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

count=0
for _ in $nodes; do count=$((count + 1)); done
want_replicas=$(( count * replicas / (replicas + 1) ))
# formed: every node says cluster_state:ok, and want_replicas replicas are
# attached with their link to the primary up (the initial sync done).
formed() {
  synced=0
  for n in $nodes; do
    [ "$(info "$n" cluster_state)" = ok ] || return 1
    if [ "$(cli "$n" role | head -n 1)" = slave ] \
      && [ "$(cli "$n" info replication | sed -n 's/^master_link_status://p')" = up ]; then
      synced=$((synced + 1))
    fi
  done
  [ "$synced" -eq "$want_replicas" ]
}
wait_formed() {
  until formed; do
    expired && { say "not formed within ${limit}s (cluster_state:ok everywhere, $want_replicas replicas synced)"; exit 1; }
    sleep 1
  done
  say "cluster formed: cluster_state:ok on every node, $want_replicas replicas synced"
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
    wait_formed
    exit 0
  fi
done

say "creating the cluster: $nodes, $replicas replica(s) per primary"
# shellcheck disable=SC2086 # one argument per node
redis-cli --cluster create $nodes --cluster-replicas "$replicas" --cluster-yes
wait_formed
