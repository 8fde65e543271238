#!/usr/bin/env bash
# Smoke test of compose.cluster.yml (the redis backend) with podman-compose:
# lints container/redis/Dockerfile (hadolint), builds neardup-redis:dev (and
# neardup:dev only if it is missing), starts the whole file with
# `podman-compose up -d` under its own project name and two free loopback
# ports: a Redis Cluster of 3 primaries and 3 replicas, the one-shot
# redis-init that creates it, and two neardup nodes A and B. Waits (bounded)
# for the cluster to be formed (cluster_state:ok on every Redis node, the 3
# replicas synced) and for /readyz on both neardup nodes,
# then checks that what is written on one node is read on the other (single
# documents, a batch, /similar with the exact Jaccard, /compare), writes 50
# more, stops one Redis primary and measures the failover (until its replica
# is promoted and a write on A is acknowledged again), checks that every
# acknowledged document is still readable on both nodes, and that the stopped
# node rejoins as a replica when started again. Removes everything it started (containers, pod,
# network, volumes), also on failure; keeps the images.
#
# Usage:  scripts/cluster-smoke.sh
#         (sources ../shared/container/setup.sh first when podman is not set up
#         in this shell)
# Env:    SMOKE_PORT_A, SMOKE_PORT_B (free loopback ports; passed to compose as
#         HOST_PORT_A / HOST_PORT_B), SMOKE_PROJECT (neardup-cluster-smoke-<pid>),
#         SMOKE_SKIP_BUILD=1 (reuse neardup-redis:dev when it exists; neardup:dev
#         is only ever built when missing), SMOKE_BUILD_ARGS (more `podman build`
#         options), SMOKE_BUILD_TIMEOUT (3600 s), SMOKE_READY_TIMEOUT (90 s: the
#         cluster ok and both nodes ready), SMOKE_FAILOVER_TIMEOUT (30 s).
# Needs:  podman, podman-compose, hadolint, python3, curl, jq.
#         Only talks to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

PROJECT=${SMOKE_PROJECT:-neardup-cluster-smoke-$$}
COMPOSE_FILE=compose.cluster.yml
BUILD_TIMEOUT=${SMOKE_BUILD_TIMEOUT:-3600}
READY_TIMEOUT=${SMOKE_READY_TIMEOUT:-90}
FAILOVER_TIMEOUT=${SMOKE_FAILOVER_TIMEOUT:-30}
CURL=(curl -sS --max-time 10)
LABEL="label=io.podman.compose.project=$PROJECT"
REDIS_SERVICES=(redis-1 redis-2 redis-3 redis-4 redis-5 redis-6)
T0=$(date +%s)

BODY_FILE=$(mktemp) # the body of the last status_post
PASSED=()
FAILED=()
pass() { PASSED+=("$1"); echo "  ok    $1"; }
fail() { FAILED+=("$1"); echo "  FAIL  $1" >&2; }
log() { echo "== $*"; }

summary() { # exit status
  local secs=$(( $(date +%s) - T0 ))
  echo
  echo "==================== cluster smoke summary ===================="
  for c in "${PASSED[@]+"${PASSED[@]}"}"; do echo "PASS  $c"; done
  for c in "${FAILED[@]+"${FAILED[@]}"}"; do echo "FAIL  $c"; done
  [ -n "${FAILOVER_SECS:-}" ] && echo "failover: replica promoted after ${PROMOTED_SECS:-?}s, writes acknowledged again after ${FAILOVER_SECS}s"
  if [ "$1" -eq 0 ]; then
    echo "RESULT: PASS (${#PASSED[@]} checks, ${secs}s)"
  else
    echo "RESULT: FAIL (${#FAILED[@]} failed, ${#PASSED[@]} passed${ABORTED:+, aborted}${INTERRUPTED:+, interrupted}, exit $1, ${secs}s)"
  fi
}

# The project's containers (all of them, also stopped ones).
project_containers() { podman ps -aq --filter "$LABEL" 2>/dev/null; }

cleanup() {
  local rc=$?
  set +e
  trap - INT TERM
  rm -f "$BODY_FILE"
  if [ "$rc" -ne 0 ] || [ "${#FAILED[@]}" -ne 0 ]; then
    for c in $(project_containers); do
      echo "---- last log lines of $(podman inspect "$c" --format '{{.Name}}') ----" >&2
      podman logs --tail 20 "$c" >&2 2>&1
    done
  fi
  if [ "${COMPOSE_USED:-0}" = 1 ]; then
    # Anonymous volumes carry no project label: note them before `down`.
    local anon
    anon=$(for c in $(project_containers); do
      podman inspect "$c" --format '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}' 2>/dev/null
    done)
    # `down -v` removes the project's containers, pod, network and named
    # volumes; then anything left behind is removed by label (the pod by name).
    "${COMPOSE[@]}" down -v -t 0 >/dev/null 2>&1
    for c in $(project_containers); do podman rm -f -v -t 0 "$c" >/dev/null 2>&1; done
    podman pod rm -f "pod_$PROJECT" >/dev/null 2>&1
    for v in $(podman volume ls -q --filter "$LABEL" 2>/dev/null) $anon; do
      podman volume exists "$v" 2>/dev/null && podman volume rm -f "$v" >/dev/null 2>&1
    done
    for n in $(podman network ls -q --filter "$LABEL" 2>/dev/null); do podman network rm -f "$n" >/dev/null 2>&1; done
    left="$(project_containers) $(podman volume ls -q --filter "$LABEL" 2>/dev/null) $(podman network ls -q --filter "$LABEL" 2>/dev/null)"
    for v in $anon; do podman volume exists "$v" 2>/dev/null && left+=" $v"; done
    podman pod exists "pod_$PROJECT" 2>/dev/null && left+=" pod_$PROJECT"
    if [ -n "${left// /}" ]; then
      fail "cleanup: left behind:${left}"
    else
      pass "cleanup: no container, pod, volume or network of project $PROJECT left"
    fi
  fi
  if [ "$rc" -eq 0 ] && [ "${#FAILED[@]}" -ne 0 ]; then rc=1; fi
  summary "$rc"
  exit "$rc"
}
on_signal() { INTERRUPTED=1; exit 130; }
trap cleanup EXIT
trap on_signal INT TERM

# Aborts the run: later steps depend on this one.
die() { fail "$1"; ABORTED=1; exit 1; }

# Podman here needs the harness settings (runc, rlimits, docker image format).
if [ -z "${CONTAINERS_CONF:-}" ] && [ -f ../shared/container/setup.sh ]; then
  # shellcheck disable=SC1091
  source ../shared/container/setup.sh
  set -euo pipefail # setup.sh turns these off at its end
fi
# The OCI image format drops HEALTHCHECK; the docker format keeps it.
export BUILDAH_FORMAT=docker

for tool in podman podman-compose hadolint python3 curl jq; do
  command -v "$tool" >/dev/null || die "required tool missing: $tool"
done

now_ms() { date +%s%3N; }
secs_since() { awk -v a="$1" -v b="$(now_ms)" 'BEGIN { printf "%.1f", (b - a) / 1000 }'; }

# ---------------------------------------------------------------- static checks
log "hadolint container/redis/Dockerfile"
if out=$(hadolint container/redis/Dockerfile 2>&1); then
  pass "hadolint container/redis/Dockerfile: clean"
else
  echo "$out" >&2
  fail "hadolint container/redis/Dockerfile"
fi

# ---------------------------------------------------------------- compose
if [ -z "${SMOKE_PORT_A:-}" ] || [ -z "${SMOKE_PORT_B:-}" ]; then
  # two distinct ports the kernel just handed out on loopback
  read -r SMOKE_PORT_A SMOKE_PORT_B < <(python3 -c '
import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])') || die "no free loopback ports found"
fi
export HOST_PORT_A=$SMOKE_PORT_A HOST_PORT_B=$SMOKE_PORT_B
A="http://127.0.0.1:$SMOKE_PORT_A"
B="http://127.0.0.1:$SMOKE_PORT_B"
COMPOSE=(podman-compose -f "$COMPOSE_FILE" -p "$PROJECT")
CONFIG=$("${COMPOSE[@]}" config 2>/dev/null) || die "podman-compose -f $COMPOSE_FILE config"
image_of() { awk -v s="  $1:" '/^  [^ ]/ { cur = $0 } cur == s && $1 == "image:" { print $2; exit }' <<<"$CONFIG"; }
REDIS_IMAGE=$(image_of redis-1)
NEARDUP_IMAGE=$(image_of neardup-a)
[ -n "$REDIS_IMAGE" ] && [ -n "$NEARDUP_IMAGE" ] || die "$COMPOSE_FILE: image names of redis-1 and neardup-a"
for s in "${REDIS_SERVICES[@]}" redis-init neardup-b; do
  want=$REDIS_IMAGE; [ "$s" = neardup-b ] && want=$NEARDUP_IMAGE
  [ "$(image_of "$s")" = "$want" ] || die "$COMPOSE_FILE: service $s uses image $want"
done

# ---------------------------------------------------------------- build
if [ "${SMOKE_SKIP_BUILD:-0}" = 1 ] && podman image exists "$REDIS_IMAGE"; then
  log "reusing image $REDIS_IMAGE (SMOKE_SKIP_BUILD=1)"
else
  log "podman build container/redis -> $REDIS_IMAGE"
  start=$(date +%s)
  # shellcheck disable=SC2086 # SMOKE_BUILD_ARGS: several options
  timeout "$BUILD_TIMEOUT" podman build -q --pull=never --network host ${SMOKE_BUILD_ARGS:-} \
    -t "$REDIS_IMAGE" container/redis >/dev/null || die "podman build $REDIS_IMAGE"
  pass "podman build $REDIS_IMAGE ($(( $(date +%s) - start ))s)"
fi
if podman image exists "$NEARDUP_IMAGE"; then
  log "reusing image $NEARDUP_IMAGE (built by scripts/container-smoke.sh)"
else
  # The compose file's build section for the neardup nodes (context ., the
  # Dockerfile); --network host lets cargo in the build reach the registry.
  log "podman build . -> $NEARDUP_IMAGE (missing; timeout ${BUILD_TIMEOUT}s)"
  start=$(date +%s)
  # shellcheck disable=SC2086 # SMOKE_BUILD_ARGS: several options
  timeout "$BUILD_TIMEOUT" podman build -q --pull=never --network host ${SMOKE_BUILD_ARGS:-} \
    -t "$NEARDUP_IMAGE" . >/dev/null || die "podman build $NEARDUP_IMAGE"
  pass "podman build $NEARDUP_IMAGE ($(( $(date +%s) - start ))s)"
fi
got=$(podman image inspect "$REDIS_IMAGE" | jq -c '.[0] | {user: .Config.User, health: .Healthcheck.Test}')
want='{"user":"10002:10002","health":["CMD","redis-cli","ping"]}'
[ "$got" = "$want" ] && pass "$REDIS_IMAGE config: USER 10002:10002, HEALTHCHECK redis-cli ping" \
  || fail "$REDIS_IMAGE config: want $want, got $got"

# ---------------------------------------------------------------- helpers
# The container of a service (the newest one of the project).
container() { podman ps -a --filter "$LABEL" --filter "label=io.podman.compose.service=$1" --format '{{.Names}}' | tail -n1; }
# redis-cli in a Redis service's container, CRs stripped.
# Prints nothing (and succeeds) when the container does not answer.
rcli() {
  local c; c=$(container "$1"); shift
  { podman exec "$c" redis-cli "$@" 2>/dev/null || true; } | tr -d '\r'
}
cluster_field() { rcli "$1" cluster info | sed -n "s/^$2://p"; }
role_of() { rcli "$1" role | head -n1; }
running() { [ "$(podman inspect "$1" --format '{{.State.Running}}' 2>/dev/null)" = true ]; }

post() { # base path json -> body; fails on non-2xx
  "${CURL[@]}" -f -X POST "$1$2" -H 'Content-Type: application/json' -d "$3"
}
# status base path json -> the HTTP status ("000" when no answer); body in $BODY_FILE
status_post() {
  "${CURL[@]}" -o "$BODY_FILE" -w '%{http_code}' -X POST "$1$2" -H 'Content-Type: application/json' -d "$3" 2>/dev/null || true
}

# The documents acknowledged so far (201 or 200): each must be readable on
# both nodes at the end.
ACKED=()

# Planted pair (as in scripts/container-smoke.sh): with the default recipe q1
# has 12 shingles and q2 10, all shared with q1, so the exact Jaccard is 10/12.
Q1='What is the step by step guide to invest in share market in india?'
Q2='What is the step by step guide to invest in share market?'
EXPECTED_JACCARD='0.8333333333333334'

# ---------------------------------------------------------------- up
log "podman-compose -p $PROJECT -f $COMPOSE_FILE up -d (A 127.0.0.1:$SMOKE_PORT_A, B 127.0.0.1:$SMOKE_PORT_B)"
COMPOSE_USED=1
UP_MS=$(now_ms)
# Without systemd, podman logs "unable to get systemd connection ... healthchecks"
# on run/stop: it cannot schedule HEALTHCHECKs. Harmless; they are run by hand below.
out=$("${COMPOSE[@]}" up -d 2>&1) || { echo "$out" >&2; die "podman-compose up -d"; }
for s in "${REDIS_SERVICES[@]}" redis-init neardup-a neardup-b; do
  [ -n "$(container "$s")" ] || die "podman-compose up -d started no $s container"
done
pass "podman-compose up -d: 6 redis nodes, redis-init, neardup-a, neardup-b ($(secs_since "$UP_MS")s; it waits for redis-init)"

log "waiting for the cluster (redis-init exited 0, cluster_state:ok and replicas synced on every node; ${READY_TIMEOUT}s)"
INIT=$(container redis-init)
deadline=$(( $(date +%s) + READY_TIMEOUT ))
cluster_ok=0
while [ "$(date +%s)" -lt "$deadline" ]; do
  if [ "$(podman inspect "$INIT" --format '{{.State.Status}} {{.State.ExitCode}}' 2>/dev/null)" = "exited 0" ]; then
    cluster_ok=1 synced=0
    for s in "${REDIS_SERVICES[@]}"; do
      [ "$(cluster_field "$s" cluster_state)" = ok ] || { cluster_ok=0; break; }
      [ "$(rcli "$s" info replication | sed -n 's/^master_link_status://p')" = up ] && synced=$((synced + 1))
    done
    [ "$synced" = 3 ] || cluster_ok=0
    [ "$cluster_ok" = 1 ] && break
  fi
  sleep 0.5
done
[ "$cluster_ok" = 1 ] || die "redis-init exited 0, every node says cluster_state:ok and 3 replicas are synced within ${READY_TIMEOUT}s"
pass "redis-init formed the cluster: cluster_state:ok on all 6 nodes, 3 replicas synced, $(secs_since "$UP_MS")s after up"

# Topology: 3 primaries with slots, 3 replicas, each announced by service name.
# As redis-1 sees it: a role set by CLUSTER REPLICATE on another node reaches
# redis-1 by gossip, a moment after that replica is synced (once seen: 3
# primaries and 2 replicas), so the view is read until it agrees or 10 s pass.
topology_deadline=$(( $(date +%s) + 10 ))
while :; do
  nodes=$(rcli redis-1 cluster nodes)
  masters=$(awk '$3 ~ /master/ && NF >= 9' <<<"$nodes" | wc -l)
  replicas=$(awk '$3 ~ /slave/' <<<"$nodes" | wc -l)
  names=$(awk '{ split($2, a, ","); print a[2] }' <<<"$nodes" | sort | tr '\n' ' ')
  { [ "$masters" = 3 ] && [ "$replicas" = 3 ]; } && break
  [ "$(date +%s)" -lt "$topology_deadline" ] || break
  sleep 0.2
done
if [ "$masters" = 3 ] && [ "$replicas" = 3 ] && [ "$names" = "redis-1 redis-2 redis-3 redis-4 redis-5 redis-6 " ]; then
  pass "topology: 3 primaries with slots, 3 replicas, announced as redis-1..redis-6"
else
  echo "$nodes" >&2
  fail "topology: want 3 primaries, 3 replicas, hostnames redis-1..6; got $masters, $replicas, [$names]"
fi
endpoint=$(rcli redis-2 cluster slots | sed -n 3p)
[[ "$endpoint" =~ ^redis-[1-6]$ ]] && pass "CLUSTER SLOTS names nodes by hostname ($endpoint), not by address" \
  || fail "CLUSTER SLOTS endpoint is a hostname (got '$endpoint')"

out=$(timeout 60 podman start --attach "$INIT" 2>&1 || true)
if grep -q "nothing to do" <<<"$out" && [ "$(podman inspect "$INIT" --format '{{.State.ExitCode}}')" = 0 ]; then
  pass "redis-init run again: exits 0 without touching the cluster (idempotent)"
else
  echo "$out" >&2
  fail "redis-init run again exits 0 with \"nothing to do\""
fi

log "waiting for /readyz on both neardup nodes (${READY_TIMEOUT}s from up)"
deadline=$(( UP_MS / 1000 + READY_TIMEOUT ))
for node in neardup-a neardup-b; do
  base=$A; [ "$node" = neardup-b ] && base=$B
  c=$(container "$node")
  ready=0
  # Asked at least once: when forming the cluster took most of the budget
  # (a loaded machine: 92 s once), a node that has long been ready must not
  # fail unasked.
  while :; do
    if "${CURL[@]}" -o /dev/null -f "$base/readyz" 2>/dev/null; then ready=1; break; fi
    [ "$(date +%s)" -lt "$deadline" ] || break
    sleep 0.5
  done
  [ "$ready" = 1 ] || die "$node answers /readyz 200 within ${READY_TIMEOUT}s"
  # Started after redis-init exited (depends_on: service_completed_successfully),
  # so the node should find the cluster formed at once (no retries).
  restarts=$(podman inspect "$c" --format '{{.RestartCount}}' 2>/dev/null || echo '?')
  waited=$(podman logs "$c" 2>&1 | grep -c 'redis is not reachable yet' || true)
  pass "$node ready ($(secs_since "$UP_MS")s after up; $waited retries of Redis, $restarts restarts)"
done

log "healthchecks and users"
for s in redis-1 neardup-a; do
  hc_ok=0
  for _ in $(seq 1 10); do
    if podman healthcheck run "$(container "$s")" >/dev/null 2>&1; then hc_ok=1; break; fi
    sleep 1
  done
  [ "$hc_ok" = 1 ] && pass "podman healthcheck run $s" || fail "podman healthcheck run $s did not succeed within 10 tries"
done
uid=$(podman exec "$(container redis-1)" id -u 2>/dev/null || true)
[ "$uid" = 10002 ] && pass "redis-server runs as non-root (uid $uid)" || fail "redis-server runs as uid 10002 (got '${uid:-unknown}')"

# ---------------------------------------------------------------- across nodes
log "writes on one node, reads on the other"
body=$(post "$A" /documents "$(jq -nc --arg t "$Q1" '{id:"q1", text:$t, metadata:{source:"cluster-smoke"}}')") \
  && [ "$(jq -r '.id' <<<"$body")" = q1 ] && ACKED+=(q1) \
  && pass "POST /documents q1 on A -> $body" || fail "POST /documents q1 on A (${body:-no body})"

body=$("${CURL[@]}" -f "$B/documents/q1" || true)
[ "$(jq -r '"\(.id) \(.shingles) \(.metadata.source)"' <<<"$body" 2>/dev/null)" = "q1 12 cluster-smoke" ] \
  && pass "GET /documents/q1 on B finds it (12 shingles, its metadata)" \
  || fail "GET /documents/q1 on B (${body:-no body})"

body=$(post "$B" /similar "$(jq -nc --arg t "$Q2" '{text:$t}')" || true)
got=$(jq -r '[.results[] | select(.id == "q1") | .jaccard][0] // empty' <<<"$body" 2>/dev/null || true)
[ "$got" = "$EXPECTED_JACCARD" ] && pass "POST /similar on B finds q1 (written on A) with jaccard $got" \
  || fail "POST /similar on B expected q1 with jaccard $EXPECTED_JACCARD, got: ${body:-no body}"

batch=$(jq -nc --arg q2 "$Q2" '{documents:[
  {id:"q2", text:$q2},
  {id:"g1", text:"An unrelated question about gardening in spring"},
  {id:"g2", text:"the night is dark and the moon is red"}]}')
body=$(post "$B" /documents/batch "$batch" || true)
if [ "$(jq -r '"\(.created) \(.failed)"' <<<"$body" 2>/dev/null)" = "3 0" ]; then
  ACKED+=(q2 g1 g2)
  pass "POST /documents/batch on B created 3"
else
  fail "POST /documents/batch on B (${body:-no body})"
fi
seen=0
for id in q2 g1 g2; do "${CURL[@]}" -o /dev/null -f "$A/documents/$id" 2>/dev/null && seen=$((seen + 1)); done
[ "$seen" = 3 ] && pass "the batch written on B is visible on A (3 of 3)" || fail "the batch written on B is visible on A ($seen of 3)"

body=$("${CURL[@]}" -f "$A/similar?id=q1&limit=10" || true)
got=$(jq -c '[.results[] | {id, jaccard}]' <<<"$body" 2>/dev/null || true)
[ "$got" = "[{\"id\":\"q2\",\"jaccard\":$EXPECTED_JACCARD}]" ] \
  && pass "GET /similar?id=q1 on A: q2 (written on B) with jaccard $EXPECTED_JACCARD, nothing else" \
  || fail "GET /similar?id=q1 on A expected only q2 with $EXPECTED_JACCARD, got: ${body:-no body}"
cmp=$("${CURL[@]}" -f "$A/compare?a=q1&b=q2" || true)
[ "$(jq -r '"\(.intersection)/\(.union) \(.jaccard)"' <<<"$cmp" 2>/dev/null)" = "10/12 $EXPECTED_JACCARD" ] \
  && pass "GET /compare?a=q1&b=q2 on A -> intersection 10, union 12" \
  || fail "GET /compare?a=q1&b=q2 on A expected 10/12, got: ${cmp:-no body}"

# Documents on every primary before one is stopped: 50 in one batch on A.
batch=$(jq -nc '{documents: [range(1; 51) | {id: "p\(.)", text: "document \(.) of the batch written before the failover, number \(. * 7919)"}]}')
body=$(post "$A" /documents/batch "$batch" || true)
if [ "$(jq -r '"\(.created) \(.failed)"' <<<"$body" 2>/dev/null)" = "50 0" ]; then
  for i in $(seq 1 50); do ACKED+=("p$i"); done
  pass "POST /documents/batch on A created 50 (before the failover)"
else
  fail "POST /documents/batch of 50 on A (${body:-no body})"
fi

# ---------------------------------------------------------------- failover
# The primary serving slot 0 and its replica, by announced hostname.
nodes=$(rcli redis-2 cluster nodes)
read -r P_ID P_NAME < <(awk '$3 ~ /master/ && $3 !~ /fail/ { for (i = 9; i <= NF; i++) if ($i ~ /^0-/ || $i == "0") { split($2, a, ","); print $1, a[2] } }' <<<"$nodes") \
  || die "cluster nodes: the primary of slot 0"
R_NAME=$(awk -v p="$P_ID" '$4 == p { split($2, a, ","); print a[2] }' <<<"$nodes" | head -n1)
[ -n "$P_NAME" ] && [ -n "$R_NAME" ] || die "cluster nodes: a primary ($P_NAME) and its replica ($R_NAME)"
# Query the cluster from a node that stays up.
WATCH=$R_NAME

log "failover: podman stop $P_NAME (primary of slot 0; replica $R_NAME), writes on A until acknowledged (${FAILOVER_TIMEOUT}s)"
podman stop -t 15 "$(container "$P_NAME")" >/dev/null 2>&1 || die "podman stop $P_NAME"
STOP_MS=$(now_ms)
pass "podman stop $P_NAME (the primary of slot 0)"
deadline=$(( STOP_MS / 1000 + FAILOVER_TIMEOUT ))
n=0 refused=0 promoted=0
while [ "$(date +%s)" -lt "$deadline" ]; do
  if [ "$promoted" = 0 ] && [ "$(role_of "$WATCH")" = master ]; then
    promoted=1
    PROMOTED_SECS=$(secs_since "$STOP_MS")
  fi
  n=$((n + 1))
  code=$(status_post "$A" /documents "$(jq -nc --arg id "f$n" --arg t "failover probe number $n, written on node A while a primary is down" '{id:$id, text:$t}')")
  if [ "$code" = 201 ]; then
    ACKED+=("f$n")
    FAILOVER_SECS=$(secs_since "$STOP_MS")
    break
  fi
  # Refused meanwhile: 503 storage-unavailable (retrying is safe), never anything else.
  if [ "$code" = 503 ] && [ "$(jq -r .type "$BODY_FILE" 2>/dev/null)" = "urn:neardup:problem:storage-unavailable" ]; then
    refused=$((refused + 1))
  else
    fail "a write during the failover answered $code: $(head -c 300 "$BODY_FILE")"
    break
  fi
  sleep 0.5
done
if [ -z "${FAILOVER_SECS:-}" ]; then
  # Tell a cluster that did not fail over from a node that did not follow it.
  [ "$promoted" = 1 ] || [ "$(role_of "$WATCH")" != master ] || PROMOTED_SECS=$(secs_since "$STOP_MS")
  if [ -n "${PROMOTED_SECS:-}" ]; then
    die "a write on A is acknowledged within ${FAILOVER_TIMEOUT}s of stopping $P_NAME: the cluster failed over ($R_NAME primary, seen after ${PROMOTED_SECS}s, cluster_state $(cluster_field "$WATCH" cluster_state)) but node A still answers $code: its Redis client did not recover"
  fi
  die "a write on A is acknowledged within ${FAILOVER_TIMEOUT}s of stopping $P_NAME: $R_NAME was not promoted (cluster_state $(cluster_field "$WATCH" cluster_state))"
fi
pass "writes on A acknowledged again ${FAILOVER_SECS}s after stopping $P_NAME ($refused refused meanwhile with 503 storage-unavailable)"
# The promotion may be seen only now (the write loop stops at the first 201).
for _ in $(seq 1 20); do
  [ "$promoted" = 1 ] && break
  if [ "$(role_of "$WATCH")" = master ]; then promoted=1; PROMOTED_SECS=$(secs_since "$STOP_MS"); break; fi
  sleep 0.5
done
state=$(cluster_field "$WATCH" cluster_state)
[ "$promoted" = 1 ] && [ "$state" = ok ] \
  && pass "replica $R_NAME promoted to primary (seen ${PROMOTED_SECS}s after the stop), cluster_state:ok" \
  || fail "replica $R_NAME promoted to primary and cluster_state:ok (promoted=$promoted, state=$state)"

# Node B has its own connection: it must find the new primary too.
ok=0 i=0
deadline=$(( $(date +%s) + 20 ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  i=$((i + 1))
  code=$(status_post "$B" /documents "$(jq -nc --arg id "after$i" '{id:$id, text:"written on node B after the failover, a short sentence"}')")
  if [ "$code" = 201 ]; then ok=1; ACKED+=("after$i"); break; fi
  sleep 0.5
done
[ "$ok" = 1 ] && pass "a write on B after the failover is acknowledged (try $i)" \
  || fail "a write on B after the failover is acknowledged within 20s ($i tries, last $code: $(head -c 200 "$BODY_FILE"))"

log "every acknowledged document (${#ACKED[@]}) readable on both nodes"
for node in A B; do
  base=$A; [ "$node" = B ] && base=$B
  missing=()
  # A 503 is retried for 20 s per node in all (a stalled node must not make
  # this take minutes), a 404 is not.
  deadline=$(( $(date +%s) + 20 ))
  for id in "${ACKED[@]}"; do
    found=0
    while :; do
      code=$("${CURL[@]}" -o /dev/null -w '%{http_code}' "$base/documents/$id" 2>/dev/null || true)
      [ "$code" = 200 ] && { found=1; break; }
      [ "$code" = 404 ] || [ "$(date +%s)" -ge "$deadline" ] && break
      sleep 1
    done
    [ "$found" = 1 ] || missing+=("$id:$code")
  done
  [ "${#missing[@]}" = 0 ] && pass "node $node reads all ${#ACKED[@]} acknowledged documents after the failover" \
    || fail "node $node after the failover: ${#missing[@]} of ${#ACKED[@]} not readable (id:status) ${missing[*]:0:8}"
done
body=$("${CURL[@]}" -f "$B/similar?id=q1&limit=10" || true)
got=$(jq -c '[.results[] | {id, jaccard}]' <<<"$body" 2>/dev/null || true)
[ "$got" = "[{\"id\":\"q2\",\"jaccard\":$EXPECTED_JACCARD}]" ] \
  && pass "GET /similar?id=q1 on B after the failover: q2 with jaccard $EXPECTED_JACCARD" \
  || fail "GET /similar?id=q1 on B after the failover, got: ${body:-no body}"

log "podman start $P_NAME: it rejoins as a replica"
podman start "$(container "$P_NAME")" >/dev/null 2>&1 || fail "podman start $P_NAME"
start=$(now_ms)
rejoined=0
for _ in $(seq 1 60); do
  role=$(role_of "$P_NAME")
  link=$(rcli "$P_NAME" info replication | sed -n 's/^master_link_status://p')
  if [ "$role" = slave ] && [ "$link" = up ] && [ "$(cluster_field "$P_NAME" cluster_state)" = ok ]; then rejoined=1; break; fi
  sleep 0.5
done
[ "$rejoined" = 1 ] && pass "$P_NAME rejoined as a replica after $(secs_since "$start")s (master_link_status:up, cluster_state:ok)" \
  || fail "$P_NAME rejoins as a replica within 30s (role '${role:-none}', link '${link:-none}')"
