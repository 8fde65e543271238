#!/usr/bin/env bash
# Container smoke test of the real docker-compose.yml, with podman-compose:
# lints the Dockerfile (hadolint) and checks the build context
# (scripts/check-dockerignore.py), builds the compose service's image, starts
# it with `podman-compose up -d` under its own project name and a free loopback
# port, ingests documents, checks near-duplicate search, the HEALTHCHECK, the
# non-root user, graceful SIGTERM shutdown with a final snapshot, and that the
# data survives into a new container on the same volume (`down` without -v,
# then `up` again). Removes everything it started (containers, pod, network,
# volume), also on failure; keeps the image and the build cache.
#
# Usage:  scripts/container-smoke.sh
#         (sources ../shared/container/setup.sh first when podman is not set up
#         in this shell: it installs podman, podman-compose and hadolint and
#         makes the base images)
# Env:    SMOKE_PORT (a free loopback port; passed to compose as HOST_PORT),
#         SMOKE_PROJECT (neardup-smoke-<pid>), SMOKE_SKIP_BUILD=1 (reuse the
#         compose image), SMOKE_BUILD_ARGS (more `podman build` options, e.g.
#         --no-cache), SMOKE_BUILD_TIMEOUT (3600 s), SMOKE_READY_TIMEOUT (60 s).
# Needs:  podman, podman-compose, hadolint, python3, cargo, curl, jq.
#         Only talks to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

PROJECT=${SMOKE_PROJECT:-neardup-smoke-$$}
SERVICE=neardup
BUILD_TIMEOUT=${SMOKE_BUILD_TIMEOUT:-3600}
READY_TIMEOUT=${SMOKE_READY_TIMEOUT:-60}
CURL=(curl -sS --max-time 10)
LABEL="label=io.podman.compose.project=$PROJECT"
T0=$(date +%s)

PASSED=()
FAILED=()
pass() { PASSED+=("$1"); echo "  ok    $1"; }
fail() { FAILED+=("$1"); echo "  FAIL  $1" >&2; }
log() { echo "== $*"; }

summary() { # exit status
  local secs=$(( $(date +%s) - T0 ))
  echo
  echo "==================== container smoke summary ===================="
  for c in "${PASSED[@]+"${PASSED[@]}"}"; do echo "PASS  $c"; done
  for c in "${FAILED[@]+"${FAILED[@]}"}"; do echo "FAIL  $c"; done
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
  if [ "$rc" -ne 0 ] || [ "${#FAILED[@]}" -ne 0 ]; then
    for c in $(project_containers); do
      echo "---- last log lines of $(podman inspect "$c" --format '{{.Name}}') ----" >&2
      podman logs --tail 30 "$c" >&2 2>&1
    done
  fi
  if [ "${COMPOSE_USED:-0}" = 1 ]; then
    # `down -v` removes the project's containers, pod, network and volume;
    # then anything left behind is removed by label (and the pod by name).
    "${COMPOSE[@]}" down -v -t 0 >/dev/null 2>&1
    for c in $(project_containers); do podman rm -f -t 0 "$c" >/dev/null 2>&1; done
    podman pod rm -f "pod_$PROJECT" >/dev/null 2>&1
    for v in $(podman volume ls -q --filter "$LABEL" 2>/dev/null); do podman volume rm -f "$v" >/dev/null 2>&1; done
    for n in $(podman network ls -q --filter "$LABEL" 2>/dev/null); do podman network rm -f "$n" >/dev/null 2>&1; done
    left="$(project_containers) $(podman volume ls -q --filter "$LABEL" 2>/dev/null) $(podman network ls -q --filter "$LABEL" 2>/dev/null)"
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

for tool in podman podman-compose hadolint python3 cargo curl jq; do
  command -v "$tool" >/dev/null || die "required tool missing: $tool"
done

# ---------------------------------------------------------------- static checks
log "hadolint Dockerfile"
if out=$(hadolint Dockerfile 2>&1); then
  pass "hadolint Dockerfile: clean"
else
  echo "$out" >&2
  fail "hadolint Dockerfile"
fi

log "build context vs cargo targets (.dockerignore)"
python3 scripts/check-dockerignore.py --self-test >/dev/null || die "check-dockerignore.py --self-test"
out=$(python3 scripts/check-dockerignore.py 2>&1) && pass "${out#check-dockerignore: }" \
  || { echo "$out" >&2; die "every cargo target is in the build context (scripts/check-dockerignore.py)"; }

# ---------------------------------------------------------------- compose
if [ -z "${SMOKE_PORT:-}" ]; then # a port the kernel just handed out on loopback
  SMOKE_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') \
    || die "no free loopback port found"
fi
export HOST_PORT=$SMOKE_PORT
BASE="http://127.0.0.1:$SMOKE_PORT"
COMPOSE=(podman-compose -f docker-compose.yml -p "$PROJECT")
IMAGE=$("${COMPOSE[@]}" config 2>/dev/null | awk '$1 == "image:" {print $2; exit}')
[ -n "$IMAGE" ] || die "podman-compose config: no image name for the service"

# ---------------------------------------------------------------- build
if [ "${SMOKE_SKIP_BUILD:-0}" = 1 ] && podman image exists "$IMAGE"; then
  log "reusing image $IMAGE (SMOKE_SKIP_BUILD=1)"
else
  # The compose file's build section (context ., the Dockerfile); --network host
  # lets cargo in the build reach the crate registry here, --pull=never uses the
  # local base images.
  log "podman-compose build -> $IMAGE (timeout ${BUILD_TIMEOUT}s)"
  start=$(date +%s)
  timeout "$BUILD_TIMEOUT" "${COMPOSE[@]}" \
    --podman-build-args "--pull=never --network host ${SMOKE_BUILD_ARGS:-}" build \
    || die "podman-compose build"
  BUILD_SECS=$(( $(date +%s) - start ))
  pass "podman-compose build (${BUILD_SECS}s)"
fi
SIZE=$(podman image inspect "$IMAGE" --format '{{.Size}}')
log "image $IMAGE: $SIZE bytes ($(( SIZE / 1024 / 1024 )) MiB)"
# HEALTHCHECK is kept only in the docker image format (BUILDAH_FORMAT=docker).
want='{"user":"10001:10001","health":["CMD","neardup","healthcheck"],"stop":"SIGTERM","volume":true}'
got=$(podman image inspect "$IMAGE" | jq -c '.[0] | {user: .Config.User, health: .Healthcheck.Test,
  stop: .Config.StopSignal, volume: (.Config.Volumes // {} | has("/data"))}')
[ "$got" = "$want" ] && pass "image config: USER 10001:10001, HEALTHCHECK neardup healthcheck, STOPSIGNAL SIGTERM, VOLUME /data" \
  || fail "image config: want $want, got $got"

# ---------------------------------------------------------------- helpers
# The service's container (the newest one of the project).
container() { podman ps -a --filter "$LABEL" --filter "label=io.podman.compose.service=$SERVICE" --format '{{.Names}}' | tail -n1; }

wait_ready() { # name
  local deadline=$(( $(date +%s) + READY_TIMEOUT ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if [ "$(podman inspect "$1" --format '{{.State.Running}}' 2>/dev/null)" != true ]; then
      return 1
    fi
    if "${CURL[@]}" -o /dev/null -f "$BASE/readyz" 2>/dev/null; then return 0; fi
    sleep 0.5
  done
  return 1
}

post() { # path json -> body; fails on non-2xx
  "${CURL[@]}" -f -X POST "$BASE$1" -H 'Content-Type: application/json' -d "$2"
}

# Planted pair: with the default recipe q1 has 12 shingles and q2 10, all of them
# shared with q1, so the exact Jaccard is 10/12 (cross-checked with /compare below).
Q1='What is the step by step guide to invest in share market in india?'
Q2='What is the step by step guide to invest in share market?'
EXPECTED_JACCARD='0.8333333333333334'

# Documents' shingle counts and q1's near-duplicates, as compact JSON.
snapshot_state() {
  local out="" id v
  for id in q1 q2 g1 g2; do
    v=$("${CURL[@]}" -f "$BASE/documents/$id" | jq -ec '.shingles') || return 1
    out+="$id=$v "
  done
  v=$("${CURL[@]}" -f "$BASE/similar?id=q1&limit=10" | jq -ec '[.results[] | {id, jaccard}]') || return 1
  echo "${out}similar=$v"
}

# Without systemd, podman logs "unable to get systemd connection ... healthchecks" on
# run/stop: it cannot schedule the HEALTHCHECK. Harmless; the check is run
# explicitly with `podman healthcheck run` below.
compose_up() {
  local out
  COMPOSE_USED=1
  out=$("${COMPOSE[@]}" up -d 2>&1) || { echo "$out" >&2; return 1; }
}

# ---------------------------------------------------------------- first container
log "podman-compose -p $PROJECT up -d (127.0.0.1:$SMOKE_PORT)"
compose_up || die "podman-compose up -d"
C1=$(container)
[ -n "$C1" ] || die "podman-compose up -d started no $SERVICE container"
VOLUME=$(podman inspect "$C1" --format '{{range .Mounts}}{{if eq .Destination "/data"}}{{.Name}}{{end}}{{end}}')
[ -n "$VOLUME" ] || die "$C1 has a named volume on /data"
ID1=$(podman inspect "$C1" --format '{{.Id}}')
log "container $C1 (${ID1:0:12}), volume $VOLUME"
wait_ready "$C1" || die "$C1 ready within ${READY_TIMEOUT}s (/readyz)"
pass "$C1 answers /readyz"

log "ingesting documents"
body=$(post /documents "$(jq -nc --arg t "$Q1" '{id:"q1", text:$t, metadata:{source:"smoke"}}')") \
  && [ "$(jq -r '.id' <<<"$body")" = q1 ] \
  && pass "POST /documents q1 -> $body" || fail "POST /documents q1 (${body:-no body})"

batch=$(jq -nc --arg q2 "$Q2" '{documents:[
  {id:"q2", text:$q2},
  {id:"g1", text:"An unrelated question about gardening in spring"},
  {id:"g2", text:"the night is dark and the moon is red"}]}')
body=$(post /documents/batch "$batch") \
  && [ "$(jq -r '.created' <<<"$body")" = 3 ] && [ "$(jq -r '.failed' <<<"$body")" = 0 ] \
  && pass "POST /documents/batch created 3" || fail "POST /documents/batch (${body:-no body})"

body=$("${CURL[@]}" -f "$BASE/similar?id=q1&limit=10" || true)
got=$(jq -r '[.results[] | select(.id == "q2") | .jaccard][0] // empty' <<<"$body" 2>/dev/null || true)
if [ "$got" = "$EXPECTED_JACCARD" ]; then
  pass "GET /similar?id=q1 finds q2 with jaccard $got"
else
  fail "GET /similar?id=q1 expected q2 with jaccard $EXPECTED_JACCARD, got: ${body:-no body}"
fi
cmp=$("${CURL[@]}" -f "$BASE/compare?a=q1&b=q2" || true)
if [ "$(jq -r '"\(.intersection)/\(.union) \(.jaccard)"' <<<"$cmp" 2>/dev/null)" = "10/12 $EXPECTED_JACCARD" ]; then
  pass "GET /compare?a=q1&b=q2 -> intersection 10, union 12"
else
  fail "GET /compare?a=q1&b=q2 expected 10/12, got: ${cmp:-no body}"
fi
others=$(jq -r '[.results[].id | select(. != "q2")] | join(",")' <<<"$body" 2>/dev/null || echo '?')
[ -z "$others" ] && pass "GET /similar?id=q1 returns no unrelated documents" \
  || fail "GET /similar?id=q1 returned unexpected ids: $others"

BEFORE=$(snapshot_state) || die "read back documents from $C1"
log "state before restart: $BEFORE"

log "healthcheck"
hc_ok=0
for _ in $(seq 1 10); do
  if podman healthcheck run "$C1" >/dev/null 2>&1; then hc_ok=1; break; fi
  sleep 1
done
[ "$hc_ok" = 1 ] && pass "podman healthcheck run $C1 (neardup healthcheck)" \
  || fail "podman healthcheck run $C1 did not succeed within 10 tries"

log "user"
uid=$(podman exec "$C1" id -u 2>/dev/null || podman top "$C1" uid 2>/dev/null | tail -n1 | tr -d ' ' || true)
if [ -n "$uid" ] && [ "$uid" != 0 ]; then
  pass "process runs as non-root (uid $uid)"
else
  fail "process runs as non-root (uid '${uid:-unknown}')"
fi

# ---------------------------------------------------------------- graceful stop
log "podman-compose stop (SIGTERM, stop_grace_period 20s)"
start=$(date +%s)
"${COMPOSE[@]}" stop >/dev/null 2>&1 || fail "podman-compose stop"
STOP_SECS=$(( $(date +%s) - start ))
code=$(podman inspect "$C1" --format '{{.State.ExitCode}}')
[ "$code" = 0 ] && pass "$C1 exited 0 on SIGTERM after ${STOP_SECS}s" \
  || fail "$C1 exit code $code on SIGTERM after ${STOP_SECS}s (137 = killed after the timeout)"
line=$(podman logs "$C1" 2>&1 | grep -F 'final snapshot written' | tail -n1 || true)
if [ -n "$line" ]; then
  pass "logs show the final snapshot: $line"
else
  fail "logs show \"final snapshot written\""
fi

# ---------------------------------------------------------------- new container, same volume
log "podman-compose down (keeps the volume), then up -d again"
"${COMPOSE[@]}" down >/dev/null 2>&1 || fail "podman-compose down"
podman container exists "$ID1" && fail "podman-compose down did not remove $C1"
podman volume exists "$VOLUME" || die "volume $VOLUME survives podman-compose down"
compose_up || die "podman-compose up -d (second time)"
C2=$(container)
[ -n "$C2" ] || die "second podman-compose up -d started no $SERVICE container"
ID2=$(podman inspect "$C2" --format '{{.Id}}')
V2=$(podman inspect "$C2" --format '{{range .Mounts}}{{if eq .Destination "/data"}}{{.Name}}{{end}}{{end}}')
[ "$ID1" != "$ID2" ] && [ "$V2" = "$VOLUME" ] && pass "new container ${ID2:0:12} on volume $VOLUME" \
  || fail "new container on the same volume (old ${ID1:0:12}, new ${ID2:0:12}, volume $V2)"
wait_ready "$C2" || die "$C2 ready within ${READY_TIMEOUT}s (/readyz)"
pass "new container answers /readyz"
AFTER=$(snapshot_state || true)
log "state after restart:  $AFTER"
[ "$AFTER" = "$BEFORE" ] && pass "documents survived into the new container (shingle counts and /similar identical)" \
  || fail "documents survived into the new container: before [$BEFORE] after [$AFTER]"

"${COMPOSE[@]}" stop >/dev/null 2>&1 || fail "podman-compose stop (second container)"
code=$(podman inspect "$C2" --format '{{.State.ExitCode}}')
[ "$code" = 0 ] && pass "new container exited 0 on SIGTERM" \
  || fail "new container exit code $code on SIGTERM"
